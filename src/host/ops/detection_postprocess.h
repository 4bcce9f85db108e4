// TFLite_Detection_PostProcess (the SSD tail): decodes centre-size box encodings against anchors,
// then selects boxes by non-maximum suppression, either "fast" (one NMS over each anchor's best
// class) or "regular" (NMS per class, merged by score), exactly as TFLite's custom kernel.
#pragma once

#include <cstdint>
#include <vector>

namespace tinycoral::host::ops {

struct DetectionParams {
  int32_t max_detections = 10;
  int32_t max_classes_per_detection = 1;  // fast NMS
  int32_t detections_per_class = 100;     // regular NMS
  bool use_regular_nms = false;
  float nms_score_threshold = 0.0f;
  float nms_iou_threshold = 0.5f;  // in (0, 1]
  int32_t num_classes = 1;         // without the background class
  float y_scale = 10.0f, x_scale = 10.0f, h_scale = 5.0f, w_scale = 5.0f;

  // Detections each output holds: max_detections x max_classes_per_detection (fast NMS).
  int32_t output_slots() const { return max_detections * max_classes_per_detection; }
};

struct CornerBox {
  float ymin = 0.0f, xmin = 0.0f, ymax = 0.0f, xmax = 0.0f;
};

// Reusable post-processor for `num_boxes` anchors and `score_columns` class scores per anchor
// (num_classes, or num_classes + 1 with a leading background column). Memory is reserved up front.
class DetectionPostProcess {
 public:
  DetectionPostProcess(int32_t num_boxes, int32_t score_columns, DetectionParams params);

  // encodings: [num_boxes, encoding_len] (ty, tx, th, tw first); anchors: [num_boxes, 4]
  // (ycenter, xcenter, h, w); scores: [num_boxes, score_columns]. Outputs: boxes
  // [output_slots, 4], classes and scores [output_slots], count [1]; unused slots are zero.
  // Throws Error when a decoded box is inverted (TFLite refuses those too).
  void run(const float* encodings, int32_t encoding_len, const float* anchors, const float* scores,
           float* out_boxes, float* out_classes, float* out_scores, float* out_count);

  const std::vector<CornerBox>& decoded() const { return decoded_; }

 private:
  void nms_single_class(const float* class_scores, int32_t max_out);
  void run_fast(const float* scores, float* boxes, float* classes, float* out_scores, float* count);
  void run_regular(const float* scores, float* boxes, float* classes, float* out_scores,
                   float* count);

  int32_t num_boxes_, columns_;
  DetectionParams p_;
  std::vector<CornerBox> decoded_;
  // Scratch, sized once.
  std::vector<float> keep_scores_, class_scores_, max_scores_, merged_scores_, sorted_values_;
  std::vector<int> keep_indices_, sorted_, selected_, class_order_, merged_indices_, merge_sorted_;
  std::vector<uint8_t> active_;
};

}  // namespace tinycoral::host::ops
