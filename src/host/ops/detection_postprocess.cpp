// TFLite_Detection_PostProcess (detection_postprocess.h), following TFLite's custom kernel step by
// step: box decoding in double rounded to float32, score threshold ">=", stable decreasing sort,
// greedy IoU suppression with ">" the threshold, the first maximum for one class per anchor.
#include "host/ops/detection_postprocess.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "host/kernel.h"
#include "host/ops/custom_options.h"
#include "host/registry.h"

namespace tinycoral::host::ops {
namespace {

void decreasing_stable_order(const float* values, int n, int* out) {
  std::iota(out, out + n, 0);
  std::stable_sort(out, out + n, [values](int i, int j) { return values[i] > values[j]; });
}

// The best `k` indices by decreasing value: the first maximum when k == 1, else partial_sort.
void decreasing_partial_order(const float* values, int n, int k, int* out) {
  if (k == 1) {
    int best = 0;
    for (int i = 1; i < n; ++i)
      if (values[i] > values[best]) best = i;
    out[0] = best;
    return;
  }
  std::iota(out, out + n, 0);
  std::partial_sort(out, out + k, out + n,
                    [values](int i, int j) { return values[i] > values[j]; });
}

float iou(const CornerBox& a, const CornerBox& b) {
  const float area_a = (a.ymax - a.ymin) * (a.xmax - a.xmin);
  const float area_b = (b.ymax - b.ymin) * (b.xmax - b.xmin);
  if (area_a <= 0 || area_b <= 0) return 0.0f;
  const float ymin = std::max(a.ymin, b.ymin), xmin = std::max(a.xmin, b.xmin);
  const float ymax = std::min(a.ymax, b.ymax), xmax = std::min(a.xmax, b.xmax);
  const float inter = std::max(ymax - ymin, 0.0f) * std::max(xmax - xmin, 0.0f);
  return inter / (area_a + area_b - inter);
}

void write_box(float* out, const CornerBox& b) {
  out[0] = b.ymin;
  out[1] = b.xmin;
  out[2] = b.ymax;
  out[3] = b.xmax;
}

}  // namespace

DetectionPostProcess::DetectionPostProcess(int32_t num_boxes, int32_t score_columns,
                                           DetectionParams params)
    : num_boxes_(num_boxes), columns_(score_columns), p_(params) {
  const size_t n = static_cast<size_t>(num_boxes);
  const size_t md = static_cast<size_t>(p_.max_detections);
  decoded_.resize(n);
  keep_scores_.reserve(n);
  keep_indices_.reserve(n);
  sorted_.resize(n);
  selected_.reserve(n);
  active_.resize(n);
  class_scores_.resize(n);
  max_scores_.resize(n);
  class_order_.resize(n * static_cast<size_t>(p_.num_classes));
  merged_scores_.resize(n + md);
  merged_indices_.resize(n + md);
  merge_sorted_.resize(n + md);
  sorted_values_.resize(md);
}

// Greedy NMS over one score per anchor: keeps anchors with score >= threshold, visits them by
// decreasing score and drops every later one whose IoU with a kept box exceeds the threshold.
void DetectionPostProcess::nms_single_class(const float* class_scores, int32_t max_out) {
  keep_scores_.clear();
  keep_indices_.clear();
  for (int i = 0; i < num_boxes_; ++i) {
    if (class_scores[i] >= p_.nms_score_threshold) {
      keep_scores_.push_back(class_scores[i]);
      keep_indices_.push_back(i);
    }
  }
  const int kept = static_cast<int>(keep_scores_.size());
  decreasing_stable_order(keep_scores_.data(), kept, sorted_.data());
  const size_t output_size = static_cast<size_t>(std::min(kept, max_out));
  selected_.clear();
  int active_count = kept;
  std::fill(active_.begin(), active_.begin() + kept, uint8_t{1});
  for (int i = 0; i < kept; ++i) {
    if (active_count == 0 || selected_.size() >= output_size) break;
    if (active_[i] != 1) continue;
    selected_.push_back(keep_indices_[sorted_[i]]);
    active_[i] = 0;
    --active_count;
    for (int j = i + 1; j < kept; ++j) {
      if (active_[j] != 1) continue;
      if (iou(decoded_[keep_indices_[sorted_[i]]], decoded_[keep_indices_[sorted_[j]]]) >
          p_.nms_iou_threshold) {
        active_[j] = 0;
        --active_count;
      }
    }
  }
}

void DetectionPostProcess::run_fast(const float* scores, float* boxes, float* classes,
                                    float* out_scores, float* count) {
  const int label_offset = columns_ - p_.num_classes;
  const int per_anchor = std::min(p_.max_classes_per_detection, p_.num_classes);
  for (int row = 0; row < num_boxes_; ++row) {
    const float* box_scores = scores + static_cast<size_t>(row) * columns_ + label_offset;
    int* order = class_order_.data() + static_cast<size_t>(row) * p_.num_classes;
    decreasing_partial_order(box_scores, p_.num_classes, per_anchor, order);
    max_scores_[row] = box_scores[order[0]];
  }
  nms_single_class(max_scores_.data(), p_.max_detections);
  int written = 0;
  for (int index : selected_) {
    const float* box_scores = scores + static_cast<size_t>(index) * columns_ + label_offset;
    const int* order = class_order_.data() + static_cast<size_t>(index) * p_.num_classes;
    for (int col = 0; col < per_anchor; ++col) {
      const int slot = p_.max_classes_per_detection * written + col;
      write_box(boxes + 4 * slot, decoded_[index]);
      classes[slot] = static_cast<float>(order[col]);
      out_scores[slot] = box_scores[order[col]];
    }
    ++written;
  }
  *count = static_cast<float>(written);
}

void DetectionPostProcess::run_regular(const float* scores, float* boxes, float* classes,
                                       float* out_scores, float* count) {
  const int label_offset = columns_ - p_.num_classes;
  const int max_det = p_.max_detections;
  int merged = 0;  // entries of merged_* sorted best first, at most max_det
  for (int col = 0; col < p_.num_classes; ++col) {
    for (int row = 0; row < num_boxes_; ++row)
      class_scores_[row] = scores[static_cast<size_t>(row) * columns_ + col + label_offset];
    nms_single_class(class_scores_.data(), p_.detections_per_class);
    int n = merged;
    for (int index : selected_) {
      merged_indices_[n] = index * columns_ + col + label_offset;
      merged_scores_[n] = class_scores_[index];
      ++n;
    }
    const int keep = std::min(n, max_det);
    decreasing_partial_order(merged_scores_.data(), n, keep, merge_sorted_.data());
    for (int r = 0; r < keep; ++r) {
      const int t = merge_sorted_[r];
      merge_sorted_[r] = merged_indices_[t];
      sorted_values_[r] = merged_scores_[t];
    }
    for (int r = 0; r < keep; ++r) {
      merged_indices_[r] = merge_sorted_[r];
      merged_scores_[r] = sorted_values_[r];
    }
    merged = keep;
  }
  for (int slot = 0; slot < merged; ++slot) {
    const int anchor = merged_indices_[slot] / columns_;
    const int cls = merged_indices_[slot] - anchor * columns_ - label_offset;
    write_box(boxes + 4 * slot, decoded_[anchor]);
    classes[slot] = static_cast<float>(cls);
    out_scores[slot] = merged_scores_[slot];
  }
  *count = static_cast<float>(merged);
}

void DetectionPostProcess::run(const float* encodings, int32_t encoding_len, const float* anchors,
                               const float* scores, float* out_boxes, float* out_classes,
                               float* out_scores, float* out_count) {
  for (int i = 0; i < num_boxes_; ++i) {
    const float* e = encodings + static_cast<size_t>(i) * encoding_len;
    const float* a = anchors + static_cast<size_t>(i) * 4;
    // TFLite forms these in double and rounds each to float32.
    const double ay = a[0], ax = a[1], ah = a[2], aw = a[3];
    const float yc = static_cast<float>(e[0] / static_cast<double>(p_.y_scale) * ah + ay);
    const float xc = static_cast<float>(e[1] / static_cast<double>(p_.x_scale) * aw + ax);
    const float half_h =
        static_cast<float>(0.5 * std::exp(e[2] / static_cast<double>(p_.h_scale)) * ah);
    const float half_w =
        static_cast<float>(0.5 * std::exp(e[3] / static_cast<double>(p_.w_scale)) * aw);
    CornerBox& b = decoded_[i];
    b = {yc - half_h, xc - half_w, yc + half_h, xc + half_w};
    if (b.ymin > b.ymax || b.xmin > b.xmax)
      fail("TFLite_Detection_PostProcess: anchor ", i, " decodes to an inverted box");
  }
  const size_t slots = static_cast<size_t>(p_.output_slots());
  std::memset(out_boxes, 0, sizeof(float) * 4 * slots);
  std::memset(out_classes, 0, sizeof(float) * slots);
  std::memset(out_scores, 0, sizeof(float) * slots);
  if (p_.use_regular_nms)
    run_regular(scores, out_boxes, out_classes, out_scores, out_count);
  else
    run_fast(scores, out_boxes, out_classes, out_scores, out_count);
}

}  // namespace tinycoral::host::ops

