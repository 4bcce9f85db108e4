// PosenetDecoderOp (posenet_decoder.h): the PersonLab greedy decoder as Google's custom operator
// runs it. The arithmetic (float32 bilinear sampling, the 5 short-offset refinement steps, the
// log-odds threshold, max-heaps ordered by score, the soft keypoint NMS and the mean over all 17
// keypoint scores) follows Google's op so the same network output gives the same poses.
#include "host/ops/posenet_decoder.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "host/kernel.h"
#include "host/ops/custom_options.h"
#include "host/registry.h"

namespace tinycoral::host::ops {
namespace {

enum Keypoint {
  kNose,
  kLeftEye,
  kRightEye,
  kLeftEar,
  kRightEar,
  kLeftShoulder,
  kRightShoulder,
  kLeftElbow,
  kRightElbow,
  kLeftWrist,
  kRightWrist,
  kLeftHip,
  kRightHip,
  kLeftKnee,
  kRightKnee,
  kLeftAnkle,
  kRightAnkle
};

// The 16 skeleton edges (parent -> child). Edge e uses mid-offset channels e (dy) and 16 + e (dx);
// the same edge walked backwards (child -> parent) uses channels 32 + e and 48 + e.
constexpr std::array<std::array<int, 2>, kPoseEdges> kEdges = {{
    {kNose, kLeftEye},
    {kLeftEye, kLeftEar},
    {kNose, kRightEye},
    {kRightEye, kRightEar},
    {kNose, kLeftShoulder},
    {kLeftShoulder, kLeftElbow},
    {kLeftElbow, kLeftWrist},
    {kLeftShoulder, kLeftHip},
    {kLeftHip, kLeftKnee},
    {kLeftKnee, kLeftAnkle},
    {kNose, kRightShoulder},
    {kRightShoulder, kRightElbow},
    {kRightElbow, kRightWrist},
    {kRightShoulder, kRightHip},
    {kRightHip, kRightKnee},
    {kRightKnee, kRightAnkle},
}};

// Neighbours of each keypoint in the decoder's visiting order: all forward edges leaving it (in
// edge order), then all backward edges leaving it. `channel` is the first mid-offset channel (dy).
struct Neighbour {
  int child = 0;
  int channel = 0;
};
struct Adjacency {
  std::array<std::array<Neighbour, 4>, kPoseKeypoints> list{};
  std::array<int, kPoseKeypoints> count{};
};

constexpr Adjacency make_adjacency() {
  Adjacency a{};
  for (int e = 0; e < kPoseEdges; ++e) {
    const int parent = kEdges[e][0];
    a.list[parent][a.count[parent]++] = {kEdges[e][1], e};
  }
  for (int e = 0; e < kPoseEdges; ++e) {
    const int parent = kEdges[e][1];
    a.list[parent][a.count[parent]++] = {kEdges[e][0], 2 * kPoseEdges + e};
  }
  return a;
}
constexpr Adjacency kAdjacency = make_adjacency();

// Clamp as Google's op; a NaN (possible only from float inputs) goes to `lo` so that the
// coordinates always convert to valid indices.
float clampf(float v, float lo, float hi) {
  if (!(v >= lo)) return lo;
  return hi < v ? hi : v;
}

float squared_distance(const PosePoint& a, const PosePoint& b) {
  const float dy = b.y - a.y;
  const float dx = b.x - a.x;
  return dy * dy + dx * dx;
}

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// The probability threshold as a logit (Google computes it in double with a 1e-6 guard).
float logodds(float p) { return static_cast<float>(-std::log(1.0f / (p + 1E-6) - 1.0f)); }

// Bilinear sample of channels c0 and c1 of a [H, W, C] tensor at (y, x). Corners come from the
// position clamped into the grid, the weights from the unclamped position (as Google's op).
struct Sampler {
  const float* data;
  int32_t height, width, channels;

