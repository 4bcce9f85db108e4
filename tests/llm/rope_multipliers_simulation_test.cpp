// RoPE's per-token multipliers f32(base_j r) made by the scalar core from r
// (compiler::emit_scalar_rope_multipliers, llm::rope_sum_scalar_multipliers) on the virtual Edge
// TPU: the words the program pushes are the bytes of the host's rows (llm::rope_sum_multipliers)
// bit for bit, q~'s and the key's, padding outputs 0 (docs/llm.md "The RoPE multipliers from r on
// the scalar core").
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "chip/sim_runner.h"
#include "common/error.h"
#include "compiler/emitter.h"
#include "compiler/fc_codegen.h"
#include "compiler/program_parts.h"
#include "compiler/scalar_softmax.h"
#include "llm/int8_rms.h"
#include "llm/int8_rope.h"
#include "llm/rope_sum.h"

namespace tinycoral::testing {
namespace {

// An immediate move of `bits` and its store at word `at`: the test's stand-in for words arriving
// in scalar memory.
void store_word(compiler::Emitter& e, uint32_t bits, int at) {
  e.add("bundle", cat("s_op=0x2f s_x=12 s_y=0 imm=", compiler::hex(bits)));
  e.add("bundle", cat("v_op=0x2 v_offset=", at & 0xff, " v_cmd=", at >> 8, " vs_reg=12"));
}

// A program that stores r's bits at word r_at, makes the multipliers and pushes them to the host.
// With `base_word` >= 0 the loop form (emit_scalar_rope_multipliers_loop) makes them from the
// constants stored from that word (the resident rows' stand-in; 0 for padding outputs).
container::Executable multiplier_program(const compiler::ScalarRopeMultipliers& m, float r,
                                         int r_at, int base_word = -1) {
  const int bytes = 4 * int(m.base.size());
  compiler::Emitter e;
  compiler::program_start(e);
  store_word(e, std::bit_cast<uint32_t>(r), r_at);
  if (base_word >= 0) {
    for (size_t j = 0; j < m.base.size(); ++j)
      store_word(e, m.padding[j] ? 0u : std::bit_cast<uint32_t>(m.base[j]), base_word + int(j));
    compiler::emit_scalar_rope_multipliers_loop(e, m.r_word, m.mult_word, base_word,
                                                int(m.base.size()));
  } else {
    compiler::emit_scalar_rope_multipliers(e, m);
  }
  e.reloc_movi(10, container::BufferKind::kOutput, container::Half::kUpper32, "m");
  e.reloc_movi(11, container::BufferKind::kOutput, container::Half::kLower32, "m");
  e.add("bundle", "s_op=0x0f s_x=5 imm=11");
  e.add("bundle", "s_op=0x0f s_x=4 imm=10");
  compiler::descriptor(e, 5, 4, 6, bytes, 3);
  compiler::emit_push_words(e, m.mult_word, int(m.base.size()));
  compiler::tile_fence(e, "units=0x3ff signal=1 f109=3");
  compiler::wait_tokens(e);
  compiler::interrupt(e, 5, 4, 6);
  container::Executable eo = compiler::execution_executable(e.finish());
  container::Layer out = compiler::boundary_layer("m", bytes, 0, 1.0f, true, false);
  out.shape = {{0, 0}, {0, bytes - 1}};
  eo.output_layers.push_back(std::move(out));
  eo.dma_hints.fully_deterministic = true;
  eo.dma_hints.hints = {compiler::instruction_hint(),
                        compiler::dma_hint(container::BufferKind::kOutput,
                                           container::Direction::kOutfeed, "m", bytes),
                        compiler::interrupt_hint()};
  return eo;
}

std::vector<uint8_t> run_multipliers(chip::VirtualEdgeTpu& chip,
                                     const compiler::ScalarRopeMultipliers& m, float r,
                                     int r_at = -1, int base_word = -1) {
  return chip::testing::run_executable(
             chip, multiplier_program(m, r, r_at < 0 ? m.r_word : r_at, base_word), {})
      .at("m");
}

// A rotation of n channels with random gains and output scales (a scale per pair, as the int8
// path's per-head key scales and q's gains give).
llm::QuantizedRope random_rope(std::mt19937& rng, int n) {
  std::uniform_real_distribution<float> log(-6.0f, 3.0f);
  std::uniform_int_distribution<int> zp(-20, 20);
  std::vector<float> gain(static_cast<size_t>(n)), out_scale(static_cast<size_t>(n));
  for (int j = 0; j < n; j += 2) {
    gain[size_t(j)] = gain[size_t(j + 1)] = std::exp2(log(rng));
    out_scale[size_t(j)] = out_scale[size_t(j + 1)] = std::exp2(log(rng));
  }
  return llm::quantize_rope(std::exp2(log(rng)), zp(rng), gain, out_scale);
}

// Where the host's rows go does not change their bytes; one tile per group.
compiler::FcPlacement groups_at(int outputs) {
  compiler::FcPlacement at;
  for (int g = 0; g < compiler::fc_groups(outputs); ++g) at.tiles.push_back(g);
  return at;
}

TEST(RopeMultipliersOnTheVirtualEdgeTpu, AreTheHostsRowsBitForBit) {
  std::mt19937 rng(31);
  std::uniform_real_distribution<float> log_r(-8.0f, 8.0f);
  std::uniform_int_distribution<int> byte(-128, 127);
  chip::VirtualEdgeTpu chip;
  // q~ alone (rand15M's 288 channels, padded to 320), q~ with the key in kv_dim's groups
  // (rand_gqa's heads of 8 over 4 kv heads; rand15M's 6 heads of 48) and each kv head from a group
  // boundary (heads of 80: two pieces each), the words at other places of scalar memory.
  // The loop's constants in place (as the program's rows land) or at other words.
  struct Case {
    llm::RopeSumShape shape;
    int r_word, mult_word;
    bool base_in_place;
    int base_word;
  };
  const Case cases[] = {{{288, 0, 0, false}, 4095, 0, true, 0},
                        {{64, 4, 8, true}, 0, 1, false, 1000},
                        {{288, 6, 48, true}, 2048, 100, true, 0},
                        {{160, 2, 80, false}, 700, 3000, false, 1}};
  int distinct = 0, total = 0;
  for (const Case& c : cases) {
    const llm::RopeSumShape& s = c.shape;
    const llm::QuantizedRope q = random_rope(rng, s.q_channels);
    const llm::QuantizedRope k = random_rope(rng, std::max(2, s.kv_heads * s.head_size));
    compiler::ScalarRopeMultipliers m = llm::rope_sum_scalar_multipliers(q, &k, s);
    m.r_word = c.r_word;
    m.mult_word = c.mult_word;
    ASSERT_EQ(int(m.base.size()), s.outputs());
    // r as the int8 path makes it from the bytes (chip_rms_scale), and over a wide range.
    std::vector<int8_t> x(288);
    for (int8_t& b : x) b = int8_t(byte(rng));
    const float rs[] = {llm::chip_rms_scale(x.data(), 288, 0.03f, 3), std::exp2(log_r(rng)),
                        std::exp2(log_r(rng)) * 1.1f};
    for (const float r : rs) {
      SCOPED_TRACE("q " + std::to_string(s.q_channels) + ", r " + std::to_string(r));
      const std::vector<uint8_t> want =
          llm::rope_sum_multipliers(q, &k, s, r, groups_at(s.outputs())).bytes;
      // The bundle per output, and the loop over the constants in place and from other words.
      for (const int base_word : {-1, c.base_in_place ? c.mult_word : c.base_word}) {
        SCOPED_TRACE("constants at word " + std::to_string(base_word));
        const std::vector<uint8_t> got = run_multipliers(chip, m, r, -1, base_word);
        ASSERT_EQ(got.size(), want.size());
        for (size_t b = 0; b < want.size(); b += 4) {
          ASSERT_EQ(got[b] | got[b + 1] << 8 | got[b + 2] << 16 | uint32_t(got[b + 3]) << 24,
                    want[b] | want[b + 1] << 8 | want[b + 2] << 16 | uint32_t(want[b + 3]) << 24)
              << "output " << b / 4;
          distinct += want[b] != want[(b + 8) % want.size()];  // the next pair's
          ++total;
        }
      }
    }
  }
  EXPECT_GT(distinct, total / 2);  // the multipliers differ from output to output
  EXPECT_EQ(chip.fault(), "");
}

// The words are read where the routine says: r one word off is another r (a padding slot's 0, so
// every multiplier would be 0); r at a multiplier's word, words past scalar memory, and a padding
// flag per output missing are refused.
TEST(RopeMultipliersOnTheVirtualEdgeTpu, ReadRAtItsWordAndRefuseWhatDoesNotFit) {
  std::mt19937 rng(5);
  const llm::QuantizedRope q = random_rope(rng, 64);
  const llm::RopeSumShape s{64};
  compiler::ScalarRopeMultipliers m = llm::rope_sum_scalar_multipliers(q, nullptr, s);
  m.r_word = 200;
  const std::vector<uint8_t> want = llm::rope_sum_multipliers(q, 64, 0.7f, groups_at(64)).bytes;
  chip::VirtualEdgeTpu chip;
  EXPECT_EQ(run_multipliers(chip, m, 0.7f), want);
  chip::VirtualEdgeTpu fresh;
  EXPECT_NE(run_multipliers(fresh, m, 0.7f, 201), want);  // r stored one word past where it is read
  compiler::Emitter e;
  compiler::ScalarRopeMultipliers bad = m;
  bad.r_word = 10;
  EXPECT_THROW(compiler::emit_scalar_rope_multipliers(e, bad), Error);
  bad = m;
  bad.mult_word = 4096 - 63;
  EXPECT_THROW(compiler::emit_scalar_rope_multipliers(e, bad), Error);
  bad = m;
  bad.padding.pop_back();
  EXPECT_THROW(compiler::emit_scalar_rope_multipliers(e, bad), Error);
  EXPECT_THROW(llm::rope_sum_scalar_multipliers(q, nullptr, {64, 1, 8, true}), Error);
  // The loop form: r one word off fails the same way; r among the constants, constants past
  // scalar memory, ranges that overlap without being the same and a count not a multiple of 4 are
  // refused.
  chip::VirtualEdgeTpu looped;
  EXPECT_EQ(run_multipliers(looped, m, 0.7f, -1, 300), want);
  chip::VirtualEdgeTpu off;
  EXPECT_NE(run_multipliers(off, m, 0.7f, 201, 300), want);
  EXPECT_THROW(compiler::emit_scalar_rope_multipliers_loop(e, 200, 0, 180, 64), Error);
  EXPECT_THROW(compiler::emit_scalar_rope_multipliers_loop(e, 200, 0, 4096 - 63, 64), Error);
  EXPECT_THROW(compiler::emit_scalar_rope_multipliers_loop(e, 200, 0, 1, 64), Error);
  EXPECT_THROW(compiler::emit_scalar_rope_multipliers_loop(e, 200, 0, 0, 62), Error);
  EXPECT_NO_THROW(compiler::emit_scalar_rope_multipliers_loop(e, 200, 0, 64, 64));
}

// The constants' rows as the chip path caches them (ChipTransformer::rope_caching: the sum groups'
// aux rows from llm::rope_sum_aux_rows with the constants, beside one weight copy per tile, by
// compiler::fc_caching) hold, read back from each group's tile at its aux unit +
// kMultBaseRowUnit, exactly the base_j of rope_sum_scalar_multipliers (padding 0) in the order the
// loop reads them: the rows in group order land at words 64 g + c (one outfeed, a producer per
// group), so word j times r must be the host's multiplier of output j (rope_sum_multipliers' rows
// where the groups are placed). Compared bit for bit: a constant one ulp off does not match.
TEST(RopeMultiplierConstantsOnTheVirtualEdgeTpu, TheCachedRowsHoldTheBasesInTheLoopsOrder) {
  std::mt19937 rng(37);
  std::uniform_real_distribution<float> log_r(-8.0f, 8.0f);
  // rand_gqa's q~ and packed keys, rand15M's (q~ padded to 320), heads of 80 from group boundaries.
  const llm::RopeSumShape shapes[] = {{64, 4, 8, true}, {288, 6, 48, true}, {160, 2, 80, false}};
  for (const llm::RopeSumShape& s : shapes) {
    SCOPED_TRACE("q " + std::to_string(s.q_channels) + ", keys " + std::to_string(s.kv_heads));
    const llm::QuantizedRope q = random_rope(rng, s.q_channels);
    const llm::QuantizedRope k = random_rope(rng, s.kv_heads * s.head_size);
    const compiler::ScalarRopeMultipliers m = llm::rope_sum_scalar_multipliers(q, &k, s);
    const int groups = compiler::fc_groups(s.outputs());
    // Three tiles take the groups in turn, each group's aux block 12 units after the one before
    // on its tile (place_sharing's order), the tiles' weight copies at unit 4000.
    constexpr int kTiles = 3, kCopyUnit = 4000;
    compiler::FcPlacement at, copies;
    for (int g = 0; g < groups; ++g) {
      at.tiles.push_back(2 + 5 * (g % kTiles));
      at.param_units.push_back(12 * (g / kTiles));
      at.weight_units.push_back(kCopyUnit + compiler::kFcAuxUnits);
    }
    for (int t = 0; t < kTiles; ++t) {
      copies.tiles.push_back(2 + 5 * t);
      copies.param_units.push_back(kCopyUnit);
    }
    const compiler::FcRowWrite aux = llm::rope_sum_aux_rows(at, m.base);
    chip::VirtualEdgeTpu chip;
    chip::testing::run_executable(
        chip, compiler::fc_caching(llm::rope_sum_weight_copies(kTiles), copies, &aux), {});
    ASSERT_EQ(chip.fault(), "");
    // The words the loop reads, from word 0: each group's constants' row in group order.
    std::vector<uint32_t> words;
    for (int g = 0; g < groups; ++g) {
      const auto& wide = chip.tile(uint32_t(at.tiles[size_t(g)])).wide;
      const size_t from = 64 * size_t(at.param_units[size_t(g)] + compiler::kMultBaseRowUnit);
      for (size_t b = from; b < from + 256; b += 4)
        words.push_back(wide[b] | wide[b + 1] << 8 | wide[b + 2] << 16 |
                        uint32_t(wide[b + 3]) << 24);
    }
    const auto holds = [&](const std::vector<float>& base) {
      if (words.size() != base.size()) return false;
      for (size_t j = 0; j < base.size(); ++j)
        if (words[j] != (m.padding[j] ? 0u : std::bit_cast<uint32_t>(base[j]))) return false;
      return true;
    };
    EXPECT_TRUE(holds(m.base));
    // Word j times r is output j's multiplier of the host's rows.
    const float r = std::exp2(log_r(rng));
    const std::vector<uint8_t> host = llm::rope_sum_multipliers(q, &k, s, r, at).bytes;
    ASSERT_EQ(host.size(), 4 * words.size());
    int nonzero = 0;
    for (size_t j = 0; j < words.size(); ++j) {
      const uint32_t product = std::bit_cast<uint32_t>(std::bit_cast<float>(words[j]) * r);
      const uint32_t want = host[4 * j] | host[4 * j + 1] << 8 | host[4 * j + 2] << 16 |
                            uint32_t(host[4 * j + 3]) << 24;
      EXPECT_EQ(product, want) << "output " << j;
      nonzero += want != 0;
    }
    EXPECT_GT(nonzero, int(words.size()) / 2);
    // One constant one ulp off (a real output's, and the last group's first) is not the row.
    for (const size_t j : {size_t(1), size_t(64 * (groups - 1))}) {
      ASSERT_FALSE(m.padding[j]);
      std::vector<float> off = m.base;
      off[j] = std::nextafter(off[j], std::numeric_limits<float>::infinity());
      EXPECT_FALSE(holds(off)) << "output " << j;
    }
  }
}

}  // namespace
}  // namespace tinycoral::testing
