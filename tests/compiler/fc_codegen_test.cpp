// The FULLY_CONNECTED generator over its covered range (N = 64..1024 in steps of 64, K sampled):
// every program is well formed (isa::check: frame, lengths, sequence numbers), its relocations sit
// on MOVI immediates, and the parameter stream has the per-tile layout the caching program moves.
// Byte identity with Google is google_identity_test's job; this one guards the generalisation.
#include "compiler/fc_codegen.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "common/error.h"
#include "isa/isa.h"
#include "isa/relocate.h"

namespace tinycoral::compiler {
namespace {

FcLayer layer(int n, int k) {
  FcLayer l;
  l.n = n;
  l.k = k;
  l.weights.resize(static_cast<size_t>(n) * static_cast<size_t>(k));
  for (size_t i = 0; i < l.weights.size(); ++i)
    l.weights[i] = static_cast<int8_t>(i * 7 % 255 - 127);
  l.mult.assign(static_cast<size_t>(n), 0.001f);
  l.in_zp = 127;
  l.out_zp = 128;
  l.in_scale = 0.01f;
  l.out_scale = 0.02f;
  l.clamp_min = fc_clamp(0, l.out_zp, l.out_scale);
  l.clamp_max = fc_clamp(255, l.out_zp, l.out_scale);
  l.input_name = "x";
  l.output_name = "y";
  return l;
}

void expect_well_formed(const container::Executable& e, const std::string& what) {
  ASSERT_EQ(e.bitstreams.size(), 1u) << what;
  const auto program = isa::decode(e.bitstreams[0].data);
  for (const auto& d : isa::check(program))
    ADD_FAILURE() << what << ": word " << d.word_offset << ": " << d.message;
  for (const auto& fo : e.bitstreams[0].field_offsets) {
    EXPECT_TRUE(isa::is_movi_immediate(program, fo.offset_bit)) << what << " bit " << fo.offset_bit;
  }
}

TEST(FcCodegen, CoveredShapesGiveWellFormedPrograms) {
  int shapes = 0;
  for (int n = 64; n <= 1024; n += 64) {
    for (int k : {64, 192, 256, 320, 576, 768, 1024}) {  // short, whole and several packets
      ASSERT_EQ(fc_unsupported(n, k), "");
      const FcLayer l = layer(n, k);
      const FcPrograms p = generate_fc(l);
      const std::string what = std::to_string(n) + "x" + std::to_string(k);
      expect_well_formed(p.execution, what + " execution");
      expect_well_formed(p.caching, what + " caching");
      EXPECT_EQ(p.caching.parameters.size(),
                static_cast<size_t>(n / 64) * (512 + 64 * static_cast<size_t>(k)));
      EXPECT_EQ(p.execution.parameter_caching_token, p.caching.parameter_caching_token);
      ++shapes;
    }
  }
  EXPECT_EQ(shapes, 16 * 7);
}

TEST(FcCodegen, ParameterRowsHoldMultipliersZeroPointsAndFlippedWeights) {
  FcLayer l = layer(64, 8 * 8);
  l.mult[3] = 0.25f;
  const auto p = fc_parameters(l);
  float m = 0;
  std::memcpy(&m, p.data() + 3 * 4, 4);
  EXPECT_EQ(m, 0.25f);
  EXPECT_EQ(p[256], 128);  // second row: int32 128 per channel
  EXPECT_EQ(p[257], 0);
  // weight (c = 1, k = 6) sits in row k/4 = 1 at 64*4*1 + 4*c + k%4, plus 128
  EXPECT_EQ(p[512 + 256 * 1 + 4 * 1 + 2], static_cast<uint8_t>(l.weights[1 * 64 + 6] + 128));
}

TEST(FcCodegen, OutputsNotAMultipleOf64ArePaddedToWholeGroups) {
  const FcPrograms p = generate_fc(layer(10, 256));
  const auto& y = p.execution.output_layers.at(0);
  EXPECT_EQ(y.z_dim, 10);
  EXPECT_EQ(y.size_bytes, 64);  // the chip returns the whole group
  EXPECT_EQ(p.caching.parameters.size(), 512u + 64u * 256u);
}

TEST(FcCodegen, ShapesOutsideTheCoveredRangeAreRefusedWithTheReason) {
  EXPECT_NE(fc_unsupported(2048, 256), "");
  EXPECT_NE(fc_unsupported(256, 100), "");
  EXPECT_NE(fc_unsupported(256, 2048), "");
  EXPECT_THROW(generate_fc(layer(64, 2048)), Error);
}

TEST(FcCodegen, ClampsAndMultipliersFollowGoogleFloat32Steps) {
  // dense_256's output quantization (scale 0.01904885843396187, zero point 129): Google stores
  // 126.000008 and -129.000015, one float32 step outside the integers.
  const float s = 0.01904885843396187f;
  EXPECT_EQ(fc_clamp(255, 129, s), std::nextafter(126.0f, 200.0f));
  EXPECT_EQ(fc_clamp(0, 129, s), std::nextafter(-129.0f, -200.0f));
}

// The fused FFN program (generate_ffn): well formed for the llm shapes, and refused with the
// reason when w1's and w3's group i are not on one tile or w2's K is not half the up layer's N.
// Its arithmetic is checked against the int8 path on the virtual Edge TPU (tests/llm).
TEST(FfnCodegen, WellFormedAndPairsW1AndW3OnOneTile) {
  FfnLayer f;
  f.up = layer(256, 320);  // w1 and w3 of hidden 128, K padded to 320
  f.down = layer(320, 128);
  f.h1_scale = 0.05f;
  f.mult_a = f.mult_m = 0.01f;
  f.a_clamp_min = f.m_clamp_min = -128;
  f.a_clamp_max = f.m_clamp_max = 127;
  FcPlacement up{{3, 3, 9, 9}, {0, 1024, 0, 1024}}, down{{0, 1, 2, 3, 4}, {2048, 2048, 0, 0, 0}};
  const FfnPrograms p = generate_ffn(f, up, down);
  expect_well_formed(p.execution, "ffn execution");
  expect_well_formed(p.caching_up, "ffn caching up");
  expect_well_formed(p.caching_down, "ffn caching down");
  EXPECT_EQ(p.execution.input_layers.at(0).z_dim, 320);
  EXPECT_EQ(p.execution.output_layers.at(0).z_dim, 320);
  const FcPlacement split{{3, 4, 9, 9}, {0, 1024, 0, 1024}};
  EXPECT_THROW(generate_ffn(f, split, down), Error);
  f.down = layer(320, 256);
  EXPECT_THROW(generate_ffn(f, up, down), Error);
}

}  // namespace
}  // namespace tinycoral::compiler