  void sample(float y, float x, int c0, int c1, float* r0, float* r1) const {
    const float yp = clampf(y, 0.0f, static_cast<float>(height) - 1.0f);
    const float xp = clampf(x, 0.0f, static_cast<float>(width) - 1.0f);
    const int y0 = static_cast<int>(std::floor(yp)), y1 = static_cast<int>(std::ceil(yp));
    const int x0 = static_cast<int>(std::floor(xp)), x1 = static_cast<int>(std::ceil(xp));
    const float ly = y - static_cast<float>(y0);
    const float lx = x - static_cast<float>(x0);
    const float* tl = data + (static_cast<size_t>(y0) * width + x0) * channels;
    const float* tr = data + (static_cast<size_t>(y0) * width + x1) * channels;
    const float* bl = data + (static_cast<size_t>(y1) * width + x0) * channels;
    const float* br = data + (static_cast<size_t>(y1) * width + x1) * channels;
    auto at = [&](int c) {
      return (1 - ly) * ((1 - lx) * tl[c] + lx * tr[c]) + ly * ((1 - lx) * bl[c] + lx * br[c]);
    };
    *r0 = at(c0);
    if (r1 != nullptr) *r1 = at(c1);
  }
  float sample(const PosePoint& p, int c) const {
    float r;
    sample(p.y, p.x, c, c, &r, nullptr);
    return r;
  }
};

// Max-heap order of std::priority_queue with "lower score = lower priority".
bool lower_score(const PosenetDecoder::Candidate& a, const PosenetDecoder::Candidate& b) {
  return a.score < b.score;
}

// Indices of `values` by decreasing value (std::sort, as Google's op).
void decreasing_order(const float* values, int n, int* out) {
  std::iota(out, out + n, 0);
  std::sort(out, out + n, [values](int i, int j) { return values[i] > values[j]; });
}

// Mean of the keypoint scores taken in decreasing order (the summation order matters in float).
float mean_score(const float* scores, const bool* skip) {
  int idx[kPoseKeypoints];
  decreasing_order(scores, kPoseKeypoints, idx);
  float total = 0.0f;
  for (int k = 0; k < kPoseKeypoints; ++k)
    if (skip == nullptr || !skip[idx[k]]) total += scores[idx[k]];
  return total / kPoseKeypoints;
}

}  // namespace

PosenetDecoder::PosenetDecoder(int32_t height, int32_t width, PosenetParams params)
    : height_(height), width_(width), params_(params) {
  roots_.reserve(static_cast<size_t>(height) * width * kPoseKeypoints);
  frontier_.reserve(kPoseKeypoints * (1 + 4));
  poses_.resize(static_cast<size_t>(params.max_detections));
  pose_keypoint_scores_.resize(static_cast<size_t>(params.max_detections));
  instance_scores_.reserve(static_cast<size_t>(params.max_detections));
  order_.resize(static_cast<size_t>(params.max_detections));
}

void PosenetDecoder::decode_pose(const float* scores, const float* shorts, const float* mids,
                                 const Candidate& root, Keypoints& pose, Scores& pose_scores) {
  const Sampler score_map{scores, height_, width_, kPoseKeypoints};
  const Sampler short_map{shorts, height_, width_, 2 * kPoseKeypoints};
  const Sampler mid_map{mids, height_, width_, 4 * kPoseEdges};
  const float max_y = static_cast<float>(height_) - 1.0f;
  const float max_x = static_cast<float>(width_) - 1.0f;

  bool decoded[kPoseKeypoints] = {};
  frontier_.clear();
  frontier_.push_back({root.point, root.id, score_map.sample(root.point, root.id)});
  while (!frontier_.empty()) {
    std::pop_heap(frontier_.begin(), frontier_.end(), lower_score);
    const Candidate current = frontier_.back();
    frontier_.pop_back();
    if (decoded[current.id]) continue;
    pose[current.id] = current.point;
    pose_scores[current.id] = current.score;
    decoded[current.id] = true;
    for (int j = 0; j < kAdjacency.count[current.id]; ++j) {
      const Neighbour& n = kAdjacency.list[current.id][j];
      if (decoded[n.child]) continue;
      // Jump along the edge with the mid-range offset, then refine with the child's short-range
      // offsets 5 times (Google's fixed refinement count).
      float dy, dx;
      mid_map.sample(current.point.y, current.point.x, n.channel, n.channel + kPoseEdges, &dy, &dx);
      float y = clampf(current.point.y + dy, 0.0f, max_y);
      float x = clampf(current.point.x + dx, 0.0f, max_x);
      for (int step = 0; step < 5; ++step) {
        short_map.sample(y, x, n.child, kPoseKeypoints + n.child, &dy, &dx);
        y = clampf(y + dy, 0.0f, max_y);
        x = clampf(x + dx, 0.0f, max_x);
      }
      const PosePoint child{y, x};
      frontier_.push_back({child, n.child, score_map.sample(child, n.child)});
      std::push_heap(frontier_.begin(), frontier_.end(), lower_score);
    }
  }
}

int PosenetDecoder::decode(const float* scores, const float* shorts, const float* mids,
                           float* keypoints, float* keypoint_scores, float* pose_scores) {
  const int max_det = params_.max_detections;
  const float min_logit = logodds(params_.score_threshold);
  const float nms_radius = params_.nms_radius / static_cast<float>(params_.stride);
  const float r2 = nms_radius * nms_radius;
  const float max_y = static_cast<float>(height_) - 1.0f;
  const float max_x = static_cast<float>(width_) - 1.0f;

  // Root candidates: every keypoint logit >= threshold that is a maximum of its 3x3 neighbourhood,
  // placed at its block refined by its short-range offset.
  roots_.clear();
  constexpr int kRadius = 1;
  for (int y = 0; y < height_; ++y) {
    for (int x = 0; x < width_; ++x) {
      const size_t cell = static_cast<size_t>(y) * width_ + x;
      for (int j = 0; j < kPoseKeypoints; ++j) {
        const float score = scores[cell * kPoseKeypoints + j];
        if (!(score >= min_logit)) continue;
        bool local_max = true;
        for (int yy = std::max(y - kRadius, 0);
             local_max && yy < std::min(y + kRadius + 1, height_); ++yy)
          for (int xx = std::max(x - kRadius, 0); xx < std::min(x + kRadius + 1, width_); ++xx)
            if (scores[(static_cast<size_t>(yy) * width_ + xx) * kPoseKeypoints + j] > score) {
              local_max = false;
              break;
            }
        if (!local_max) continue;
        const float dy = shorts[cell * 2 * kPoseKeypoints + j];
        const float dx = shorts[cell * 2 * kPoseKeypoints + kPoseKeypoints + j];
        roots_.push_back({{clampf(static_cast<float>(y) + dy, 0.0f, max_y),
                           clampf(static_cast<float>(x) + dx, 0.0f, max_x)},
                          j,
                          score});
        std::push_heap(roots_.begin(), roots_.end(), lower_score);
      }
    }
  }

  // Greedy decoding from the strongest root; a root close to the same keypoint of an accepted pose
  // is skipped.
  int count = 0;
  instance_scores_.clear();
  while (count < max_det && !roots_.empty()) {
    std::pop_heap(roots_.begin(), roots_.end(), lower_score);
    const Candidate root = roots_.back();
    roots_.pop_back();
    bool suppressed = false;
    for (int p = 0; p < count && !suppressed; ++p)
      suppressed = squared_distance(root.point, poses_[p][root.id]) <= r2;
    if (suppressed) continue;
    Keypoints& pose = poses_[count];
    Scores& ks = pose_keypoint_scores_[count];
    pose.fill({-1.0f, -1.0f});
    ks.fill(-1E5f);
    decode_pose(scores, shorts, mids, root, pose, ks);
    for (float& s : ks) s = sigmoid(s);
    const float instance = mean_score(ks.data(), nullptr);
    if (instance >= params_.score_threshold) {
      ++count;
      instance_scores_.push_back(instance);
    }
  }

  // Soft keypoint NMS: a keypoint within the radius of the same keypoint of a better pose no
  // longer counts towards the pose score; then re-sort by the new scores.
  decreasing_order(instance_scores_.data(), count, order_.data());
  for (int i = 0; i < count; ++i) {
    const int current = order_[i];
    bool occluded[kPoseKeypoints] = {};
    for (int j = 0; j < i; ++j) {
      const int previous = order_[j];
      for (int k = 0; k < kPoseKeypoints; ++k)
        if (squared_distance(poses_[current][k], poses_[previous][k]) <= r2) occluded[k] = true;
    }
    instance_scores_[current] = mean_score(pose_keypoint_scores_[current].data(), occluded);
  }
  decreasing_order(instance_scores_.data(), count, order_.data());

  std::memset(keypoints, 0, sizeof(float) * max_det * kPoseKeypoints * 2);
  std::memset(keypoint_scores, 0, sizeof(float) * max_det * kPoseKeypoints);
  std::memset(pose_scores, 0, sizeof(float) * max_det);
  const float stride = static_cast<float>(params_.stride);
  int written = 0;
  for (int i = 0; i < count; ++i) {
    const int index = order_[i];
    if (instance_scores_[index] < params_.score_threshold) break;
    for (int k = 0; k < kPoseKeypoints; ++k) {
      keypoints[(written * kPoseKeypoints + k) * 2 + 0] = poses_[index][k].y * stride;
      keypoints[(written * kPoseKeypoints + k) * 2 + 1] = poses_[index][k].x * stride;
      keypoint_scores[written * kPoseKeypoints + k] = pose_keypoint_scores_[index][k];
    }
    pose_scores[written] = instance_scores_[index];
    ++written;
  }
  return written;
}

void decode_instance_masks(const float* longs, int32_t height, int32_t width, int32_t stride,
                           const float* keypoints, int num_poses, float* masks, size_t mask_count) {
  std::fill(masks, masks + mask_count, 0.0f);
  const Sampler long_map{longs, height, width, 2 * kPoseKeypoints};
  const float max_y = static_cast<float>(height) - 1.0f;
  const float max_x = static_cast<float>(width) - 1.0f;
  constexpr int kSteps = 3;  // Google's op: 2 refinement steps after the first jump
  std::array<PosePoint, kPoseKeypoints> embedding;
  for (int32_t y = 0; y < height; ++y) {
    for (int32_t x = 0; x < width; ++x) {
      for (int k = 0; k < kPoseKeypoints; ++k) {
        float py = static_cast<float>(y), px = static_cast<float>(x);
        for (int step = 0; step < kSteps; ++step) {
          float dy, dx;
          long_map.sample(py, px, k, kPoseKeypoints + k, &dy, &dx);
          py = clampf(py + dy, 0.0f, max_y);
          px = clampf(px + dx, 0.0f, max_x);
        }
        embedding[k] = {py * static_cast<float>(stride), px * static_cast<float>(stride)};
      }
      int best = 0;
      float best_distance = 0.0f;
      for (int pose = 0; pose < num_poses; ++pose) {
        float distance = 0.0f;
        for (int k = 0; k < kPoseKeypoints; ++k) {
          const float* kp = keypoints + (static_cast<size_t>(pose) * kPoseKeypoints + k) * 2;
          distance += squared_distance(embedding[k], PosePoint{kp[0], kp[1]});
        }
        if (pose == 0 || distance < best_distance) {
          best = pose;
          best_distance = distance;
        }
      }
      masks[(static_cast<size_t>(best) * width + y) * height + x] = 1.0f;
    }
  }
}

}  // namespace tinycoral::host::ops