namespace tinycoral::host {
namespace {

using container::TensorType;

class DetectionKernel final : public Kernel {
 public:
  DetectionKernel(int32_t boxes, int32_t encoding_len, int32_t columns, ops::DetectionParams p)
      : post_(boxes, columns, p), encoding_len_(encoding_len) {
    encodings_.resize(static_cast<size_t>(boxes) * encoding_len);
    anchors_.resize(static_cast<size_t>(boxes) * 4);
    scores_.resize(static_cast<size_t>(boxes) * columns);
  }

  void eval(OpContext& ctx) override {
    const TensorView& enc = ctx.inputs[0];
    const TensorView& cls = ctx.inputs[1];
    const TensorView& anc = ctx.inputs[2];
    const float* e = enc.as<float>();
    const float* a = anc.as<float>();
    const float* s = cls.as<float>();
    if (enc.type() == TensorType::kUInt8) {
      // Box encodings and anchors: (q - zp) * scale in float32.
      dequantize_f32(enc, encodings_.data());
      dequantize_f32(anc, anchors_.data());
      e = encodings_.data();
      a = anchors_.data();
    }
    if (cls.type() == TensorType::kUInt8) {
      // Class scores: TFLite's Dequantize, scale * (q - zp) with a double scale.
      const double scale = cls.scale();
      const int32_t zp = cls.zero_point();
      for (size_t i = 0; i < scores_.size(); ++i)
        scores_[i] = static_cast<float>(scale * (cls.as<uint8_t>()[i] - zp));
      s = scores_.data();
    }
    post_.run(e, encoding_len_, a, s, ctx.outputs[0].mutable_as<float>(),
              ctx.outputs[1].mutable_as<float>(), ctx.outputs[2].mutable_as<float>(),
              ctx.outputs[3].mutable_as<float>());
  }

