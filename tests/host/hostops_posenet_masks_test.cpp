// PosenetDecoderOp's 4-input form (BodyPix): instance masks from long offsets, on hand-built poses
// and offsets whose owner of each block is known, and through the operator with its fifth output.
#include <flatbuffers/flexbuffers.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "host/ops/posenet_decoder.h"
#include "hostops_test_util.h"

namespace tinycoral::host {
namespace {

using container::TensorType;
using testing::OneOpModel;

constexpr int kSide = ops::kInstanceMaskSize;  // 33
constexpr size_t kBlocks = size_t{kSide} * kSide;

// Poses [n, 17, (y, x)] whose 17 keypoints all sit at one pixel each.
std::vector<float> poses_at(const std::vector<std::pair<float, float>>& points) {
  std::vector<float> out;
  for (const auto& [y, x] : points)
    for (int k = 0; k < 17; ++k) {
      out.push_back(y);
      out.push_back(x);
    }
  return out;
}

float mask_at(const std::vector<float>& masks, int pose, int y, int x) {
  return masks[(static_cast<size_t>(pose) * kSide + y) * kSide + x];
}

TEST(HostOpsPosenetMasks, WithoutOffsetsEachBlockJoinsTheNearestPoseFirstOnTies) {
  // Zero long offsets: every block embeds at its own pixel position (block * 16). Pose 0 sits at
  // the top-left corner, pose 1 at the bottom-right one: blocks with y + x < 32 are nearer pose 0,
  // y + x = 32 is a tie (the first pose wins), the rest belong to pose 1.
  const std::vector<float> longs(kBlocks * 34, 0.0f);
  const auto kp = poses_at({{0.0f, 0.0f}, {512.0f, 512.0f}});
  std::vector<float> masks(3 * kBlocks, 7.0f);
  ops::decode_instance_masks(longs.data(), kSide, kSide, 16, kp.data(), 2, masks.data(),
                             masks.size());
  for (int y = 0; y < kSide; ++y)
    for (int x = 0; x < kSide; ++x) {
      const int owner = y + x <= 32 ? 0 : 1;
      ASSERT_EQ(mask_at(masks, owner, y, x), 1.0f) << y << "," << x;
      ASSERT_EQ(mask_at(masks, 1 - owner, y, x), 0.0f) << y << "," << x;
      ASSERT_EQ(mask_at(masks, 2, y, x), 0.0f);  // beyond the pose count: zeroed
    }
}

TEST(HostOpsPosenetMasks, LongOffsetsMoveTheEmbeddingThreeTimesClampedToTheGrid) {
  // dx = +5 blocks everywhere: three jumps move a block 15 columns right (clamped at column 32).
  // Pose 0 sits at pixel column 20 * 16, pose 1 at column 30 * 16, both level with the row checked
  // (dy = 0 keeps each embedding on its block's row), so only the columns decide.
  std::vector<float> longs(kBlocks * 34, 0.0f);
  for (size_t b = 0; b < kBlocks; ++b)
    for (int k = 0; k < 17; ++k) longs[b * 34 + 17 + k] = 5.0f;
  std::vector<float> masks(2 * kBlocks);
  for (int y : {0, 16, 32}) {
    const float py = static_cast<float>(y * 16);
    const auto kp = poses_at({{py, 20.0f * 16}, {py, 30.0f * 16}});
    ops::decode_instance_masks(longs.data(), kSide, kSide, 16, kp.data(), 2, masks.data(),
                               masks.size());
    for (int x = 0; x < kSide; ++x) {
      const int column = std::min(x + 15, 32);  // embedding column after three jumps
      const int owner = column <= 25 ? 0 : 1;   // 25 is the tie: pose 0
      EXPECT_EQ(mask_at(masks, owner, y, x), 1.0f) << "row " << y << " column " << x;
      EXPECT_EQ(mask_at(masks, 1 - owner, y, x), 0.0f) << "row " << y << " column " << x;
    }
  }
}

TEST(HostOpsPosenetMasks, NoPoseMarksEveryBlockAsPoseZeroAsGooglesOpDoes) {
  const std::vector<float> longs(kBlocks * 34, 0.0f);
  std::vector<float> masks(2 * kBlocks, 7.0f);
  ops::decode_instance_masks(longs.data(), kSide, kSide, 16, nullptr, 0, masks.data(),
                             masks.size());
  for (size_t i = 0; i < kBlocks; ++i) ASSERT_EQ(masks[i], 1.0f);
  for (size_t i = kBlocks; i < masks.size(); ++i) ASSERT_EQ(masks[i], 0.0f);
}

std::vector<uint8_t> decoder_options(int max_detections) {
  flexbuffers::Builder fbb;
  fbb.Map([&] {
    fbb.Int("max_detections", max_detections);
    fbb.Float("score_threshold", 0.5f);
    fbb.Int("stride", 16);
    fbb.Float("nms_radius", 20.0f);
  });
  fbb.Finish();
  return fbb.GetBuffer();
}

Interpreter four_input_decoder(int long_side) {
  OneOpModel m("PosenetDecoderOp");
  const int heat = m.tensor(TensorType::kUInt8, {1, kSide, kSide, 17}, 0.1f, 128);
  const int sh = m.tensor(TensorType::kUInt8, {1, kSide, kSide, 34}, 0.5f, 128);
  const int mid = m.tensor(TensorType::kUInt8, {1, kSide, kSide, 64}, 0.5f, 128);
  const int lng = m.tensor(TensorType::kUInt8, {1, long_side, long_side, 34}, 16.0f, 128);
  std::vector<int32_t> outs;
  for (int i = 0; i < 5; ++i) outs.push_back(m.tensor(TensorType::kFloat32, {}));
  m.wire({heat, sh, mid, lng}, outs);
  m.custom_options(decoder_options(3));
  return m.build();
}

TEST(HostOpsPosenetMasks, TheFourInputOperatorWritesMasksAsItsFifthOutput) {
  Interpreter it = four_input_decoder(kSide);
  ASSERT_EQ(it.num_outputs(), 5u);
  const auto& shape = it.output(4).shape();
  EXPECT_EQ(std::vector<int32_t>(shape.begin(), shape.end()),
            (std::vector<int32_t>{1, 3, kSide, kSide}));
  // One person at block (4, 4) (logit 3); long offsets of +1 block down (16 * 1/16 after the
  // 1/stride scale: byte 129 -> (129 - 128) * 16 / 16 = 1): every block belongs to the only pose.
  std::vector<uint8_t> heat(kBlocks * 17, 28);  // (28 - 128) * 0.1 = -10
  for (int k = 0; k < 17; ++k) heat[(4 * kSide + 4) * 17 + k] = 158;
  it.set_input(0, heat);
  it.set_input(1, std::vector<uint8_t>(kBlocks * 34, 128));
  it.set_input(2, std::vector<uint8_t>(kBlocks * 64, 128));
  it.set_input(3, std::vector<uint8_t>(kBlocks * 34, 129));
  it.invoke();
  ASSERT_EQ(testing::output_as<float>(it, 3).at(0), 1.0f);
  const auto masks = testing::output_as<float>(it, 4);
  ASSERT_EQ(masks.size(), 3 * kBlocks);
  for (size_t i = 0; i < kBlocks; ++i) ASSERT_EQ(masks[i], 1.0f) << i;
  for (size_t i = kBlocks; i < masks.size(); ++i) ASSERT_EQ(masks[i], 0.0f) << i;
}

TEST(HostOpsPosenetMasks, LongOffsetsOfAnotherGridAreRefused) {
  try {
    four_input_decoder(31);
    FAIL() << "a 31x31 long-offset grid was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("long offsets must have shape [1, 33, 33, 34]"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tinycoral::host