namespace tinycoral::host {
namespace {

using container::TensorType;

// Dequantizes one decoder input to float32, times 1/stride for the offsets (Google's op: the scale
// product is formed in double and rounded to float32; the zero point is subtracted in float32).
void dequantize_input(const TensorView& t, float extra_scale, float* out) {
  const size_t n = static_cast<size_t>(t.elements());
  const float scale =
      static_cast<float>(static_cast<double>(t.scale()) * static_cast<double>(extra_scale));
  const float zp = static_cast<float>(t.zero_point());
  switch (t.type()) {
    case TensorType::kUInt8:
      for (size_t i = 0; i < n; ++i) out[i] = (static_cast<float>(t.as<uint8_t>()[i]) - zp) * scale;
      break;
    case TensorType::kInt8:
      for (size_t i = 0; i < n; ++i) out[i] = (static_cast<float>(t.as<int8_t>()[i]) - zp) * scale;
      break;
    default:
      for (size_t i = 0; i < n; ++i) out[i] = t.as<float>()[i] * extra_scale;
      break;
  }
}

class PosenetKernel final : public Kernel {
 public:
  PosenetKernel(int32_t h, int32_t w, ops::PosenetParams params, bool masks)
      : decoder_(h, w, params), params_(params), masks_(masks) {
    scores_.resize(static_cast<size_t>(h) * w * ops::kPoseKeypoints);
    shorts_.resize(static_cast<size_t>(h) * w * 2 * ops::kPoseKeypoints);
    mids_.resize(static_cast<size_t>(h) * w * 4 * ops::kPoseEdges);
    if (masks)
      longs_.resize(static_cast<size_t>(ops::kInstanceMaskSize) * ops::kInstanceMaskSize * 2 *
                    ops::kPoseKeypoints);
  }
  void eval(OpContext& ctx) override {
    const float inv_stride = static_cast<float>(1.0 / params_.stride);
    dequantize_input(ctx.inputs[0], 1.0f, scores_.data());
    dequantize_input(ctx.inputs[1], inv_stride, shorts_.data());
    dequantize_input(ctx.inputs[2], inv_stride, mids_.data());
    const int count = decoder_.decode(
        scores_.data(), shorts_.data(), mids_.data(), ctx.outputs[0].mutable_as<float>(),
        ctx.outputs[1].mutable_as<float>(), ctx.outputs[2].mutable_as<float>());
    *ctx.outputs[3].mutable_as<float>() = static_cast<float>(count);
    if (!masks_) return;
    dequantize_input(ctx.inputs[3], inv_stride, longs_.data());
    const TensorView& masks = ctx.outputs[4];
    ops::decode_instance_masks(longs_.data(), ops::kInstanceMaskSize, ops::kInstanceMaskSize,
                               params_.stride, ctx.outputs[0].as<float>(), count,
                               masks.mutable_as<float>(), static_cast<size_t>(masks.elements()));
  }