 private:
  static void dequantize_f32(const TensorView& t, float* out) {
    const float zp = static_cast<float>(t.zero_point());
    const float scale = t.scale();
    for (int64_t i = 0; i < t.elements(); ++i)
      out[i] = (static_cast<float>(t.as<uint8_t>()[i]) - zp) * scale;
  }

  ops::DetectionPostProcess post_;
  int32_t encoding_len_;
  std::vector<float> encodings_, anchors_, scores_;
};

std::unique_ptr<Kernel> make_detection_postprocess(const OpContext& ctx) {
  ctx.require_inputs(3, 3);
  ctx.require_outputs(4);
  const ops::CustomOptions o(ctx.custom_options(), ctx.op_name);
  ops::DetectionParams p;
  p.max_detections = o.integer("max_detections", 0, 100000);
  p.max_classes_per_detection = o.integer("max_classes_per_detection", 1, 100000);
  p.detections_per_class = o.integer_or("detections_per_class", 100, 1, 1000000);
  p.use_regular_nms = o.number_or("use_regular_nms", 0) != 0;
  p.nms_score_threshold = static_cast<float>(o.number("nms_score_threshold"));
  p.nms_iou_threshold = static_cast<float>(o.number("nms_iou_threshold"));
  p.num_classes = o.integer("num_classes", 1, 100000);
  p.y_scale = static_cast<float>(o.number("y_scale"));
  p.x_scale = static_cast<float>(o.number("x_scale"));
  p.h_scale = static_cast<float>(o.number("h_scale"));
  p.w_scale = static_cast<float>(o.number("w_scale"));
  ctx.require(p.y_scale > 0.0f && p.x_scale > 0.0f && p.h_scale > 0.0f && p.w_scale > 0.0f,
              "box scales must be positive");
  ctx.require(p.nms_iou_threshold > 0.0f && p.nms_iou_threshold <= 1.0f,
              "nms_iou_threshold must be in (0, 1]");
  ctx.require(int64_t{p.max_detections} * p.max_classes_per_detection <= 1000000,
              "max_detections x max_classes_per_detection is too large");

  const TensorView& enc = ctx.input(0);
  const TensorView& cls = ctx.input(1);
  const TensorView& anc = ctx.input(2);
  ctx.require(enc.rank() == 3 && enc.dim(0) == 1 && enc.dim(2) >= 4,
              "box encodings must have shape [1, boxes, >=4]");
  const int32_t boxes = enc.dim(1);
  ctx.require(cls.rank() == 3 && cls.dim(0) == 1 && cls.dim(1) == boxes,
              "class predictions must have shape [1, boxes, classes]");
  ctx.require(anc.rank() == 2 && anc.dim(0) == boxes && anc.dim(1) == 4,
              "anchors must have shape [boxes, 4]");
  const int32_t columns = cls.dim(2);
  ctx.require(columns == p.num_classes || columns == p.num_classes + 1,
              cat("class predictions have ", columns, " columns, num_classes is ", p.num_classes));
  ctx.require(enc.type() == TensorType::kFloat32 || enc.type() == TensorType::kUInt8,
              "box encodings must be float32 or uint8");
  ctx.require(anc.type() == enc.type(), "anchors must have the type of the box encodings");
  ctx.require(cls.type() == TensorType::kFloat32 || cls.type() == TensorType::kUInt8,
              "class predictions must be float32 or uint8");
  const int64_t slots = p.output_slots();
  const int64_t sizes[4] = {slots * 4, slots, slots, 1};
  for (int i = 0; i < 4; ++i) {
    const TensorView& out = ctx.output(static_cast<size_t>(i));
    ctx.require(out.type() == TensorType::kFloat32, "outputs must be float32");
    ctx.require(out.elements() == sizes[i], cat("output ", i, " holds ", out.elements(),
                                                " values, the options need ", sizes[i]));
  }
  return std::make_unique<DetectionKernel>(boxes, enc.dim(2), columns, p);
}

}  // namespace

void register_detection_postprocess(Registry& registry) {
  registry.add_custom("TFLite_Detection_PostProcess", &make_detection_postprocess);
}

}  // namespace tinycoral::host
