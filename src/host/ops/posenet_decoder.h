// The PoseNet decoder (custom operator "PosenetDecoderOp" of Google's PoseNet models): turns the
// network's keypoint heatmaps (logits), short-range offsets and mid-range (edge) offsets into
// poses, following the PersonLab decoding (arXiv:1803.08225) exactly as Google's op does it, in
// float32, so that its keypoints match Google's references (docs/host_ops.md).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace tinycoral::host::ops {

inline constexpr int kPoseKeypoints = 17;
inline constexpr int kPoseEdges = 16;  // each used forward and backward
// Google's op sizes its instance-mask output [1, max_detections, 33, 33] whatever the inputs.
inline constexpr int kInstanceMaskSize = 33;

struct PosenetParams {
  int32_t max_detections = 10;
  float score_threshold = 0.5f;  // probability, compared with the decoded scores
  int32_t stride = 16;           // output keypoints = block coordinates * stride
  float nms_radius = 20.0f;      // in input pixels
};

struct PosePoint {
  float y = 0.0f, x = 0.0f;
};

// Reusable decoder: all memory is reserved by the constructor for a heat map of height x width
// blocks, so decode() does not allocate.
class PosenetDecoder {
 public:
  PosenetDecoder(int32_t height, int32_t width, PosenetParams params);

  // scores: [H, W, 17] logits; shorts: [H, W, 34] (17 dy then 17 dx) and mids: [H, W, 64]
  // (16 forward dy, 16 forward dx, 16 backward dy, 16 backward dx), both offsets already divided
  // by the stride (block units). Writes up to max_detections poses: keypoints [max_det, 17, (y, x)]
  // in input pixels, keypoint scores [max_det, 17] and pose scores [max_det]; returns the count.
  // Entries beyond the count are zeroed.
  int decode(const float* scores, const float* shorts, const float* mids, float* keypoints,
             float* keypoint_scores, float* pose_scores);

  struct Candidate {
    PosePoint point;
    int id = 0;
    float score = 0.0f;
  };

 private:
  using Keypoints = std::array<PosePoint, kPoseKeypoints>;
  using Scores = std::array<float, kPoseKeypoints>;

  void decode_pose(const float* scores, const float* shorts, const float* mids,
                   const Candidate& root, Keypoints& pose, Scores& pose_scores);

  int32_t height_, width_;
  PosenetParams params_;
  std::vector<Candidate> roots_;     // heap of root candidates
  std::vector<Candidate> frontier_;  // heap of one pose's keypoints to visit
  std::vector<Keypoints> poses_;     // decoded poses in detection order
  std::vector<Scores> pose_keypoint_scores_;
  std::vector<float> instance_scores_;
  std::vector<int> order_;
};

// BodyPix's instance masks (the op's 4-input form): each block (y, x) of the long-offset grid
// `longs` [H, W, 34] (17 dy then 17 dx, in blocks) follows the long offsets of every keypoint three
// times from its own position to an embedding (in pixels), and belongs to the pose among the first
// `num_poses` of `keypoints` ([n, 17, (y, x)] in pixels, the decoder's output) whose keypoints are
// nearest in summed squared distance (the first on ties; pose 0 when there is no pose, as in
// Google's op). Writes 1.0 at masks[(pose * W + y) * H + x] (Google's indexing, the plain
// [pose][y][x] layout for the square grid it is used with) after zeroing all `mask_count` values.
void decode_instance_masks(const float* longs, int32_t height, int32_t width, int32_t stride,
                           const float* keypoints, int num_poses, float* masks, size_t mask_count);

}  // namespace tinycoral::host::ops