 private:
  ops::PosenetDecoder decoder_;
  ops::PosenetParams params_;
  bool masks_;
  std::vector<float> scores_, shorts_, mids_, longs_;
};

std::unique_ptr<Kernel> make_posenet_decoder(const OpContext& ctx) {
  // Google's two forms: 3 inputs -> 4 outputs, or with long offsets 4 inputs -> 4 + masks.
  ctx.require_inputs(3, 4);
  const bool masks = ctx.num_inputs() == 4;
  ctx.require_outputs(masks ? 5 : 4);
  const ops::CustomOptions o(ctx.custom_options(), ctx.op_name);
  ops::PosenetParams p;
  p.max_detections = o.integer("max_detections", 1, 1000);
  p.score_threshold = static_cast<float>(o.number("score_threshold"));
  p.stride = o.integer("stride", 1, 1024);
  p.nms_radius = static_cast<float>(o.number("nms_radius"));
  const int channels[3] = {ops::kPoseKeypoints, 2 * ops::kPoseKeypoints, 4 * ops::kPoseEdges};
  const char* names[3] = {"heatmaps", "short offsets", "mid offsets"};
  const TensorView& heat = ctx.input(0);
  for (int i = 0; i < 3; ++i) {
    const TensorView& t = ctx.input(static_cast<size_t>(i));
    ctx.require(t.type() == TensorType::kUInt8 || t.type() == TensorType::kInt8 ||
                    t.type() == TensorType::kFloat32,
                cat(names[i], " must be uint8, int8 or float32"));
    ctx.require(t.rank() == 4 && t.dim(0) == 1 && t.dim(3) == channels[i],
                cat(names[i], " must have shape [1, H, W, ", channels[i], "]"));
    ctx.require(t.dim(1) == heat.dim(1) && t.dim(2) == heat.dim(2),
                cat(names[i], " and heatmaps differ in height or width"));
  }
  ctx.require(heat.dim(1) > 0 && heat.dim(2) > 0, "empty heatmaps");
  if (masks) {
    // Google's op writes 33x33 masks indexed by the long-offset grid, so only that grid fits.
    const TensorView& longs = ctx.input(3);
    constexpr int32_t kSide = ops::kInstanceMaskSize;
    ctx.require(longs.type() == TensorType::kUInt8 || longs.type() == TensorType::kInt8 ||
                    longs.type() == TensorType::kFloat32,
                "long offsets must be uint8, int8 or float32");
    ctx.require(longs.rank() == 4 && longs.dim(0) == 1 && longs.dim(1) == kSide &&
                    longs.dim(2) == kSide && longs.dim(3) == 2 * ops::kPoseKeypoints,
                cat("long offsets must have shape [1, ", kSide, ", ", kSide, ", ",
                    2 * ops::kPoseKeypoints, "] (the op's masks are ", kSide, "x", kSide, ")"));
  }
  const int64_t md = p.max_detections;
  const int64_t side = ops::kInstanceMaskSize;
  const int64_t sizes[5] = {md * ops::kPoseKeypoints * 2, md * ops::kPoseKeypoints, md, 1,
                            md * side * side};
  for (int i = 0; i < (masks ? 5 : 4); ++i) {
    const TensorView& out = ctx.output(static_cast<size_t>(i));
    ctx.require(out.type() == TensorType::kFloat32, "outputs must be float32");
    ctx.require(out.elements() == sizes[i],
                cat("output ", i, " holds ", out.elements(), " values, max_detections needs ",
                    sizes[i], " (resolve the custom output shapes first)"));
  }
  return std::make_unique<PosenetKernel>(heat.dim(1), heat.dim(2), p, masks);
}

}  // namespace

void register_posenet_decoder(Registry& registry) {
  registry.add_custom("PosenetDecoderOp", &make_posenet_decoder);
}

}  // namespace tinycoral::host
