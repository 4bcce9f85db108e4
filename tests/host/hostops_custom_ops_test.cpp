// TFLite_Detection_PostProcess and PosenetDecoderOp on synthetic inputs with hand-derived results:
// box decoding against anchors, fast and regular NMS (IoU suppression, score threshold, class
// merge), pose decoding of separated people, the pose NMS, FlexBuffers options and their errors.
#include <flatbuffers/flexbuffers.h>
#include <gtest/gtest.h>

#include <cmath>

#include "host/ops/custom_options.h"
#include "host/ops/posenet_decoder.h"
#include "hostops_test_util.h"

namespace tinycoral::host {
namespace {

using container::TensorType;
using testing::OneOpModel;

std::vector<uint8_t> detection_options(bool regular, int max_det) {
  flexbuffers::Builder fbb;
  fbb.Map([&] {
    fbb.Int("max_detections", max_det);
    fbb.Int("max_classes_per_detection", 1);
    fbb.Int("detections_per_class", 100);
    fbb.Bool("use_regular_nms", regular);
    fbb.Float("nms_score_threshold", 0.3f);
    fbb.Float("nms_iou_threshold", 0.5f);
    fbb.Int("num_classes", 2);
    fbb.Float("y_scale", 10.0f);
    fbb.Float("x_scale", 10.0f);
    fbb.Float("h_scale", 5.0f);
    fbb.Float("w_scale", 5.0f);
  });
  fbb.Finish();
  return fbb.GetBuffer();
}

struct Detections {
  std::vector<float> boxes, classes, scores;
  float count = 0;
};

Detections detect(bool regular, const std::vector<float>& encodings, int max_det = 3) {
  // Anchors (ycenter, xcenter, h, w): A0 and A1 overlap (IoU 0.905), A2 is apart.
  const std::vector<float> anchors = {0.5f, 0.5f, 0.2f, 0.2f, 0.51f, 0.5f,
                                      0.2f, 0.2f, 0.2f, 0.2f, 0.1f,  0.1f};
  // Scores with a background column first.
  const std::vector<float> scores = {0.0f, 0.9f, 0.1f, 0.0f, 0.8f, 0.85f, 0.0f, 0.05f, 0.7f};
  OneOpModel m("TFLite_Detection_PostProcess");
  const int enc = m.tensor(TensorType::kFloat32, {1, 3, 4});
  const int cls = m.tensor(TensorType::kFloat32, {1, 3, 3});
  const int anc = m.tensor(TensorType::kFloat32, {3, 4}, 0, 0, OneOpModel::bytes(anchors));
  const int o0 = m.tensor(TensorType::kFloat32, {});
  const int o1 = m.tensor(TensorType::kFloat32, {});
  const int o2 = m.tensor(TensorType::kFloat32, {});
  const int o3 = m.tensor(TensorType::kFloat32, {});
  m.wire({enc, cls, anc}, {o0, o1, o2, o3});
  m.custom_options(detection_options(regular, max_det));
  Interpreter it = m.build();  // output shapes come from the options
  testing::set_input(it, 0, encodings);
  testing::set_input(it, 1, scores);
  it.invoke();
  Detections d;
  d.boxes = testing::output_as<float>(it, 0);
  d.classes = testing::output_as<float>(it, 1);
  d.scores = testing::output_as<float>(it, 2);
  d.count = testing::output_as<float>(it, 3).at(0);
  return d;
}

TEST(HostOpsDetectionPostProcess, FastNmsSuppressesTheOverlappingAnchor) {
  const Detections d = detect(false, std::vector<float>(12, 0.0f));
  ASSERT_EQ(d.boxes.size(), 12u);
  EXPECT_EQ(d.count, 2.0f);
  // Zero encodings decode to the anchors' corners: A0 then A2 (A1 overlaps A0 too much).
  EXPECT_NEAR(d.boxes[0], 0.4f, 1e-6);
  EXPECT_NEAR(d.boxes[1], 0.4f, 1e-6);
  EXPECT_NEAR(d.boxes[2], 0.6f, 1e-6);
  EXPECT_NEAR(d.boxes[3], 0.6f, 1e-6);
  EXPECT_NEAR(d.boxes[4], 0.15f, 1e-6);
  EXPECT_NEAR(d.boxes[7], 0.25f, 1e-6);
  EXPECT_EQ(d.classes[0], 0.0f);
  EXPECT_EQ(d.classes[1], 1.0f);
  EXPECT_FLOAT_EQ(d.scores[0], 0.9f);
  EXPECT_FLOAT_EQ(d.scores[1], 0.7f);
  EXPECT_EQ(d.scores[2], 0.0f);  // unused slot
}

TEST(HostOpsDetectionPostProcess, RegularNmsRunsPerClassAndMergesByScore) {
  const Detections d = detect(true, std::vector<float>(12, 0.0f));
  EXPECT_EQ(d.count, 3.0f);
  // Class 0 keeps A0 (A1 suppressed, A2 under the threshold); class 1 keeps A1 and A2.
  EXPECT_EQ(d.classes, (std::vector<float>{0.0f, 1.0f, 1.0f}));
  EXPECT_FLOAT_EQ(d.scores[0], 0.9f);
  EXPECT_FLOAT_EQ(d.scores[1], 0.85f);
  EXPECT_FLOAT_EQ(d.scores[2], 0.7f);
  EXPECT_NEAR(d.boxes[4], 0.41f, 1e-6);  // A1's ymin
}

TEST(HostOpsDetectionPostProcess, DecodesCentreSizeEncodings) {
  // ty = 1 moves A0's centre by h / y_scale = 0.02; th = 5 ln 2 doubles its height.
  std::vector<float> enc(12, 0.0f);
  enc[0] = 1.0f;
  enc[2] = 5.0f * std::log(2.0f);
  const Detections d = detect(false, enc, 1);
  EXPECT_EQ(d.count, 1.0f);
  EXPECT_NEAR(d.boxes[0], 0.52f - 0.2f, 1e-6);
  EXPECT_NEAR(d.boxes[2], 0.52f + 0.2f, 1e-6);
  EXPECT_NEAR(d.boxes[1], 0.4f, 1e-6);
}

TEST(HostOpsDetectionPostProcess, RefusesMissingOptions) {
  OneOpModel m("TFLite_Detection_PostProcess");
  const int enc = m.tensor(TensorType::kFloat32, {1, 3, 4});
  const int cls = m.tensor(TensorType::kFloat32, {1, 3, 3});
  const int anc =
      m.tensor(TensorType::kFloat32, {3, 4}, 0, 0, OneOpModel::bytes(std::vector<float>(12, 0.1f)));
  std::vector<int32_t> outs;
  for (int i = 0; i < 4; ++i) outs.push_back(m.tensor(TensorType::kFloat32, {1}));
  m.wire({enc, cls, anc}, outs);
  flexbuffers::Builder fbb;
  fbb.Map([&] { fbb.Int("max_detections", 3); });
  fbb.Finish();
  m.custom_options(fbb.GetBuffer());
  EXPECT_THROW(m.build(), Error);
}

TEST(HostOpsCustomOptions, RejectsGarbageAndReadsNumbers) {
  const std::vector<uint8_t> garbage = {1, 2, 3, 4, 5};
  EXPECT_THROW(ops::CustomOptions(garbage, "X"), Error);
  EXPECT_THROW(ops::CustomOptions(std::vector<uint8_t>{}, "X"), Error);
  const auto good = detection_options(true, 7);
  const ops::CustomOptions o(good, "X");
  EXPECT_EQ(o.integer("max_detections", 0, 10), 7);
  EXPECT_EQ(o.number("use_regular_nms"), 1.0);
  EXPECT_THROW(o.integer("max_detections", 0, 5), Error);  // out of range
  EXPECT_THROW(o.number("absent"), Error);
  EXPECT_EQ(o.number_or("absent", 2.5), 2.5);
}

// A heat map of H x W blocks with every keypoint's logit = `logit` at the given blocks, -10
// elsewhere, no offsets.
struct PoseInputs {
  int h, w;
  std::vector<float> scores, shorts, mids;
  PoseInputs(int h_, int w_) : h(h_), w(w_) {
    scores.assign(static_cast<size_t>(h) * w * 17, -10.0f);
    shorts.assign(static_cast<size_t>(h) * w * 34, 0.0f);
    mids.assign(static_cast<size_t>(h) * w * 64, 0.0f);
  }
  void person(int y, int x, float logit) {
    for (int k = 0; k < 17; ++k) scores[(static_cast<size_t>(y) * w + x) * 17 + k] = logit;
  }
};

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

TEST(HostOpsPosenetDecoder, DecodesSeparatedPeopleStrongestFirst) {
  PoseInputs in(7, 7);
  in.person(5, 5, 2.0f);
  in.person(1, 1, 3.0f);
  ops::PosenetParams p{10, 0.5f, 16, 20.0f};
  ops::PosenetDecoder dec(7, 7, p);
  std::vector<float> kp(10 * 17 * 2), ks(10 * 17), ps(10);
  const int n = dec.decode(in.scores.data(), in.shorts.data(), in.mids.data(), kp.data(), ks.data(),
                           ps.data());
  ASSERT_EQ(n, 2);
  EXPECT_NEAR(ps[0], sigmoid(3.0f), 1e-6);
  EXPECT_NEAR(ps[1], sigmoid(2.0f), 1e-6);
  for (int k = 0; k < 17; ++k) {
    EXPECT_FLOAT_EQ(kp[k * 2], 16.0f);  // block 1 * stride 16
    EXPECT_FLOAT_EQ(kp[k * 2 + 1], 16.0f);
    EXPECT_FLOAT_EQ(kp[(17 + k) * 2], 80.0f);
    EXPECT_NEAR(ks[17 + k], sigmoid(2.0f), 1e-6);
  }
  EXPECT_EQ(ps[2], 0.0f);  // unused entries are zeroed
}

TEST(HostOpsPosenetDecoder, ThresholdAndMaxDetections) {
  PoseInputs in(7, 7);
  in.person(5, 5, 2.0f);
  in.person(1, 1, 3.0f);
  std::vector<float> kp(2 * 17 * 2), ks(2 * 17), ps(2);
  ops::PosenetDecoder one(7, 7, {1, 0.5f, 16, 20.0f});
  EXPECT_EQ(one.decode(in.scores.data(), in.shorts.data(), in.mids.data(), kp.data(), ks.data(),
                       ps.data()),
            1);
  ops::PosenetDecoder strict(7, 7, {2, 0.9f, 16, 20.0f});  // sigmoid(2) = 0.88 < 0.9
  EXPECT_EQ(strict.decode(in.scores.data(), in.shorts.data(), in.mids.data(), kp.data(), ks.data(),
                          ps.data()),
            1);
  EXPECT_NEAR(ps[0], sigmoid(3.0f), 1e-6);
}

TEST(HostOpsPosenetDecoder, NmsRadiusMergesNearbyRoots) {
  // Two people one block apart: with a 20 px radius (1.25 blocks) the second root is suppressed.
  PoseInputs in(7, 7);
  in.person(3, 3, 3.0f);
  in.person(3, 5, 2.5f);  // not adjacent, so both are local maxima
  std::vector<float> kp(4 * 34), ks(4 * 17), ps(4);
  ops::PosenetDecoder wide(7, 7, {4, 0.5f, 16, 40.0f});  // 2.5 blocks: suppressed
  EXPECT_EQ(wide.decode(in.scores.data(), in.shorts.data(), in.mids.data(), kp.data(), ks.data(),
                        ps.data()),
            1);
  ops::PosenetDecoder narrow(7, 7, {4, 0.5f, 16, 20.0f});  // 1.25 blocks: both kept
  EXPECT_EQ(narrow.decode(in.scores.data(), in.shorts.data(), in.mids.data(), kp.data(), ks.data(),
                          ps.data()),
            2);
}

TEST(HostOpsPosenetDecoder, KernelDequantizesAndRefusesWrongChannels) {
  flexbuffers::Builder fbb;
  fbb.Map([&] {
    fbb.Int("max_detections", 2);
    fbb.Float("score_threshold", 0.5f);
    fbb.Int("stride", 16);
    fbb.Float("nms_radius", 20.0f);
  });
  fbb.Finish();
  auto build = [&](int heat_channels) {
    OneOpModel m("PosenetDecoderOp");
    const int heat = m.tensor(TensorType::kUInt8, {1, 3, 3, heat_channels}, 0.1f, 128);
    const int sh = m.tensor(TensorType::kUInt8, {1, 3, 3, 34}, 0.5f, 128);
    const int mid = m.tensor(TensorType::kUInt8, {1, 3, 3, 64}, 0.5f, 128);
    std::vector<int32_t> outs;
    for (int i = 0; i < 4; ++i) outs.push_back(m.tensor(TensorType::kFloat32, {}));
    m.wire({heat, sh, mid}, outs);
    m.custom_options(fbb.GetBuffer());
    return m.build();
  };
  EXPECT_THROW(build(16), Error);
  Interpreter it = build(17);
  std::vector<uint8_t> heat(3 * 3 * 17, 28);                      // (28 - 128) * 0.1 = -10
  for (int k = 0; k < 17; ++k) heat[(1 * 3 + 1) * 17 + k] = 158;  // logit 3 at block (1, 1)
  it.set_input(0, heat);
  it.set_input(1, std::vector<uint8_t>(3 * 3 * 34, 128));
  it.set_input(2, std::vector<uint8_t>(3 * 3 * 64, 128));
  it.invoke();
  EXPECT_EQ(testing::output_as<float>(it, 3).at(0), 1.0f);
  EXPECT_FLOAT_EQ(testing::output_as<float>(it, 0).at(0), 16.0f);
  EXPECT_NEAR(testing::output_as<float>(it, 2).at(0), sigmoid(3.0f), 1e-5);
}

}  // namespace
}  // namespace tinycoral::host
