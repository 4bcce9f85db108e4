// The chip path, step a (issue 14, 5a): every layer matmul on the virtual Edge TPU through programs
// our FC generator writes, weights resident, must give the int8 CPU path's logits bit for bit, and
// so its text, on both test checkpoint shapes and on a tiny model whose shapes need padding, an
// output split and K > 1024 (a one-row batch program). Nothing here depends on the two test shapes.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>
#include <sstream>
#include <tuple>

#include "chip/virtual_edge_tpu.h"
#include "compiler/emitter.h"
#include "compiler/fc_codegen.h"
#include "compiler/ffn_parts.h"
#include "llama2c_files.h"
#include "llm/chip_model.h"
#include "llm/generate.h"
#include "llm/matmul_plan.h"
#include "runtime/device_select.h"
#include "runtime/edgetpu.h"
#include "support/error_of.h"
#include "support/sanitizers.h"
#include "usb/virtual_stick.h"
#include "usb/virtual_transport.h"

namespace tinycoral::testing {
namespace {

// Every attention option on the chip, as `generate`'s full flags set them (--scores-on-chip
// --key-column-write --weighted-sum value-cache --chip-rope --chip-rms --chip-residual).
llm::Int8Options full_attention_options() {
  return {.chip_scores = true,
          .chip_key_write = true,
          .weighted_sum = llm::WeightedSum::kValueCache,
          .chip_rope = true,
          .chip_rms = true,
          .chip_residual = true};
}

struct Run {
  std::string text;
  std::vector<std::vector<float>> logits;
};

Run run(llm::Transformer& model, const llm::Tokenizer& tok, float temperature, uint64_t seed,
        const std::string& prompt, int steps) {
  Run r;
  llm::Sampler sampler(temperature, 0.9f, seed);
  llm::generate(
      model, tok, sampler, prompt, steps, [&](const std::string& p) { r.text += p; },
      [&](int, std::span<const float> logits, int next) {
        r.logits.emplace_back(logits.begin(), logits.end());
        return next;
      });
  return r;
}

// The options the int8 CPU path reads: its arithmetic (the others say what runs on the chip).
std::tuple<bool, bool, llm::WeightedSum, bool, bool, bool> arithmetic(const llm::Int8Options& o) {
  return {o.fused_layers, o.chip_attention, o.weighted_sum,
          o.chip_rope,    o.chip_rms,       o.chip_residual};
}

// The chip path with each of `chips` against the int8 path with the same options on `ck`:
// identical logits at every position, greedy and sampled; `stats` gets each one's figures. One
// calibration for all, and one CPU run per arithmetic among them (under the sanitizers as long as
// a chip path's).
void expect_chips_equal_int8(const llm::Checkpoint& ck, const llm::Tokenizer& tok, int steps,
                             const std::vector<llm::Int8Options>& chips,
                             std::vector<llm::ChipPathStats>& stats) {
  stats.assign(chips.size(), {});
  llm::ThreadPool pool(2);
  const llm::Calibration cal = llm::calibrate(ck, pool, 8);
  const std::vector<std::pair<float, std::string>> stories = {{0.0f, "Once upon"}, {1.0f, ""}};
  std::map<std::tuple<bool, bool, llm::WeightedSum, bool, bool, bool>, std::vector<Run>> wanted;
  for (size_t c = 0; c < chips.size(); ++c) {
    SCOPED_TRACE("chip options " + std::to_string(c));
    std::vector<Run>& want = wanted[arithmetic(chips[c])];
    if (want.empty()) {
      llm::Int8Transformer cpu(ck, pool, cal, chips[c]);
      for (const auto& [temperature, prompt] : stories)
        want.push_back(run(cpu, tok, temperature, 42, prompt, steps));
    }
    auto tpu = runtime::open_virtual_edgetpu();
    llm::ChipTransformer chip(ck, pool, cal, *tpu, chips[c]);
    int positions = 0;
    for (size_t k = 0; k < stories.size(); ++k) {
      SCOPED_TRACE("temperature " + std::to_string(stories[k].first));
      const Run got = run(chip, tok, stories[k].first, 42, stories[k].second, steps);
      positions += static_cast<int>(got.logits.size());
      EXPECT_EQ(got.text, want[k].text);
      ASSERT_EQ(got.logits.size(), want[k].logits.size());
      ASSERT_GE(want[k].logits.size(), size_t(steps) / 2);
      for (size_t p = 0; p < want[k].logits.size(); ++p)
        ASSERT_EQ(got.logits[p], want[k].logits[p]) << "position " << p;
      // The positions (asserted above) are what the comparison needs; a tiny model's tokenizer
      // writes a byte or two per token, and a sampled story may stop early at BOS.
      EXPECT_FALSE(want[k].text.empty());
    }
    // Every forward pass ran every program once (none was skipped or repeated), and wrote each new
    // key where the scores run on the chip: one caching run per such layer, none where the softmax
    // runs there too (that program writes the key itself).
    const llm::ChipPathStats& s = chip.stats();
    EXPECT_EQ(s.runs, (s.programs + s.scores_layers - s.softmax_layers) * positions);
    stats[c] = s;
  }
}

// The chip path with `options` against the int8 path on `ck` (above); `stats` gets its figures.
void expect_chip_equals_int8(const llm::Checkpoint& ck, const llm::Tokenizer& tok, int steps,
                             llm::ChipPathStats& stats, llm::Int8Options options = {}) {
  std::vector<llm::ChipPathStats> all;
  expect_chips_equal_int8(ck, tok, steps, {options}, all);
  stats = all.at(0);
}

// The allocator's per-tile fill (ChipPathStats::tile_units) where tile memory holds only the
// programs' parameters: each tile within its capacity, the fullest one max_tile_units, and the
// units' bytes all the caching programs write (resident_bytes): no group's units lost, counted
// twice or left behind by a refused placement.
void expect_tile_units_are_the_parameters(const llm::ChipPathStats& s) {
  int64_t units = 0;
  for (const int u : s.tile_units) {
    EXPECT_GE(u, 0);
    EXPECT_LE(u, compiler::kFcParamUnits);
    units += u;
  }
  EXPECT_EQ(*std::max_element(s.tile_units.begin(), s.tile_units.end()), s.max_tile_units);
  EXPECT_EQ(units * 64, s.resident_bytes);
}

TEST(ChipPathStepA, BothTestCheckpointsGiveTheInt8PathsLogitsBitForBit) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  for_each_reference_model(data, [](const std::string& name, const LoadedModel& model) {
    const llm::Checkpoint& ck = model.ck;
    const llm::Tokenizer& tok = model.tok;
    llm::ChipPathStats s;
    expect_chip_equals_int8(ck, tok, name == "rand15M" ? 6 : 16, s, {.fused_layers = false});
    EXPECT_EQ(s.chip_matmuls, 7 * ck.config.n_layers);
    EXPECT_EQ(s.host_matmuls, 0) << s.host_reason;
    // q, k and v share one program when they fit in 32 groups together; the whole FFN (w1, w3,
    // LOGISTIC, two MULs, w2) is one program: three per layer.
    const int64_t qkv = (ck.config.dim + 63) / 64 + 2 * ((ck.config.kv_dim() + 63) / 64);
    EXPECT_EQ(s.fused_ffns, ck.config.n_layers);
    EXPECT_EQ(s.programs, ck.config.n_layers * ((qkv <= 32 ? 1 : 3) + 2));
    EXPECT_LE(s.max_tile_units, 0x2000);
    expect_tile_units_are_the_parameters(s);
    // Every weight resident, padded to whole 64-output groups and 64-input pieces.
    EXPECT_GE(s.resident_bytes,
              int64_t{ck.config.n_layers} * ck.config.dim *
                  (2 * ck.config.dim + 2 * ck.config.kv_dim() + 3 * ck.config.hidden_dim));
    EXPECT_GT(s.modeled.total_ms_high(), 0);
  });
}

TEST(ChipPathStepA, OddShapesArePaddedOrSplitExactly) {
  TinyShape shape;
  shape.dim = 80;       // K = 80: padded to 128
  shape.hidden = 2100;  // w1/w3: N = 2100, two programs each; w2: K = 2100 (a one-row batch)
  shape.heads = 4;
  shape.kv_heads = 2;  // wk/wv: N = 40
  shape.layers = 1;
  shape.vocab = 300;
  shape.seq_len = 32;
  const LoadedModel model = tiny_model(shape, TinyWeights(shape));
  const llm::Checkpoint& ck = model.ck;
  const llm::Tokenizer& tok = model.tok;
  llm::ChipPathStats s;
  expect_chip_equals_int8(ck, tok, 24, s, {.fused_layers = false});
  EXPECT_EQ(s.chip_matmuls, 7);
  EXPECT_EQ(s.host_matmuls, 0) << s.host_reason;
  EXPECT_EQ(s.programs, 7);    // q+k+v, o, w1 and w3 in two programs each, w2 as a one-row batch
  EXPECT_EQ(s.fused_ffns, 0);  // w2's K (2100) is over the generator's 1024
}

TEST(ChipPathStepB, FusedFfnWithPaddedShapesIsExact) {
  TinyShape shape;
  shape.dim = 80;      // w1/w3's K padded to 128
  shape.hidden = 200;  // padded to 256: w2's K, and 4 w1/w3 pairs with 56 padding rows in the last
  shape.heads = 4;
  shape.kv_heads = 2;
  shape.layers = 2;
  shape.vocab = 300;
  shape.seq_len = 32;
  const LoadedModel model = tiny_model(shape, TinyWeights(shape));
  const llm::Checkpoint& ck = model.ck;
  const llm::Tokenizer& tok = model.tok;
  llm::ChipPathStats s;
  expect_chip_equals_int8(ck, tok, 24, s, {.fused_layers = false});
  EXPECT_EQ(s.fused_ffns, 2);
  EXPECT_EQ(s.host_matmuls, 0) << s.host_reason;
  EXPECT_EQ(s.programs, 6);  // q+k+v, o, the FFN
}

// Step c's first part (fused_layers): each layer's FFN, the residual add and the next layer's q, k,
// v and u = wo_h v in one program (wo folded into the value cache), RMSNorm's scale applied by the
// host, layer 0's q, k, v and u as one program: L + 1 programs per token. And the start of step d
// (Int8Options::chip_scores): attention's scores of every layer on the chip, one program per layer
// over every head, the int8 keys resident in tile memory and each new key written there as its
// token arrives. Both the int8 path's logits bit for bit on both test checkpoints (one arithmetic:
// one int8 run for both).
TEST(ChipPathStepD, ScoresOnTheHostOrTheChipGiveTheInt8PathsLogitsBitForBit) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  for_each_reference_model(data, [](const std::string& name, const LoadedModel& model) {
    const llm::Checkpoint& ck = model.ck;
    std::vector<llm::ChipPathStats> stats;
    expect_chips_equal_int8(ck, model.tok, name == "rand15M" ? 6 : 16,
                            {{.fused_layers = true},
                             {.fused_layers = true, .chip_attention = true, .chip_scores = true}},
                            stats);
    const int layers = ck.config.n_layers;
    {
      SCOPED_TRACE("step c: the scores on the host");
      const llm::ChipPathStats& s = stats[0];
      EXPECT_EQ(s.host_matmuls, 0) << s.host_reason;
      EXPECT_EQ(s.chip_matmuls, 7 * layers);
      EXPECT_EQ(s.fused_ffns, layers);
      EXPECT_EQ(s.chained_layers, layers - 1);
      EXPECT_EQ(s.programs, layers + 1);  // layer 0's q, k, v, u; per layer the chain
      EXPECT_LE(s.max_tile_units, 0x2000);
      expect_tile_units_are_the_parameters(s);
    }
    SCOPED_TRACE("step d: the scores on the chip");
    const llm::ChipPathStats& s = stats[1];
    EXPECT_EQ(s.scores_layers, layers);
    EXPECT_EQ(s.softmax_layers, layers);  // the softmax on the scalar core in each of them
    EXPECT_EQ(s.host_matmuls, 0) << s.host_reason;
    EXPECT_EQ(s.programs, 2 * layers + 1);  // and the scores of each layer
    EXPECT_LE(s.max_tile_units, 0x2000);
    expect_tile_units_are_the_parameters(s);
  });
}

// Shapes that are not the test checkpoints' with fused layers, each the int8 path's logits bit for
// bit: dim 80 (x2 and w2's output padded to 128 each), GQA; head size 24 (u's groups read 24-byte
// slices at unaligned-to-64 places); 8 heads of dim 320 (u's 40 groups do not fit one program:
// u and wo's sum stay on the host, the rest of the chain on the chip); hidden 1100 (no fused FFN,
// so no chains: the add on the host, layer 1's q, k, v as their own program, its u on the host).
TEST(ChipPathStepC, FusedLayersWithOtherShapesAreExact) {
  struct Case {
    TinyShape shape;
    int programs, host_matmuls, chained;
  };
  std::vector<Case> cases(4);
  cases[0].shape = {80, 200, 3, 4, 2, 320, 32, true};
  cases[0].programs = 4;
  cases[1].shape = {192, 500, 2, 8, 2, 300, 32, false};
  cases[1].programs = 3;
  cases[2].shape = {320, 256, 2, 8, 4, 300, 32, true};
  cases[2].programs = 3;  // q, k, v of layer 0 alone, then the two chains (without u)
  cases[2].host_matmuls = 2;
  cases[3].shape = {64, 1100, 2, 4, 4, 300, 32, true};
  cases[3].programs = -1;  // step a's programs for the FFNs
  cases[3].host_matmuls = 1;
  for (Case& test : cases) test.chained = test.shape.hidden <= 1024 ? test.shape.layers - 1 : 0;
  for (const Case& test : cases) {
    SCOPED_TRACE("dim " + std::to_string(test.shape.dim));
    const LoadedModel model = tiny_model(test.shape, TinyWeights(test.shape));
    const llm::Checkpoint& ck = model.ck;
    const llm::Tokenizer& tok = model.tok;
    llm::ChipPathStats s;
#ifdef TINYCORAL_ASAN
    // Sanitized: half the tokens; attention stays on the host, so later positions add no path.
    expect_chip_equals_int8(ck, tok, 12, s, {.fused_layers = true});
#else
    expect_chip_equals_int8(ck, tok, 24, s, {.fused_layers = true});
#endif
    EXPECT_EQ(s.chained_layers, test.chained);
    EXPECT_EQ(s.host_matmuls, test.host_matmuls) << s.host_reason;
    if (test.programs >= 0) {
      EXPECT_EQ(s.programs, test.programs);
    }
  }
}

// Int8Options::chip_rope on the chip path: the programs computing q and k also compute RoPE's two
// products (compiler::FcTableProducts), the host their sums with r (the key's only, where q~'s runs
// in the scores' program); the int8 path's logits bit for bit on shapes that are not the test
// checkpoints' (head size 20 over grouped kv heads, dim 80 padded to 128; head size 24, 8 heads
// over 2; 3 layers), alone, with the scores and softmax on the chip (then q~'s RoPE sum runs in
// their program too) and with the value cache's weighted sum there, every layer's products on the
// chip.
TEST(ChipPathStepD, RopeProductsInTheProgramsGiveTheInt8PathsLogitsBitForBit) {
  for (const TinyShape shape :
       {TinyShape{80, 200, 3, 4, 2, 320, 32, true}, TinyShape{192, 256, 2, 8, 2, 300, 32, false}}) {
    SCOPED_TRACE("dim " + std::to_string(shape.dim));
    const LoadedModel model = tiny_model(shape, TinyWeights(shape));
    // 0: alone; 1: the scores and softmax on the chip (q~'s sum in their program); 2: and the
    // value cache's weighted sum in that program too (0 and 1 share their int8 run).
    std::vector<llm::Int8Options> options(
        3, {.fused_layers = true, .chip_attention = true, .chip_rope = true});
    options[1].chip_scores = options[2].chip_scores = true;
    options[2].weighted_sum = llm::WeightedSum::kValueCache;
    std::vector<llm::ChipPathStats> stats;
    expect_chips_equal_int8(model.ck, model.tok, 12, options, stats);
    for (const int attention : {0, 1, 2}) {
      SCOPED_TRACE("attention on the chip: " + std::to_string(attention));
      const llm::ChipPathStats& s = stats[size_t(attention)];
      EXPECT_EQ(s.rope_layers, shape.layers);
      EXPECT_EQ(s.rope_sum_layers, attention > 0 ? shape.layers : 0);
      // The position's tables are built once per token, not once per program taking them.
      const int positions = s.runs / s.programs;
      EXPECT_EQ(s.runs, s.programs * positions);
      EXPECT_EQ(s.rope_tables, positions);
    }
  }
}

// A chip path asked for RoPE's products of another position than its program returned: the
// program left q and k as zero points on the host (their products came back instead), so the host
// must not compute products from them; it fails, naming the layer and position.
class ProductsOfAnotherPosition : public llm::ChipTransformer {
 public:
  using ChipTransformer::ChipTransformer;

 protected:
  void rope_products_q(int layer, int pos, const int8_t* q, const int8_t* k, int8_t* p1,
                       int8_t* p2) override {
    ChipTransformer::rope_products_q(layer, pos + 1, q, k, p1, p2);
  }
};

TEST(ChipPathStepD, RopeProductsMissingFromTheProgramFail) {
  const TinyShape shape{80, 200, 3, 4, 2, 320, 32, true};
  const LoadedModel model = tiny_model(shape, TinyWeights(shape));
  llm::ThreadPool pool(2);
  const llm::Calibration cal = llm::calibrate(model.ck, pool, 8);
  const llm::Int8Options options{.fused_layers = true, .chip_attention = true, .chip_rope = true};
  auto tpu = runtime::open_virtual_edgetpu();
  llm::ChipTransformer right(model.ck, pool, cal, *tpu, options);
  EXPECT_NO_THROW(right.forward(1, 0));
  ProductsOfAnotherPosition wrong(model.ck, pool, cal, *tpu, options);
  ASSERT_EQ(wrong.stats().rope_layers, shape.layers);
  try {
    wrong.forward(1, 0);
    ADD_FAILURE() << "the host's products of zero points were used";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer 0's RoPE products at 1 were not returned"),
              std::string::npos)
        << e.what();
  }
}

// --unfused-layers: the older arithmetic, the same text from the simulator as from the int8 CPU
// path in it (rand_gqa: 2 layers, 3 programs each), a text of its own (not the default's), and a
// clear refusal where it does not apply.
TEST(ChipPathStepA, GenerateWithUnfusedLayersWritesTheInt8Text) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  std::string why;
  const auto path = reference_checkpoint(data, "rand_gqa", why);
  if (!path) GTEST_SKIP() << why;
  const std::string args =
      generate_args(data, *path, "-n 20 -t 0.8 -s 5 -i 'Lily' --calibration 8");
  const CommandResult cpu = run_cli(args + " --device cpu --int8 --unfused-layers");
  const CommandResult sim = run_cli(args + " --device sim --unfused-layers");
  ASSERT_EQ(cpu.exit_code, 0) << cpu.err;
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  EXPECT_EQ(sim.out, cpu.out);
  EXPECT_GT(sim.out.size(), 10u);
  EXPECT_NE(sim.err.find("14 layer matmuls on the chip as 6 programs per token"), std::string::npos)
      << sim.err;
  const CommandResult fused = run_cli(args + " --device cpu --int8");
  ASSERT_EQ(fused.exit_code, 0) << fused.err;
  EXPECT_NE(fused.out, cpu.out);  // the two arithmetics differ (else these tests prove little)
  const CommandResult plain = run_cli(args + " --device cpu --unfused-layers");
  EXPECT_EQ(plain.exit_code, 2);
  EXPECT_NE(plain.err.find("--unfused-layers needs --int8"), std::string::npos) << plain.err;
  const CommandResult both = run_cli(args + " --device cpu --int8 --unfused-layers --fused-layers");
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_NE(both.err.find("exclude each other"), std::string::npos) << both.err;
}

// Scores on the chip for shapes that are not the test checkpoints': seq_len 40 (each head's
// positions pad to one 64-output group, its key writes cover 40 rows), head size 24 with grouped
// kv heads (groups read q~ at places not aligned to 64), and head size 6 (not a multiple of 4:
// those scores stay on the host, the rest on the chip); the int8 path's logits bit for bit.
TEST(ChipPathStepD, ScoresOnTheChipWithOtherShapesAreExact) {
  struct Case {
    TinyShape shape;
    int scores_layers;
  };
  std::vector<Case> cases(3);
  cases[0].shape = {64, 160, 2, 4, 2, 300, 40, true};
  cases[0].scores_layers = 2;
  cases[1].shape = {192, 500, 2, 8, 2, 300, 32, false};
  cases[1].scores_layers = 2;
  cases[2].shape = {48, 128, 2, 8, 4, 300, 32, true};
  cases[2].scores_layers = 0;
  for (const Case& test : cases) {
    SCOPED_TRACE("dim " + std::to_string(test.shape.dim));
    const LoadedModel model = tiny_model(test.shape, TinyWeights(test.shape));
    const llm::Checkpoint& ck = model.ck;
    const llm::Tokenizer& tok = model.tok;
    llm::ChipPathStats s;
    expect_chip_equals_int8(ck, tok, 24, s,
                            {.fused_layers = true, .chip_attention = true, .chip_scores = true});
    EXPECT_EQ(s.scores_layers, test.scores_layers);
    EXPECT_EQ(s.softmax_layers, test.scores_layers);
  }
}

// The resident keys at K = head_size (not padded to 64): each head's 64-position groups take
// 8 + head_size units, so the scores add exactly layers x heads x groups of them to tile memory,
// with the new key written by the host and by the chip (its column: K / 4 rows); head sizes 24
// over grouped kv heads (80 positions: two groups a head) and 48; the int8 path's logits bit for
// bit. Nothing else is placed with the scores there (no RoPE, no value cache).
TEST(ChipPathStepD, TheResidentKeysTakeHeadSizeUnitsAGroup) {
  for (const TinyShape& shape :
       {TinyShape{96, 160, 2, 4, 2, 300, 80, true}, TinyShape{96, 160, 1, 2, 2, 300, 40, true}}) {
    const int hs = shape.dim / shape.heads;
    SCOPED_TRACE("head size " + std::to_string(hs));
    const LoadedModel model = tiny_model(shape, TinyWeights(shape));
    const llm::Int8Options host{.fused_layers = true, .chip_attention = true};
    llm::Int8Options scores = host, column = host;
    scores.chip_scores = column.chip_scores = column.chip_key_write = true;
    std::vector<llm::ChipPathStats> stats;
    expect_chips_equal_int8(model.ck, model.tok, 12, {host, scores, column}, stats);
    const int64_t groups = int64_t{shape.layers} * shape.heads * ((shape.seq_len + 63) / 64);
    const int64_t keys = groups * compiler::fc_units_per_tile(hs, false);
    const auto units = [](const llm::ChipPathStats& s) {
      int64_t sum = 0;
      for (const int u : s.tile_units) sum += u;
      return sum;
    };
    for (size_t i = 1; i < stats.size(); ++i) {
      SCOPED_TRACE(i == 1 ? "the key written by the host" : "the key's column written by the chip");
      EXPECT_EQ(stats[i].scores_layers, shape.layers);
      EXPECT_EQ(stats[i].key_write_layers, i == 2 ? shape.layers : 0);
      EXPECT_EQ(units(stats[i]) - units(stats[0]), keys);
      EXPECT_EQ(stats[i].resident_bytes - stats[0].resident_bytes, 64 * keys);
    }
  }
}

// `generate` refuses an option of the int8 arithmetic (`option`, with its value) on the CPU's
// float path, with --batch and with --unfused-layers: exit 2, naming the option and --int8.
void expect_option_refused(const std::filesystem::path& data,
                           const std::filesystem::path& checkpoint, const std::string& option) {
  for (const std::string& bad_args : {"--device cpu " + option, "--int8 " + option + " --batch 2",
                                      "--int8 --unfused-layers " + option}) {
    const CommandResult bad = run_cli(generate_args(data, checkpoint, "-n 4 " + bad_args));
    EXPECT_EQ(bad.exit_code, 2) << bad_args;
    EXPECT_NE(bad.err.find(option + " needs --int8"), std::string::npos) << bad.err;
  }
}

// A short story on a test checkpoint (`name`'s length: rand15M's layers are slower to simulate).
std::string story_args(const std::filesystem::path& data, const std::filesystem::path& checkpoint,
                       const std::string& name) {
#ifdef TINYCORAL_ASAN
  // Sanitized: about half the tokens; the later ones take no new path (all inside the first
  // 64-position group of the keys), and each text is still over 10 bytes.
  const char* options =
      name == "rand15M" ? "-n 6 -t 0.8 -s 5 --calibration 8" : "-n 10 -t 0.8 -s 5 --calibration 8";
#else
  const char* options =
      name == "rand15M" ? "-n 10 -t 0.8 -s 5 --calibration 8" : "-n 20 -t 0.8 -s 5 --calibration 8";
#endif
  return generate_args(data, checkpoint, options);
}

// `generate` with the story's arguments (story_args) and `flags`, run once per test process: the
// claims that read the same run (the same flags, in any order) share it.
const CommandResult& story(const std::filesystem::path& data,
                           const std::filesystem::path& checkpoint, const std::string& name,
                           const std::string& flags) {
  static std::map<std::string, CommandResult> runs;
  std::vector<std::string> parts;  // each flag with its value
  std::istringstream words(flags);
  for (std::string word; words >> word;) {
    if (parts.empty() || word.starts_with("-")) {
      parts.push_back(word);
    } else {
      parts.back() += " " + word;
    }
  }
  std::sort(parts.begin(), parts.end());
  const std::string args = story_args(data, checkpoint, name);
  std::string key = args;
  for (const std::string& part : parts) key += " " + part;
  auto it = runs.find(key);
  if (it == runs.end()) it = runs.emplace(key, run_cli(args + " " + flags)).first;
  return it->second;
}

// `generate` with `cpu_flags` and with `sim_flags --json`: both succeed and the simulator writes
// the CPU's text (more than 10 bytes of it, into `cpu_text`). The simulator's JSON; null when
// either run failed (the failure is reported).
nlohmann::json sim_writes_cpu_text(const std::filesystem::path& data,
                                   const std::filesystem::path& checkpoint, const std::string& name,
                                   const std::string& cpu_flags, const std::string& sim_flags,
                                   std::string& cpu_text) {
  const CommandResult& cpu = story(data, checkpoint, name, cpu_flags);
  const CommandResult& sim = story(data, checkpoint, name, sim_flags + " --json");
  EXPECT_EQ(cpu.exit_code, 0) << cpu.err;
  EXPECT_EQ(sim.exit_code, 0) << sim.err;
  if (cpu.exit_code != 0 || sim.exit_code != 0) return nullptr;
  nlohmann::json j = nlohmann::json::parse(sim.out);
  EXPECT_EQ(j.at("text").get<std::string>() + "\n", cpu.out);
  EXPECT_GT(cpu.out.size(), 10u);
  cpu_text = cpu.out;
  return j;
}

// `generate --device sim --scores-on-chip` writes the int8 path's text on both test checkpoints
// (the scores of every layer on the chip, one more program and one caching run per layer and
// token); the flag is refused where there is no chip to run them on.
void generate_with_scores_on_the_chip(const std::filesystem::path& data) {
  for (const std::string name : {"rand_gqa", "rand15M"}) {
    SCOPED_TRACE(name);
    std::string why;
    const auto path = reference_checkpoint(data, name, why);
    if (!path) GTEST_SKIP() << why;
    std::string cpu_text;
    const nlohmann::json j = sim_writes_cpu_text(data, *path, name, "--device cpu --int8",
                                                 "--device sim --scores-on-chip", cpu_text);
    ASSERT_FALSE(j.is_null());
    const int layers = name == "rand15M" ? 6 : 2;
    EXPECT_EQ(j.at("chip").at("scores_layers_on_chip"), layers);
    EXPECT_EQ(j.at("chip").at("softmax_layers_on_chip"), layers);
    EXPECT_EQ(j.at("chip").at("programs_per_token"), 2 * layers + 1);
  }
  std::string why;
  const auto path = reference_checkpoint(data, "rand_gqa", why);
  if (!path) GTEST_SKIP() << why;
  const CommandResult bad =
      run_cli(generate_args(data, *path, "-n 4 --scores-on-chip --device cpu"));
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--scores-on-chip needs an Edge TPU device"), std::string::npos)
      << bad.err;
}

// Two shapes that are not the test checkpoints', for the attention tests below, and the tokens each
// runs: head size 16 over grouped kv heads, seq_len 40; head size 80, one layer, 96 positions.
struct AttentionShape {
  TinyShape shape;
  int steps;
};
const AttentionShape kOtherAttentionShapes[] = {{{64, 160, 2, 4, 2, 300, 40, true}, 24},
                                                {{160, 300, 1, 2, 2, 300, 96, true}, 80}};
// The weighted sum the tests that take one per shape give each of kOtherAttentionShapes: the
// softmax alone for the first, the value cache's sum joined to the scores for the second.
const llm::WeightedSum kOtherAttentionSums[] = {llm::WeightedSum::kScalarCore,
                                                llm::WeightedSum::kValueCache};

// The chip path's attention on one of kOtherAttentionShapes, in one test per shape (four tests
// before; now the chip paths of a shape share its tiny model, one calibration and one int8 run per
// arithmetic: 5 int8 runs and 2 calibrations for the 13 of each under the sanitizers, and the
// second shape's key computed and written by the chip is its run with q's products kept), each
// the int8 path's logits bit for bit:
// - the value cache: WeightedSum::kValueCache with the weighted sum on the chip, head size 16
//   with grouped kv heads and seq_len 40 (one 64-position program), head size 80 (two groups per
//   head) over 96 positions (the writes cross a 64-position group); with the scores on the host
//   (the sum a program of its own) and on the chip (the sum inside the scores' program). wo after
//   the sum holds every layer's heads side by side where a head is one piece of whole words (head
//   size 16: K = 4 x 16 = 64, 8 + 64 units a group, not 8 + 4 x 64) and at their padded places
//   where not (head size 80: K = 2 x 128): its resident bytes are exactly that many units.
// - the key column written by the chip (Int8Options::chip_key_write): the scores' program writes
//   the new key into its column of the resident keys itself (compiler/fc_column_write.h), head
//   size 16 over grouped kv heads (one row group per head), head size 80 (K = 80, 20 rows through
//   narrow memory, and positions past 64), with the softmax alone in the scores' program and with
//   the weighted sum joined to it. A key not written, or written into another column, changes the
//   scores of every later position.
// - the key computed and written by the chip (chip_rope too): the scores' program computes the
//   new key itself (RoPE's key sum beside q~'s, in front of the scores) and writes those bytes
//   into the key's column: the host sends only the key's products, no key bytes. Head size 16 with
//   two heads per kv head (each kv head's key to both its heads' groups), softmax alone; head size
//   80 (the key two 64-byte pieces, K = 80) past 64 positions, with the weighted sum joined. A key
//   piece of another kv head, or one the chip did not put into the column, changes the scores. The
//   key's channels are packed in kv_dim's 64-channel groups (as the chain computes k), so a head
//   starts inside a group (the first shape's second kv head, at byte 16) or straddles two (the
//   second shape's, bytes 80..159): 1 and 3 groups a layer, not one per kv head (2 and 4).
// - q's RoPE products kept on the tiles (Int8Options::keep_rope_products, the default): the
//   program computing q leaves them in a resident row of its tiles and the scores' program's RoPE
//   sum, whose groups sit on those tiles, reads them from there, so they never come back over USB.
//   Against the same flags with the round trip through the host (keep_rope_products false): the
//   same runs, and exactly q's P1 and R (128 bytes per 64 channels of q) fewer bytes from the stick
//   per layer and token, and a scores' row without their slots, on the softmax program alone (head
//   size 16 over grouped kv heads, the key's sum on the host) and with the key's sum and the
//   weighted sum joined (head size 80, past 64 positions).
void expect_attention_on_the_chip_exact(size_t i) {
  const auto& [shape, steps] = kOtherAttentionShapes[i];
  const LoadedModel model = tiny_model(shape, TinyWeights(shape));
  const llm::Int8Options scores{.fused_layers = true, .chip_attention = true, .chip_scores = true};
  std::vector<llm::Int8Options> options;
  // The value cache's weighted sum, with the scores on the host and on the chip: options 0 and 1.
  for (const bool on_chip : {false, true}) {
    llm::Int8Options o = scores;
    o.chip_scores = on_chip;
    o.weighted_sum = llm::WeightedSum::kValueCache;
    options.push_back(o);
  }
  // The key column written by the chip, the softmax alone and with the value cache.
  std::vector<llm::WeightedSum> key_column_sums = {llm::WeightedSum::kScalarCore,
                                                   llm::WeightedSum::kValueCache};
#ifdef TINYCORAL_ASAN
  // Sanitized: head size 80's key write past 64 positions runs once, with the value cache (the
  // softmax alone writes the key the same way: the first shape checks both).
  if (i == 1) key_column_sums = {llm::WeightedSum::kValueCache};
#endif
  const size_t key_column = options.size();
  for (const llm::WeightedSum sum : key_column_sums) {
    llm::Int8Options o = scores;
    o.chip_key_write = true;
    o.weighted_sum = sum;
    options.push_back(o);
  }
  // q's RoPE products kept and sent back; on the second shape with the key computed and written
  // by the chip, so the kept run is that check's too.
  const size_t kept = options.size(), sent = kept + 1;
  for (const bool keep : {true, false}) {
    llm::Int8Options o = scores;
    o.chip_key_write = i == 1;
    o.weighted_sum = kOtherAttentionSums[i];
    o.chip_rope = true;
    o.keep_rope_products = keep;
    options.push_back(o);
  }
  size_t key_computed = kept;
  if (i == 0) {
    key_computed = options.size();
    llm::Int8Options o = scores;
    o.chip_key_write = true;
    o.weighted_sum = kOtherAttentionSums[i];
    o.chip_rope = true;
    options.push_back(o);
  }
  std::vector<llm::ChipPathStats> stats;
  expect_chips_equal_int8(model.ck, model.tok, steps, options, stats);

  for (const bool on_chip : {false, true}) {
    SCOPED_TRACE(on_chip ? "the value cache, the scores on the chip" : "the value cache");
    const llm::ChipPathStats& s = stats[on_chip ? 1 : 0];
    EXPECT_EQ(s.value_sum_layers, shape.layers);
    // With the scores on the chip the sum joins their program (one run per layer).
    EXPECT_EQ(s.attention_layers, on_chip ? shape.layers : 0);
    EXPECT_EQ(s.programs, 2 * shape.layers + 1);  // the chains, layer 0, a sum or scores + sum
    // wo after the sum: on the host, or in that program where it fits (these shapes: always).
    EXPECT_EQ(s.wo_layers, on_chip ? shape.layers : 0);
    EXPECT_EQ(s.host_matmuls, on_chip ? 0 : shape.layers);
    const int hs = shape.dim / shape.heads;
    const int wo_k = hs <= 64 && hs % 4 == 0 ? (shape.heads * hs + 3) / 4 * 4
                                             : shape.heads * ((hs + 63) / 64 * 64);
    EXPECT_EQ(s.wo_resident_bytes, on_chip ? int64_t{64} * shape.layers * ((shape.dim + 63) / 64) *
                                                 compiler::fc_units_per_tile(wo_k, false)
                                           : 0);
  }
  for (size_t k = 0; k < key_column_sums.size(); ++k) {
    const bool values = key_column_sums[k] == llm::WeightedSum::kValueCache;
    SCOPED_TRACE(values ? "the key column written by the chip, the value cache"
                        : "the key column written by the chip");
    const llm::ChipPathStats& s = stats[key_column + k];
    EXPECT_EQ(s.softmax_layers, shape.layers);
    EXPECT_EQ(s.key_write_layers, shape.layers);
    EXPECT_EQ(s.attention_layers, values ? shape.layers : 0);
  }
  {
    SCOPED_TRACE("the key computed and written by the chip");
    const llm::ChipPathStats& s = stats[key_computed];
    EXPECT_EQ(s.key_write_layers, shape.layers);
    EXPECT_EQ(s.rope_sum_layers, shape.layers);
    EXPECT_EQ(s.key_sum_layers, shape.layers);
    const int kv_dim = shape.dim / shape.heads * shape.kv_heads;
    EXPECT_EQ(s.key_sum_groups, shape.layers * ((kv_dim + 63) / 64));
    EXPECT_EQ(s.attention_layers,
              kOtherAttentionSums[i] == llm::WeightedSum::kValueCache ? shape.layers : 0);
  }
  SCOPED_TRACE("q's RoPE products kept on the tiles");
  const llm::ChipPathStats &k = stats[kept], &b = stats[sent];
  EXPECT_EQ(k.rope_sum_layers, shape.layers);
  EXPECT_EQ(k.key_sum_layers, i == 1 ? shape.layers : 0);
  EXPECT_EQ(k.rope_kept_layers, shape.layers);
  EXPECT_EQ(b.rope_kept_layers, 0);
  ASSERT_EQ(k.runs, b.runs);
  const int positions = k.runs / (k.programs + k.scores_layers - k.softmax_layers);
  const uint64_t q_products = 2 * uint64_t((shape.dim + 63) / 64 * 64);
  EXPECT_EQ(b.bytes_from_device - k.bytes_from_device,
            uint64_t(positions) * uint64_t(shape.layers) * q_products);
  EXPECT_LT(k.modeled.from_device_ms, b.modeled.from_device_ms);
  // The host's row ends after the groups that still read it, so it holds no slot for the kept
  // ones: q's products are gone from it where the sum's row was the longer (the second shape,
  // whose key groups follow q's); the first shape's row is the scores' own either way.
  EXPECT_EQ(b.scores_row_bytes - k.scores_row_bytes, i == 1 ? shape.layers * int(q_products) : 0);
}

TEST(ChipPathStepD, AttentionOnTheChipIsExactWithHeadSize16OverGroupedKvHeads) {
  expect_attention_on_the_chip_exact(0);
}

TEST(ChipPathStepD, AttentionOnTheChipIsExactWithHeadSize80Past64Positions) {
  expect_attention_on_the_chip_exact(1);
}

// A chip path whose stick fails one program: the scores' program of `layer` at position 2, which
// reads q's products kept on the tiles by the program before it (layer 0's program, or the chain
// ending the layer before); with the value cache that scores' program computes the weighted sum
// too (attention_q).
class FailingScores : public llm::ChipTransformer {
 public:
  FailingScores(const llm::Checkpoint& ck, llm::ThreadPool& pool, const llm::Calibration& cal,
                runtime::EdgeTpu& tpu, llm::Int8Options options, usb::VirtualStick& stick,
                int layer)
      : ChipTransformer(ck, pool, cal, tpu, options), stick_(stick), layer_(layer) {}

 protected:
  void softmax_q(int layer, int pos, const int8_t* q8, uint8_t* e, float* inv_sum) override {
    if (layer == layer_ && pos == 2) stick_.faults().fatal_next_program = true;
    ChipTransformer::softmax_q(layer, pos, q8, e, inv_sum);
  }

 private:
  usb::VirtualStick& stick_;
  int layer_;
};

// A recovery between the program that keeps q's products on the tiles and the scores' program
// that reads them (the re-opened chip has lost its tile memory): the runtime caches the weights
// again, the chip path runs the products' program again, then the scores' program, and the
// logits stay the int8 path's. Layer 0 (its products from layer 0's own program) and layer 1
// (from the chain ending layer 0) of the shape with two layers, softmax alone; the value cache's
// scores and weighted sum in one program on the other shape. Without the second run of the
// products' program the scores read an empty row and the logits change from position 2.
// One case of the test below: `layer`'s scores' program on kOtherAttentionShapes[shape] fails once.
struct RecoveryCase {
  size_t shape;
  int layer;
  llm::WeightedSum sum;
};
void expect_logits_after_a_recovery(const RecoveryCase& c) {
  const TinyShape shape = kOtherAttentionShapes[c.shape].shape;
  SCOPED_TRACE("dim " + std::to_string(shape.dim) + ", layer " + std::to_string(c.layer));
  const LoadedModel model = tiny_model(shape, TinyWeights(shape));
  const llm::Int8Options options{.fused_layers = true,
                                 .chip_attention = true,
                                 .chip_scores = true,
                                 .chip_key_write = c.shape == 1,
                                 .weighted_sum = c.sum,
                                 .chip_rope = true};
  llm::ThreadPool pool(2);
  const llm::Calibration cal = llm::calibrate(model.ck, pool, 8);
  llm::Int8Transformer cpu(model.ck, pool, cal, options);
  chip::VirtualEdgeTpu chip;
  usb::VirtualStick stick{chip, usb::VirtualStick::Mode::kApplication};
  runtime::EdgeTpu tpu(std::make_unique<usb::VirtualTransport>(stick), nullptr, nullptr);
  FailingScores failing(model.ck, pool, cal, tpu, options, stick, c.layer);
  ASSERT_EQ(failing.stats().rope_kept_layers, shape.layers);
  if (c.sum == llm::WeightedSum::kValueCache) {
    ASSERT_EQ(failing.stats().attention_layers, shape.layers);
  }
  const testing::Run want = run(cpu, model.tok, 0.0f, 42, "Once upon", 8);
  const testing::Run got = run(failing, model.tok, 0.0f, 42, "Once upon", 8);
  EXPECT_EQ(tpu.recoveries(), 1);
  ASSERT_EQ(got.logits.size(), want.logits.size());
  ASSERT_GT(want.logits.size(), 3u);
  for (size_t p = 0; p < want.logits.size(); ++p)
    ASSERT_EQ(got.logits[p], want.logits[p]) << "position " << p;
}

TEST(ChipPathStepD, KeptRopeProductsAreComputedAgainAfterARecovery) {
  for (const RecoveryCase& c : {RecoveryCase{0, 0, llm::WeightedSum::kScalarCore},
                                RecoveryCase{0, 1, llm::WeightedSum::kScalarCore},
                                RecoveryCase{1, 0, llm::WeightedSum::kValueCache}})
    expect_logits_after_a_recovery(c);
}

// With late_wo, the placement with the last layer's wo and rest first is kept where it gains the
// rest and keeps as many joined layers and layers keeping q's products as the first placement;
// else the first placement stays.
TEST(ChipPathStepD, TheEarlyPlacementIsKeptOnlyWhereItGainsTheRestAndLosesNothing) {
  llm::ChipPathStats plain;
  plain.joined_layers = 6;
  plain.rope_kept_layers = 6;
  plain.rest_layers = 0;
  llm::ChipPathStats early = plain;
  early.rest_layers = 1;
  EXPECT_TRUE(llm::keep_early_placement(plain, early));
  llm::ChipPathStats more = early;  // (more joins than the first placement: kept too)
  more.joined_layers = 7;
  EXPECT_TRUE(llm::keep_early_placement(plain, more));
  llm::ChipPathStats no_rest = early;
  no_rest.rest_layers = 0;
  EXPECT_FALSE(llm::keep_early_placement(plain, no_rest));
  llm::ChipPathStats join_lost = early;
  join_lost.joined_layers = 5;
  EXPECT_FALSE(llm::keep_early_placement(plain, join_lost));
  llm::ChipPathStats kept_lost = early;
  kept_lost.rope_kept_layers = 5;
  EXPECT_FALSE(llm::keep_early_placement(plain, kept_lost));
}

// A chip path whose stick fails the joined run of layer `layer_`'s scores at position 2: layer 0's
// q, k, v program (qkv_q), or the chain ending the layer before (ffn_add_q).
class FailingJoinedRun : public llm::ChipTransformer {
 public:
  FailingJoinedRun(const llm::Checkpoint& ck, llm::ThreadPool& pool, const llm::Calibration& cal,
                   runtime::EdgeTpu& tpu, llm::Int8Options options, usb::VirtualStick& stick,
                   int layer)
      : ChipTransformer(ck, pool, cal, tpu, options), stick_(stick), layer_(layer) {}
  int failed = 0;

 protected:
  void qkv(int layer, int pos, const float* x, float* q, float* k, float* v) override {
    pos_of_token_ = pos;
    ChipTransformer::qkv(layer, pos, x, q, k, v);
  }
  void qkv_q(int layer, const int8_t* xq, int8_t* q, int8_t* k, int8_t* v) override {
    if (layer == 0) fail_if(0);
    ChipTransformer::qkv_q(layer, xq, q, k, v);
  }
  void ffn_add_q(int layer, const int8_t* xq, const int8_t* x2q, int8_t* yq,
                 int8_t* next) override {
    fail_if(layer + 1);
    ChipTransformer::ffn_add_q(layer, xq, x2q, yq, next);
  }

 private:
  void fail_if(int scores_layer) {
    if (scores_layer == layer_ && pos_of_token_ == 2 && failed++ == 0)
      stick_.faults().fatal_next_program = true;
  }
  usb::VirtualStick& stick_;
  int layer_;
  int pos_of_token_ = -1;
};

// The prompted story on `failing` (whose run at position 2 fails once): one failure, one recovery
// by `tpu`, and every position's logits `want`'s.
void expect_recovered_logits(FailingJoinedRun& failing, const runtime::EdgeTpu& tpu,
                             const llm::Tokenizer& tok, const testing::Run& want) {
  const testing::Run got = run(failing, tok, 0.0f, 42, "Once upon", 8);
  EXPECT_EQ(failing.failed, 1);
  EXPECT_EQ(tpu.recoveries(), 1);
  ASSERT_EQ(got.logits.size(), want.logits.size());
  for (size_t p = 0; p < want.logits.size(); ++p)
    ASSERT_EQ(got.logits[p], want.logits[p]) << "position " << p;
}

// A recovery inside a joined run (layer 0's q, k, v program with layer 0's scores, or layer 0's
// chain with layer 1's; softmax and key column write; q's products kept and read in that run):
// the runtime caches the weights again, the keys from the host's copy up to the position before
// (the run writes pos's column itself), and the whole program runs again; the logits stay the
// int8 path's at every position. The recovery empties the keys of positions 0 and 1, so a rerun
// without them in the host's copy would change the scores from position 2 on. With the value
// cache joined too (chip_residual: the run writes v~ and sums it), the recovery empties the cache
// and the staging rows: the caching writes the cache from the host's copy and each staging row
// with the quad's positions 0 and 1, or the rerun's transposing write would put stale lanes for
// them into cache row 0 and change the sum at position 2. With the last layer's rest and FFN
// joined too (join_layers), the rest's add and norm are cached again with the other weights, and
// the rerun returns the FFN's y that the host's ffn_q takes. With layer 1 behind layer 0's rest
// (layers_per_run 0: one run a token), failing layer 0's run fails both layers' (layer 1's own
// seam runs nothing): the rerun rebuilds both layers' cache and staging rows and layer 0's rest.
TEST(ChipPathStepD, TheJoinedRunIsRunAgainAfterARecovery) {
  const TinyShape shape = kOtherAttentionShapes[0].shape;
  const LoadedModel model = tiny_model(shape, TinyWeights(shape));
  const llm::Int8Options scores{
      .chip_scores = true, .chip_key_write = true, .chip_rope = true, .chip_rms = true};
  llm::Int8Options values = scores;
  values.weighted_sum = llm::WeightedSum::kValueCache;
  values.chip_residual = true;
  values.join_layers = false;
  llm::Int8Options rest = values;
  rest.join_layers = true;
  rest.layers_per_run = 1;
  llm::Int8Options composed = rest;
  composed.layers_per_run = 0;
  llm::ThreadPool pool(2);
  const llm::Calibration cal = llm::calibrate(model.ck, pool, 8);
  for (const llm::Int8Options& options : {scores, values, rest, composed}) {
    SCOPED_TRACE(!options.chip_residual        ? "the scores joined"
                 : options.layers_per_run != 1 ? "layer 1 behind layer 0's rest"
                 : options.join_layers         ? "the last layer's rest and FFN joined too"
                                               : "the value cache joined");
    llm::Int8Transformer cpu(model.ck, pool, cal, options);
    const testing::Run want = run(cpu, model.tok, 0.0f, 42, "Once upon", 8);
    ASSERT_GT(want.logits.size(), 3u);
    for (const int layer : {0, 1}) {
      SCOPED_TRACE("layer " + std::to_string(layer));
      chip::VirtualEdgeTpu chip;
      usb::VirtualStick stick{chip, usb::VirtualStick::Mode::kApplication};
      runtime::EdgeTpu tpu(std::make_unique<usb::VirtualTransport>(stick), nullptr, nullptr);
      FailingJoinedRun failing(model.ck, pool, cal, tpu, options, stick, layer);
      ASSERT_EQ(failing.stats().joined_layers, shape.layers);
      if (options.chip_residual) {
        ASSERT_EQ(failing.stats().value_sum_layers, shape.layers);
      }
      // (Failing the last layer's joined run fails the run holding its rest and FFN.)
      ASSERT_EQ(failing.stats().rest_layers, options.chip_residual && options.join_layers);
      const int one_run =
          options.chip_residual && options.join_layers && options.layers_per_run != 1;
      ASSERT_EQ(failing.stats().composed_layers, one_run);
      if (one_run && layer == 1) continue;  // (its seam runs nothing)
      expect_recovered_logits(failing, tpu, model.tok, want);
    }
  }
}

// D.3: every layer's joined program behind the rest of the layer before, on the first of
// kOtherAttentionShapes with 3 and 4 layers (the middle layers' rests read x_q from the chain's
// add, each layer's outputs named for it): one run a token (expect_chips_equal_int8 counts the
// runs), every logit the int8 path's bit for bit, against the same options a run a layer and at
// most two layers a run (layers_per_run 2: 4 layers in 2 runs a token); and a
// failed run at position 2 (the token's one run, holding every layer) is recovered: the rerun
// rebuilds every layer's cache and staging rows and every composed layer's rest.
TEST(ChipPathStepD, EveryLayerBehindTheRestBeforeItGivesOneRunATokenBitForBit) {
  llm::Int8Options apart = full_attention_options();
  apart.layers_per_run = 1;
  llm::Int8Options composed = apart;
  composed.layers_per_run = 0;
  llm::Int8Options two = apart;  // at most two layers a program
  two.layers_per_run = 2;
  for (const int layers : {1, 3, 4}) {
    SCOPED_TRACE(std::to_string(layers) + " layers");
    TinyShape shape = kOtherAttentionShapes[0].shape;
    shape.layers = layers;
    const LoadedModel model = tiny_model(shape, TinyWeights(shape));
    std::vector<llm::ChipPathStats> stats;
    expect_chips_equal_int8(model.ck, model.tok, 10, {apart, composed, two}, stats);
    EXPECT_EQ(stats[0].joined_layers, layers);
    EXPECT_EQ(stats[0].rest_layers, 1);
    EXPECT_EQ(stats[0].composed_layers, 0);
    EXPECT_EQ(stats[0].programs, layers);
    EXPECT_EQ(stats[1].composed_layers, layers - 1);
    EXPECT_EQ(stats[1].programs, 1);
    // layers_per_run 2: layers 0 and 1 in one program, 2 and 3 in the next (3 layers: layer 2's
    // apart); 4 layers in 2 runs a token.
    EXPECT_EQ(stats[2].composed_layers, layers / 2);
    EXPECT_EQ(stats[2].programs, (layers + 1) / 2);
    // The joined programs counted (and kept) are those that run: each program's head's, one per
    // 64-position group (a layer behind a composed rest has none of its own); every program writing
    // the key is one of them.
    const int groups = (shape.seq_len + 63) / 64;
    for (const llm::ChipPathStats& s : stats) {
      EXPECT_EQ(s.joined_programs, s.programs * groups);
      EXPECT_EQ(s.key_programs, s.joined_programs);
    }
    // Each composed rest's add and norm counted as resident where they are placed: the tiles'
    // units less the resident bytes the same as a run a layer's.
    const auto uncounted = [](const llm::ChipPathStats& s) {
      return 64 * std::accumulate(s.tile_units.begin(), s.tile_units.end(), int64_t{0}) -
             s.resident_bytes;
    };
    EXPECT_EQ(uncounted(stats[1]), uncounted(stats[0]));
    // The instruction bytes by part (docs/llm.md "Where a token's bytes go"): all within the bytes
    // sent; each layer's rest in the composed form, the last one's alone a run a layer.
    const auto part = [](const llm::ChipPathStats& s, const std::string& name) {
      uint64_t b = 0;
      for (const auto& [n, bytes] : s.joined_part_bytes) b += n == name ? bytes : 0;
      return b;
    };
    for (const llm::ChipPathStats& s : stats) {
      uint64_t sum = 0;
      for (const auto& [n, bytes] : s.joined_part_bytes) sum += bytes;
      EXPECT_GT(sum, s.bytes_to_device * 9 / 10);
      EXPECT_LT(sum, s.bytes_to_device);
      for (const char* name : {"chain", "scores", "softmax", "sum: op", "wo", "rest: add"})
        EXPECT_GT(part(s, name), 0u) << name;
    }
    EXPECT_EQ(part(stats[1], "rest: add"), uint64_t(layers) * part(stats[0], "rest: add"));
    // The heads' pieces of the weighted sum (head_size bytes apart, wo reading them side by side)
    // go to wo's tiles in one broadcast a layer: its bytes are one ffn_broadcast of n_heads pieces.
    const int hs = shape.dim / shape.heads;
    ASSERT_LT(hs, 64);
    compiler::Emitter one = compiler::Emitter::counting();
    int ordinal = 0;
    compiler::ffn_broadcast(one, 0x3, std::vector<std::pair<int, int>>(size_t(shape.heads), {0, 0}),
                            ordinal, 0, hs);
    const uint64_t broadcast =
        one.finished_bytes() - compiler::Emitter::counting().finished_bytes();
    EXPECT_EQ(part(stats[0], "sum: pieces to wo"), uint64_t(stats[0].runs) * broadcast);
    EXPECT_EQ(part(stats[1], "sum: pieces to wo"),
              uint64_t(stats[1].runs) * uint64_t(layers) * broadcast);
    if (layers != 3) continue;  // (the recovery once: test time)
    llm::ThreadPool pool(2);
    const llm::Calibration cal = llm::calibrate(model.ck, pool, 8);
    llm::Int8Transformer cpu(model.ck, pool, cal, composed);
    const testing::Run want = run(cpu, model.tok, 0.0f, 42, "Once upon", 8);
    ASSERT_GT(want.logits.size(), 3u);
    chip::VirtualEdgeTpu chip;
    usb::VirtualStick stick{chip, usb::VirtualStick::Mode::kApplication};
    runtime::EdgeTpu tpu(std::make_unique<usb::VirtualTransport>(stick), nullptr, nullptr);
    FailingJoinedRun failing(model.ck, pool, cal, tpu, composed, stick, 0);
    ASSERT_EQ(failing.stats().composed_layers, layers - 1);
    expect_recovered_logits(failing, tpu, model.tok, want);
  }
}

// plan_r15 L4/L5: the rests' add and norm groups read one copy per tile of a weight block that is
// byte for byte another placed rest group's (ChipTransformer::place_rest): on the first of
// kOtherAttentionShapes with 4 layers composed (one group an FC, every layer's rest placed), each
// layer's norm block is the identity where its gains are all positive, so one copy serves the four
// norms; with one negative gain in layer 1 its block differs and it keeps a copy of its own. The
// rests' resident units (beyond a run a layer's, which places the last layer's alone) are those
// the distinct blocks (found here from the int8 weights) and the sharing groups' aux rows make,
// the tiles' units count them once, and the logits are the int8 path's bit for bit.
TEST(ChipPathStepD, TheRestsShareOneCopyOfEachIdenticalWeightBlockPerTile) {
  llm::Int8Options apart = full_attention_options();
  apart.layers_per_run = 1;
  llm::Int8Options composed = apart;
  composed.layers_per_run = 0;
  for (const bool negative : {false, true}) {
    SCOPED_TRACE(negative ? "a negative gain in layer 1" : "positive gains");
    TinyShape shape = kOtherAttentionShapes[0].shape;
    shape.layers = 4;
    TinyWeights weights(shape);
    if (negative) {  // rms_ffn (the rest's norm) of layer 1, channel 5
      float& gain = weights.tensors[6][size_t(shape.dim) + 5];
      gain = -gain;
    }
    const LoadedModel model = tiny_model(shape, weights);
    std::vector<llm::ChipPathStats> stats;
    expect_chips_equal_int8(model.ck, model.tok, 10, {apart, composed}, stats);
    ASSERT_EQ(stats[0].rest_layers, 1);
    ASSERT_EQ(stats[1].composed_layers, shape.layers - 1);
    EXPECT_EQ(stats[0].rest_shared_groups, 0);  // (one rest placed)
    // The distinct weight blocks of the layers' adds and norms (one group each: dim 64).
    llm::ThreadPool pool(2);
    const llm::Calibration cal = llm::calibrate(model.ck, pool, 8);
    const llm::Int8Transformer cpu(model.ck, pool, cal, composed);
    const llm::Int8Weights& q = *cpu.weights();
    const auto block = [](const compiler::FcLayer& l) {
      const std::vector<uint8_t> p = compiler::fc_parameters(l);
      return std::vector<uint8_t>(p.begin() + 64 * compiler::fc_units_per_tile(0, !l.bias.empty()),
                                  p.end());
    };
    std::set<std::vector<uint8_t>> adds, norms;
    for (int l = 0; l < shape.layers; ++l) {
      adds.insert(block(llm::residual_add_layer(q.attention_adds[size_t(l)], shape.dim)));
      norms.insert(block(llm::rms_input_layer(q.rms_inputs[size_t(l)], shape.dim)));
    }
    EXPECT_EQ(norms.size(), negative ? 2u : 1u);
    const int64_t layers = shape.layers, add_units = compiler::fc_units_per_tile(128, true),
                  norm_units = compiler::fc_units_per_tile(64, false);
    const int64_t shared = (layers - int64_t(adds.size())) + (layers - int64_t(norms.size()));
    EXPECT_EQ(stats[1].rest_shared_groups, shared);
    const int64_t units =
        int64_t(adds.size()) * add_units +
        (layers - int64_t(adds.size())) * compiler::fc_units_per_tile(0, true) +
        int64_t(norms.size()) * norm_units +
        (layers - int64_t(norms.size())) * compiler::kFcAuxUnits +
        layers * 4;  // (each norm's constants' row: FcLayerRest::norm_const_units)
    EXPECT_EQ(stats[1].resident_bytes - stats[0].resident_bytes,
              64 * (units - add_units - norm_units - 4));
    const auto sum = [](const llm::ChipPathStats& s) {
      return std::accumulate(s.tile_units.begin(), s.tile_units.end(), int64_t{0});
    };
    EXPECT_EQ(sum(stats[1]) - sum(stats[0]), units - add_units - norm_units - 4);
  }
}

// The same with three groups an FC (dim 192, head size 16 as above, 3 layers composed): one
// layer's add groups are one block (its constants on each group's diagonal) and so are its norm's,
// so two groups of an FC share a tile and its copy (place_rest's pairs), the third a copy of its
// own: each layer's add holds 2 copies, and the norms (positive gains) 2 in all, the layers
// before the last reading the last's. Exact against the int8 path as above.
TEST(ChipPathStepD, TheRestsFullGroupsShareACopyTwoATile) {
  llm::Int8Options apart = full_attention_options();
  apart.layers_per_run = 1;
  llm::Int8Options composed = apart;
  composed.layers_per_run = 0;
  TinyShape shape = kOtherAttentionShapes[0].shape;
  shape.dim = 192;
  shape.heads = 12;
  shape.kv_heads = 6;
  shape.layers = 3;
  const LoadedModel model = tiny_model(shape, TinyWeights(shape));
  std::vector<llm::ChipPathStats> stats;
  expect_chips_equal_int8(model.ck, model.tok, 10, {apart, composed}, stats);
  ASSERT_EQ(stats[0].rest_layers, 1);
  ASSERT_EQ(stats[1].composed_layers, shape.layers - 1);
  // The blocks as said: every group of a layer's add one block, the layers' apart; one norm block.
  llm::ThreadPool pool(2);
  const llm::Calibration cal = llm::calibrate(model.ck, pool, 8);
  const llm::Int8Transformer cpu(model.ck, pool, cal, composed);
  const llm::Int8Weights& q = *cpu.weights();
  const auto blocks = [](const compiler::FcLayer& l) {
    const std::vector<uint8_t> p = compiler::fc_parameters(l);
    const int aux = compiler::fc_units_per_tile(0, !l.bias.empty());
    const int units = compiler::fc_units_per_tile(l.k, !l.bias.empty());
    std::set<std::vector<uint8_t>> out;
    for (int g = 0; g < l.n / 64; ++g)
      out.insert(std::vector<uint8_t>(p.begin() + 64 * (g * units + aux),
                                      p.begin() + 64 * (g + 1) * units));
    return out;
  };
  std::set<std::vector<uint8_t>> adds, norms;
  for (int l = 0; l < shape.layers; ++l) {
    const auto a = blocks(llm::residual_add_layer(q.attention_adds[size_t(l)], shape.dim));
    ASSERT_EQ(a.size(), 1u);
    adds.insert(a.begin(), a.end());
    const auto n = blocks(llm::rms_input_layer(q.rms_inputs[size_t(l)], shape.dim));
    norms.insert(n.begin(), n.end());
  }
  ASSERT_EQ(adds.size(), size_t(shape.layers));
  ASSERT_EQ(norms.size(), 1u);
  const int64_t layers = shape.layers, add_units = compiler::fc_units_per_tile(128, true),
                add_aux = compiler::fc_units_per_tile(0, true), norm_aux = compiler::kFcAuxUnits;
  // A run a layer places the last layer's rest alone (its add and norm 2 copies and a sharer
  // each); composed, each layer before adds an add as that, its norm's aux rows and its norm's
  // constants' rows (a row a group: FcLayerRest::norm_const_units).
  const int64_t others = (layers - 1) * (2 * add_units + add_aux + 3 * norm_aux + 3 * 4);
  EXPECT_EQ(stats[0].rest_shared_groups, 2);
  EXPECT_EQ(stats[1].rest_shared_groups, 2 + (layers - 1) * 4);
  EXPECT_EQ(stats[1].resident_bytes - stats[0].resident_bytes, 64 * others);
}

// A negative Int8Options::layers_per_run is refused with an Error naming it (it meant "no cap"
// silently before); 0 and a cap construct.
TEST(ChipPathStepD, ANegativeLayersPerRunIsRefused) {
  const TinyShape shape = kOtherAttentionShapes[0].shape;
  const LoadedModel model = tiny_model(shape, TinyWeights(shape));
  llm::ThreadPool pool(2);
  const llm::Calibration cal = llm::calibrate(model.ck, pool, 8);
  auto tpu = runtime::open_virtual_edgetpu();
  llm::Int8Options options = full_attention_options();
  for (const int n : {-1, 0, 2}) {
    options.layers_per_run = n;
    const std::string why =
        error_of([&] { llm::ChipTransformer(model.ck, pool, cal, *tpu, options); });
    if (n < 0)
      EXPECT_NE(why.find("layers_per_run = -1"), std::string::npos) << why;
    else
      EXPECT_EQ(why, "");
  }
}

// A generator refusing every joined program that carries a rest (ChipTransformer::
// rest_check_for_tests): the rest is placed again without two groups of one FC a tile only where
// its placement had a tile with two (place_rest's two_a_tile), so with one group an FC (the first
// of kOtherAttentionShapes, 3 layers) each program with a rest is tried once: the last layer's
// (join_scores) in the first placement and in the early one (early_rest, tried as the first lost
// the rest) and, composed, layer 0's boundary (compose); the layers then run without their rests,
// the logits still the int8 path's bit for bit.
int g_rest_checks = 0;
TEST(ChipPathStepD, ARefusedRestIsPlacedAgainOnlyWhereATileHeldTwoGroupsOfOneFc) {
  llm::Int8Options apart = full_attention_options();
  apart.layers_per_run = 1;
  llm::Int8Options composed = apart;
  composed.layers_per_run = 0;
  TinyShape shape = kOtherAttentionShapes[0].shape;
  shape.layers = 3;
  const LoadedModel model = tiny_model(shape, TinyWeights(shape));
  g_rest_checks = 0;
  struct Unset {
    ~Unset() { llm::ChipTransformer::rest_check_for_tests = nullptr; }
  } unset;
  llm::ChipTransformer::rest_check_for_tests =
      [](const std::vector<const compiler::FcLayerRest*>& rests) {
        for (const compiler::FcLayerRest* r : rests)
          for (const compiler::FcPlacement* p : {&r->add_at, &r->norm_at})
            EXPECT_EQ(std::set<int>(p->tiles.begin(), p->tiles.end()).size(), p->tiles.size());
        ++g_rest_checks;
        throw compiler::LayoutRejected("refused for the test");
      };
  std::vector<llm::ChipPathStats> stats;
  for (const llm::Int8Options& o : {apart, composed}) {
    std::vector<llm::ChipPathStats> one;
    const int before = g_rest_checks;
    expect_chips_equal_int8(model.ck, model.tok, 3, {o}, one);
    stats.push_back(one[0]);
    EXPECT_EQ(g_rest_checks - before, o.layers_per_run == 1 ? 2 : 3);
  }
  for (const llm::ChipPathStats& s : stats) {
    EXPECT_EQ(s.rest_layers, 0);
    EXPECT_EQ(s.composed_layers, 0);
    EXPECT_EQ(s.joined_layers, shape.layers);
  }
}

// `generate --weighted-sum value-cache` (WeightedSum::kValueCache): on the simulator, with the
// scores and softmax on the chip too, each layer's weighted sum runs inside its scores' program
// (which streams the new key and v~ column and computes the per-token multipliers on the scalar
// core: one program per layer besides the chains) and the text is the int8 CPU path's with the
// option on both test checkpoints, not the default's; the flag is refused where it does not apply.
void generate_with_the_value_cache(const std::filesystem::path& data) {
  for (const std::string name : {"rand_gqa", "rand15M"}) {
    SCOPED_TRACE(name);
    std::string why;
    const auto path = reference_checkpoint(data, name, why);
    if (!path) GTEST_SKIP() << why;
    std::string cpu_text;
    const nlohmann::json j =
        sim_writes_cpu_text(data, *path, name, "--device cpu --int8 --weighted-sum value-cache",
                            "--device sim --scores-on-chip --weighted-sum value-cache", cpu_text);
    ASSERT_FALSE(j.is_null());
    if (name == "rand_gqa") {
      const CommandResult& plain = story(data, *path, name, "--device cpu --int8");
      ASSERT_EQ(plain.exit_code, 0) << plain.err;
      EXPECT_NE(cpu_text, plain.out);  // the option changes the arithmetic
    }
    const int layers = name == "rand15M" ? 6 : 2;
    // Every layer's v~ fits in tile memory (the chains leave u out: the option does not read it).
    EXPECT_EQ(j.at("chip").at("value_sum_layers_on_chip"), layers);
    // Each layer's sum inside its scores' program: the chain and that program per layer.
    EXPECT_EQ(j.at("chip").at("attention_layers_on_chip"), layers);
    // wo after the sum where tile memory still holds it: every layer's (rand15M's since its dim-K
    // FCs hold K = 288 weights, not 320), nothing on the host.
    EXPECT_EQ(j.at("chip").at("wo_layers_on_chip"), layers);
    EXPECT_EQ(j.at("chip").at("matmuls_on_host"), 0);
    EXPECT_EQ(j.at("chip").at("programs_per_token"), 2 * layers + 1);
  }
  std::string why;
  const auto path = reference_checkpoint(data, "rand_gqa", why);
  if (!path) GTEST_SKIP() << why;
  expect_option_refused(data, *path, "--weighted-sum value-cache");
  const CommandResult unknown =
      run_cli(generate_args(data, *path, "-n 4 --int8 --weighted-sum per-head"));
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("--weighted-sum must be scalar-core or value-cache"),
            std::string::npos)
      << unknown.err;
}

// `generate --key-column-write` (Int8Options::chip_key_write) with the scores on the chip: the
// int8 CPU path's text on both test checkpoints, with the weighted sum joined to the scores, with
// RoPE's sums too (every layer's q~ and key sums in the scores' programs, their weights one copy
// per tile) and on rand_gqa with the softmax alone; every layer's key written by the chip, and
// fewer bytes to the stick than the same flags streaming the key's groups (the same programs per
// token and text otherwise); one program per layer and 64-position group, with the column and
// with the key's groups streamed, rand_gqa's 72 tokens (past its first group) the CPU's text too;
// with RoPE, q's products kept on the tiles in every layer; refused without --scores-on-chip.
void generate_with_the_key_column_written_by_the_chip(const std::filesystem::path& data) {
  std::string why;
  for (const std::string name : {"rand_gqa", "rand15M"}) {
    SCOPED_TRACE(name);
    const auto checkpoint = reference_checkpoint(data, name, why);
    if (!checkpoint) GTEST_SKIP() << why;
    const int layers = name == "rand15M" ? 6 : 2;
    for (const std::string flags :
         {" --weighted-sum value-cache", "", " --weighted-sum value-cache --chip-rope"}) {
      SCOPED_TRACE(flags);
      if (name == "rand15M" && flags.empty()) continue;  // test time
#ifdef TINYCORAL_ASAN
      // Sanitized: rand15M's value cache alone takes the paths of rand_gqa's and of its own
      // flags with --chip-rope below (and generate_with_the_value_cache's run).
      if (name == "rand15M" && flags == " --weighted-sum value-cache") continue;
#endif
      const std::string sim = "--device sim --scores-on-chip" + flags;
      std::string text;
      const nlohmann::json j =
          sim_writes_cpu_text(data, *checkpoint, name, "--device cpu --int8" + flags,
                              sim + " --key-column-write", text);
      ASSERT_FALSE(j.is_null());
      EXPECT_EQ(j.at("chip").at("key_column_write_layers_on_chip"), layers);
      // One program per layer and 64-position group, all made before the first token (each run
      // rewrites its group's to its position), not one per position.
      const int groups = name == "rand15M" ? 256 / 64 : 128 / 64;  // seq_len / 64
      EXPECT_EQ(j.at("chip").at("key_programs"), layers * groups);
      if (flags.find("--chip-rope") != std::string::npos) {
        // q~'s sum in the scores' program, and the key's beside it (the program then computes
        // the key it writes; the host sends only its products), in every layer: the sums'
        // groups share one copy of their weights per tile, so rand15M's tile memory holds all
        // six layers' beside the keys, v~ and two wo (with a copy per group it held 4 q~ sums
        // and no key sum).
        EXPECT_EQ(j.at("chip").at("rope_sum_layers_on_chip"), layers);
        EXPECT_EQ(j.at("chip").at("key_sum_layers_on_chip"), layers);
        // q's products stay on the tiles in every layer (their sum groups on the tiles that
        // compute them): against their round trip through the host (--rope-products-to-host),
        // the same text and runs, fewer bytes from the stick and less modeled time.
        EXPECT_EQ(j.at("chip").at("rope_kept_layers_on_chip"), layers);
        const CommandResult& sent = story(
            data, *checkpoint, name, sim + " --key-column-write --rope-products-to-host --json");
        ASSERT_EQ(sent.exit_code, 0) << sent.err;
        const nlohmann::json h = nlohmann::json::parse(sent.out);
        EXPECT_EQ(h.at("text"), j.at("text"));
        EXPECT_EQ(h.at("chip").at("rope_kept_layers_on_chip"), 0);
        const nlohmann::json &kept = j.at("chip").at("modeled"), &back = h.at("chip").at("modeled");
        EXPECT_EQ(kept.at("runs_per_token"), back.at("runs_per_token"));
        EXPECT_LT(kept.at("bytes_from_device_per_token").get<double>(),
                  back.at("bytes_from_device_per_token").get<double>());
        EXPECT_LT(kept.at("stick_ms_per_token").get<double>(),
                  back.at("stick_ms_per_token").get<double>());
      } else {
        EXPECT_EQ(j.at("chip").at("key_sum_layers_on_chip"), 0);
      }
      const CommandResult& streamed = story(data, *checkpoint, name, sim + " --json");
      ASSERT_EQ(streamed.exit_code, 0) << streamed.err;
      const nlohmann::json k = nlohmann::json::parse(streamed.out);
      EXPECT_EQ(k.at("chip").at("key_column_write_layers_on_chip"), 0);
      // The key's groups streamed whole: the same text, and one program per layer and group too
      // (the value cache's v~ row rewritten as with the column, not one per 4 positions).
      EXPECT_EQ(k.at("text"), j.at("text"));
      EXPECT_EQ(k.at("chip").at("key_programs"), layers * groups);
      EXPECT_EQ(j.at("chip").at("programs_per_token"), k.at("chip").at("programs_per_token"));
      EXPECT_LT(j.at("chip").at("modeled").at("to_device_ms_per_token").get<double>(),
                k.at("chip").at("modeled").at("to_device_ms_per_token").get<double>());
#ifndef TINYCORAL_ASAN  // (test time; the rewritten programs' bytes: ffn_chain_rope_softmax_test)
      if (name == "rand_gqa") {  // past the first group: its second program rewritten
        const std::string longer =
            generate_args(data, *checkpoint, "-n 72 -t 0.8 -s 5 --calibration 8");
        const CommandResult cpu = run_cli(longer + " --device cpu --int8" + flags);
        ASSERT_EQ(cpu.exit_code, 0) << cpu.err;
        // The column written by the chip, and the key's groups streamed.
        for (const std::string key : {" --key-column-write", ""}) {
          SCOPED_TRACE(key);
          const CommandResult chip = run_cli(longer + " " + sim + key + " --json");
          ASSERT_EQ(chip.exit_code, 0) << chip.err;
          const nlohmann::json l = nlohmann::json::parse(chip.out);
          EXPECT_EQ(l.at("text").get<std::string>() + "\n", cpu.out);
          EXPECT_GT(l.at("tokens").size(), 64u + 1u);  // (the BOS first)
          EXPECT_EQ(l.at("chip").at("key_programs"), layers * groups);
        }
      }
#endif
    }
  }
  const auto path = reference_checkpoint(data, "rand_gqa", why);
  if (!path) GTEST_SKIP() << why;
  const CommandResult bad =
      run_cli(generate_args(data, *path, "-n 4 --device sim --key-column-write"));
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--key-column-write needs --scores-on-chip"), std::string::npos)
      << bad.err;
  const CommandResult alone =
      run_cli(generate_args(data, *path, "-n 4 --device sim --chip-rope --rope-products-to-host"));
  EXPECT_EQ(alone.exit_code, 2);
  EXPECT_NE(alone.err.find("--rope-products-to-host needs --chip-rope and --scores-on-chip"),
            std::string::npos)
      << alone.err;
}

// `generate --chip-rope` (Int8Options::chip_rope: RoPE and r on the chain's int8 q and k in the
// chip's elementwise ops): the chip path writes the int8 CPU path's text with it, alone and with
// the scores, softmax and weighted sum on the chip, on both test checkpoints, where the programs
// computing q and k compute RoPE's two products too (rope_layers_on_chip: every layer on
// rand_gqa, all but one on rand15M, whose one chain has no output rows left for them by default;
// their bytes replace the host's, so a wrong byte changes q~ or the key), and with the scores on
// the chip q~'s sum runs in the scores' program (rope_sum_layers_on_chip); a text other than
// without it; refused where there is no int8 arithmetic.
void generate_with_rope_in_the_chips_ops(const std::filesystem::path& data) {
  std::string why;
  for (const std::string name : {"rand_gqa", "rand15M"}) {
    SCOPED_TRACE(name);
    const auto checkpoint = reference_checkpoint(data, name, why);
    if (!checkpoint) GTEST_SKIP() << why;
    // (Both --scores-on-chip and the value cache on rand_gqa: below.)
    for (const std::string flags : {"", " --scores-on-chip", " --weighted-sum value-cache"}) {
      SCOPED_TRACE(flags);
      if (name == "rand15M" && flags.find("--scores-on-chip") != std::string::npos) continue;
#ifdef TINYCORAL_ASAN
      // Sanitized: rand15M's RoPE products with the value cache take rand_gqa's paths (and
      // generate_with_the_key_column_written_by_the_chip's rand15M with --chip-rope).
      if (name == "rand15M" && !flags.empty()) continue;
#endif
      std::string text;
      const std::string cpu_flags =
          flags.find("value-cache") != std::string::npos ? " --weighted-sum value-cache" : "";
      const nlohmann::json j = sim_writes_cpu_text(data, *checkpoint, name,
                                                   "--device cpu --int8 --chip-rope" + cpu_flags,
                                                   "--device sim --chip-rope" + flags, text);
      ASSERT_FALSE(j.is_null());
      const int layers = j.at("chip").at("rope_layers_on_chip");
      EXPECT_GE(layers, name == "rand_gqa" ? 2 : 5);
      // With the scores' program, q~'s RoPE sum runs in it (the host sends q's products).
      EXPECT_EQ(j.at("chip").at("rope_sum_layers_on_chip"),
                flags.find("--scores-on-chip") != std::string::npos ? 2 : 0);
    }
  }
  const auto path = reference_checkpoint(data, "rand_gqa", why);
  if (!path) GTEST_SKIP() << why;
  std::string cpu_text;
  const nlohmann::json j = sim_writes_cpu_text(
      data, *path, "rand_gqa", "--device cpu --int8 --chip-rope --weighted-sum value-cache",
      "--device sim --scores-on-chip --chip-rope --weighted-sum value-cache", cpu_text);
  ASSERT_FALSE(j.is_null());
  EXPECT_EQ(j.at("chip").at("attention_layers_on_chip"), 2);
  EXPECT_EQ(j.at("chip").at("rope_layers_on_chip"), 2);
  EXPECT_EQ(j.at("chip").at("rope_sum_layers_on_chip"), 2);
  const CommandResult& plain =
      story(data, *path, "rand_gqa", "--device cpu --int8 --weighted-sum value-cache");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_NE(cpu_text, plain.out);  // the option changes the arithmetic
  expect_option_refused(data, *path, "--chip-rope");
}

// The four `generate` checks above in one test: they read many of the same runs (the int8 CPU
// path's story with the value cache or with RoPE's products, the simulator's with the scores on the
// chip), each made once here by story(): 11 runs fewer (of 29) under the sanitizers.
TEST(ChipPathStepD, GenerateWithAttentionOnTheChipWritesTheInt8Text) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  {
    SCOPED_TRACE("scores on the chip");
    generate_with_scores_on_the_chip(data);
  }
  {
    SCOPED_TRACE("the value cache");
    generate_with_the_value_cache(data);
  }
  {
    SCOPED_TRACE("the key column written by the chip");
    generate_with_the_key_column_written_by_the_chip(data);
  }
  {
    SCOPED_TRACE("RoPE in the chip's ops");
    generate_with_rope_in_the_chips_ops(data);
  }
}

// The default (the fused layers' arithmetic, step c's programs): the simulator writes the int8 CPU
// path's text (rand_gqa: 2 layers, so 3 programs per token) and reports the modeled speed.
TEST(ChipPathStepC, GenerateOnTheSimulatorWritesTheInt8TextAndModeledSpeed) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  std::string why;
  const auto path = reference_checkpoint(data, "rand_gqa", why);
  if (!path) GTEST_SKIP() << why;
  const std::string args =
      generate_args(data, *path, "-n 20 -t 0.8 -s 5 -i 'Lily' --calibration 8");
  const CommandResult cpu = run_cli(args + " --device cpu --int8");
  const CommandResult sim = run_cli(args + " --device sim");
  ASSERT_EQ(cpu.exit_code, 0) << cpu.err;
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  EXPECT_EQ(sim.out, cpu.out);
  EXPECT_GT(sim.out.size(), 10u);
  EXPECT_NE(sim.err.find("14 layer matmuls on the chip as 3 programs per token"), std::string::npos)
      << sim.err;
  EXPECT_NE(sim.err.find("modeled stick: "), std::string::npos) << sim.err;
  const CommandResult json = run_cli(args + " --device sim --json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const auto j = nlohmann::json::parse(json.out);
  EXPECT_EQ(j.at("device"), "sim");
  EXPECT_EQ(j.at("arithmetic"), "int8");
  EXPECT_EQ(j.at("text").get<std::string>() + "\n", cpu.out);
  // Each tile's fill: within the capacity it reports, the fullest one's bytes, and (only the
  // programs' parameters in tile memory here) all of them the resident parameters.
  const auto& chip = j.at("chip");
  const std::vector<int> units = chip.at("tile_units").get<std::vector<int>>();
  ASSERT_EQ(units.size(), size_t(llm::kPlanTiles));
  int64_t sum = 0;
  for (const int u : units) {
    EXPECT_LE(u, chip.at("tile_unit_capacity").get<int>());
    sum += u;
  }
  EXPECT_EQ(int64_t{*std::max_element(units.begin(), units.end())} * 64,
            chip.at("fullest_tile_parameter_bytes").get<int64_t>());
  EXPECT_EQ(sum * 64, chip.at("resident_parameter_bytes").get<int64_t>());
  const auto& m = chip.at("modeled");
  const double stick_ms = m.at("stick_ms_per_token").get<double>();
  EXPECT_GT(stick_ms, 0);
  EXPECT_DOUBLE_EQ(stick_ms, m.at("compute_ms_per_token").get<double>() +
                                 m.at("to_device_ms_per_token").get<double>() +
                                 m.at("from_device_ms_per_token").get<double>() +
                                 m.at("per_run_ms_per_token").get<double>());
  EXPECT_NEAR(m.at("stick_tokens_per_second").get<double>(), 1e3 / stick_ms, 1e-6);
}

// RMSNorm's scale from the bytes q, k and v read (Int8Options::chip_rms, --chip-rms): past layer 0
// each chain computes r of its residual add's bytes on the scalar core and returns it (the host
// has no copy of those bytes), so the chip path gives the int8 path's logits bit for bit on
// rand_gqa only if the chip's r is the int8 path's, in the default arithmetic and with attention
// on the chip (RoPE's sums with r's multipliers in the scores' program, the key written by the
// chip, the value cache's v~); the CLI writes the int8 text with the flag, another text than
// without it, and refuses it where there is no fused int8 arithmetic.
TEST(ChipPathStepD, RmsScaleFromTheBytesGivesTheInt8PathsLogitsBitForBit) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  std::string why;
  const auto model = reference_model(data, "rand_gqa", why);
  if (!model) GTEST_SKIP() << why;
  std::vector<llm::ChipPathStats> stats;
  expect_chips_equal_int8(
      model->ck, model->tok, 12,
      {{.chip_rms = true},
       {.chip_scores = true,
        .chip_key_write = true,
        .weighted_sum = llm::WeightedSum::kValueCache,
        .chip_rope = true,
        .chip_rms = true},
       {.chip_scores = true, .chip_rope = true, .chip_rms = true},
       {.chip_scores = true, .chip_key_write = true, .chip_rope = true, .chip_rms = true},
       {.chip_scores = true,
        .chip_key_write = true,
        .chip_rope = true,
        .chip_rms = true,
        .join_scores = false}},
      stats);
  const int layers = model->ck.config.n_layers;
  EXPECT_EQ(stats[0].chained_layers, layers - 1);
  EXPECT_EQ(stats[0].rms_layers, layers - 1);
  EXPECT_EQ(stats[0].rope_mult_layers, 0);
  EXPECT_EQ(stats[1].rms_layers, layers - 1);
  EXPECT_EQ(stats[1].rope_sum_layers, layers);
  EXPECT_EQ(stats[1].value_sum_layers, layers);
  // Every RoPE sum's multipliers made by its program from r (the softmax's program, with the key
  // streamed or written by the chip from the key's sum, and the joined one).
  for (size_t i = 1; i < stats.size(); ++i) {
    EXPECT_EQ(stats[i].rope_sum_layers, layers) << i;
    EXPECT_EQ(stats[i].rope_mult_layers, layers) << i;
  }
  EXPECT_EQ(stats[3].key_sum_layers, layers);
  // With the key's sum and column write too, the program before each layer's scores runs them
  // (q's products kept, r from the chain or from the host's bytes at layer 0, the key's products
  // moved on the chip): layer 0's program, one chain per later layer and the last FFN, L + 1 runs
  // a token (expect_chips_equal_int8 counts the runs); without the key's sum none is joined.
  EXPECT_EQ(stats[3].joined_layers, layers);
  EXPECT_EQ(stats[3].programs + stats[3].scores_layers - stats[3].softmax_layers, layers + 1);
  EXPECT_EQ(stats[2].joined_layers, 0);
  EXPECT_EQ(stats[2].programs + stats[2].scores_layers - stats[2].softmax_layers, 2 * layers + 1);
  // The same programs apart (join_scores off): the same logits (above), L runs more a token and
  // more modeled stick time; the joined runs send the count, not the scores' row.
  EXPECT_EQ(stats[4].joined_layers, 0);
  EXPECT_EQ(stats[4].runs - stats[3].runs, layers * stats[3].runs / (layers + 1));
  EXPECT_LT(stats[3].modeled.total_ms_high(), stats[4].modeled.total_ms_high());
  EXPECT_LT(stats[3].scores_row_bytes, stats[4].scores_row_bytes);
  const auto path = reference_checkpoint(data, "rand_gqa", why);
  ASSERT_TRUE(path) << why;
  std::string cpu_text;
  const nlohmann::json j =
      sim_writes_cpu_text(data, *path, "rand_gqa", "--device cpu --int8 --chip-rms",
                          "--device sim --chip-rms", cpu_text);
  ASSERT_FALSE(j.is_null());
  EXPECT_EQ(j.at("chip").at("rms_layers_on_chip").get<int>(), layers - 1);
  const CommandResult& plain = story(data, *path, "rand_gqa", "--device cpu --int8");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_NE(cpu_text, plain.out);  // the option changes the arithmetic
  // With the RoPE sums and the key's on the chip, their multipliers made from r in every layer.
  const nlohmann::json sums = sim_writes_cpu_text(
      data, *path, "rand_gqa", "--device cpu --int8 --chip-rope --chip-rms",
      "--device sim --scores-on-chip --key-column-write --chip-rope --chip-rms", cpu_text);
  ASSERT_FALSE(sums.is_null());
  EXPECT_EQ(sums.at("chip").at("rope_multiplier_layers_on_chip").get<int>(), layers);
  expect_option_refused(data, *path, "--chip-rms");
}

// `generate --device sim --scores-on-chip --chip-rope --chip-rms --key-column-write` joins each
// layer's scores' program to the program before it (one run for both): on both test checkpoints the
// int8 CPU path's text with the same arithmetic, 2 L + 1 runs a token less one per joined layer
// (every layer on rand_gqa: L + 1). One joined program per layer and 64-position group, all made
// before the first token (each run rewrites its group's program to its position's key column):
// rand_gqa's 72 tokens, past its first group, give the CPU's text too.
TEST(ChipPathStepD, GenerateWithTheScoresJoinedToTheChainsWritesTheInt8Text) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  for (const std::string name : {"rand_gqa", "rand15M"}) {
    SCOPED_TRACE(name);
    std::string why;
    const auto path = reference_checkpoint(data, name, why);
    if (!path) GTEST_SKIP() << why;
    const int layers = name == "rand15M" ? 6 : 2;
    std::string cpu_text;
    const std::string sim = "--device sim --scores-on-chip --chip-rope --chip-rms";
    const nlohmann::json j =
        sim_writes_cpu_text(data, *path, name, "--device cpu --int8 --chip-rope --chip-rms",
                            sim + " --key-column-write", cpu_text);
    ASSERT_FALSE(j.is_null());
    // Every layer: a chain whose output rows u's groups filled places them again around its RoPE
    // products (rand15M's layer 1 read the host's row before), so every chain keeps q's products.
    const int joined = layers;
    EXPECT_EQ(j.at("chip").at("rope_layers_on_chip"), layers);
    EXPECT_EQ(j.at("chip").at("joined_layers_on_chip"), joined);
    EXPECT_EQ(j.at("chip").at("programs_per_token"), 2 * layers + 1 - joined);
    EXPECT_EQ(j.at("chip").at("modeled").at("runs_per_token"), 2 * layers + 1 - joined);
    const int groups = name == "rand15M" ? 256 / 64 : 128 / 64;  // seq_len / 64
    EXPECT_EQ(j.at("chip").at("joined_programs"), joined * groups);
#ifndef TINYCORAL_ASAN  // (test time; the rewritten programs' bytes: ffn_chain_rope_softmax_test)
    if (name == "rand_gqa") {
      const std::string longer = generate_args(data, *path, "-n 72 -t 0.8 -s 5 --calibration 8");
      const CommandResult cpu = run_cli(longer + " --device cpu --int8 --chip-rope --chip-rms");
      const CommandResult chip = run_cli(longer + " " + sim + " --key-column-write --json");
      ASSERT_EQ(cpu.exit_code, 0) << cpu.err;
      ASSERT_EQ(chip.exit_code, 0) << chip.err;
      const nlohmann::json l = nlohmann::json::parse(chip.out);
      EXPECT_EQ(l.at("text").get<std::string>() + "\n", cpu.out);
      EXPECT_GT(l.at("tokens").size(), 64u + 1u);  // (the BOS first)
      EXPECT_EQ(l.at("chip").at("joined_programs"), joined * groups);
    }
#endif
    // With the value cache and the residual stream in int8 (--weighted-sum value-cache
    // --chip-residual) each joined program also writes the program before's v~ into the cache and
    // runs the weighted sum (and wo where it fits): one run a layer and the last FFN's, and the
    // int8 path's text over 80 positions of a prompted story (past a 64-position group, where the
    // joined program and the cache rows it writes change). (Not sanitized, as the 72 tokens above:
    // test time; the tiny model's recovery test and the residual tests' stories run there.)
#ifndef TINYCORAL_ASAN
    const std::string values = " --chip-rope --chip-rms --weighted-sum value-cache --chip-residual";
    const std::string story80 =
        generate_args(data, *path, "-n 80 -t 0.8 -s 5 -i Lily --calibration 8");
    const CommandResult cpu = run_cli(story80 + " --device cpu --int8" + values);
    const CommandResult chip =
        run_cli(story80 + " --device sim --scores-on-chip --key-column-write" + values + " --json");
    ASSERT_EQ(cpu.exit_code, 0) << cpu.err;
    ASSERT_EQ(chip.exit_code, 0) << chip.err;
    const nlohmann::json v = nlohmann::json::parse(chip.out);
    EXPECT_EQ(v.at("text").get<std::string>() + "\n", cpu.out);
    EXPECT_GT(v.at("tokens").size(), 64u + 1u);
    EXPECT_EQ(v.at("chip").at("joined_layers_on_chip"), layers);
    EXPECT_EQ(v.at("chip").at("value_sum_layers_on_chip"), layers);
    EXPECT_GT(v.at("chip").at("wo_resident_bytes").get<int64_t>(), 0);  // (wo after the sums)
    // The last layer's rest and FFN in its joined program, and every other layer's program
    // behind the rest before it (D.2, D.3): one run a token on both checkpoints. On rand15M the
    // rests find room where every wo reads its heads side by side (L1) and the rests share their
    // weight copies (L4/L5).
    const int composed = v.at("chip").at("layers_composed").get<int>();
    EXPECT_EQ(composed, layers - 1);
    EXPECT_EQ(v.at("chip").at("layer_rest_on_chip"), 1);
    EXPECT_EQ(v.at("chip").at("rope_kept_layers_on_chip"), layers);
    EXPECT_EQ(v.at("chip").at("programs_per_token"), layers - composed);
    EXPECT_EQ(v.at("chip").at("modeled").at("runs_per_token"), layers - composed);
#endif
  }
}

// The residual stream in int8 (Int8Options::chip_residual) on the chip path: the programs computing
// q, k and v (layer 0's, with the host's r in a block after its input, and each chain, with its own
// r) return v~ from wv's output stage in v's place, which the host takes for its value cache
// instead of computing it, and the adds and the FFN's RMSNorm are the int8 path's; so on rand_gqa
// the logits are the int8 path's bit for bit, with the value cache's programs apart and with the
// scores, RoPE's sums and the key's column on the chip too (then every layer's v~ write and sum
// joined to the program before: the recovery of that is TheJoinedRunIsRunAgainAfterARecovery's),
// and with join_layers the last layer's rest (attention add, r_ffn, the FFN's input norm) and its
// FFN inside its joined program too: L runs a token, the FFN's y from that run; and with
// layers_per_run 0 layer 1's joined program behind layer 0's rest in layer 0's run (one run a
// token, layer 1's outputs taken from it).
TEST(ChipPathStepD, ValueTildeFromTheChipGivesTheInt8PathsLogitsBitForBit) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  std::string why;
  const auto model = reference_model(data, "rand_gqa", why);
  if (!model) GTEST_SKIP() << why;
  const llm::Int8Options residual{.weighted_sum = llm::WeightedSum::kValueCache,
                                  .chip_rope = true,
                                  .chip_rms = true,
                                  .chip_residual = true};
  llm::Int8Options on_chip = residual;
  on_chip.chip_scores = on_chip.chip_key_write = true;
  on_chip.join_layers = false;
  llm::Int8Options rest = on_chip;
  rest.join_layers = true;
  rest.layers_per_run = 1;
  llm::Int8Options composed = rest;
  composed.layers_per_run = 0;
  std::vector<llm::ChipPathStats> stats;
  expect_chips_equal_int8(model->ck, model->tok, 12, {residual, on_chip, rest, composed}, stats);
  const int layers = model->ck.config.n_layers;
  for (const llm::ChipPathStats& s : stats) {
    EXPECT_EQ(s.value_tilde_layers, layers);
    EXPECT_EQ(s.value_sum_layers, layers);
  }
  EXPECT_EQ(stats[0].joined_layers, 0);
  EXPECT_EQ(stats[1].attention_layers, layers);
  EXPECT_EQ(stats[1].key_sum_layers, layers);
  // With the scores' flags every layer's write of v~ and its sum join the program before: one
  // run a layer, and one for the last FFN.
  EXPECT_EQ(stats[1].joined_layers, layers);
  EXPECT_EQ(stats[1].rest_layers, 0);
  EXPECT_EQ(stats[1].programs, layers + 1);
  // With join_layers the last layer's rest and FFN run inside its joined program too (the FFN's
  // y the run's last output): one run a layer (expect_chips_equal_int8 counts the runs).
  EXPECT_EQ(stats[2].joined_layers, layers);
  EXPECT_EQ(stats[2].rest_layers, 1);
  EXPECT_EQ(stats[2].composed_layers, 0);
  EXPECT_EQ(stats[2].programs, layers);
  // D.2: layer 1's joined program behind layer 0's rest, in layer 0's run: one run a token.
  ASSERT_EQ(layers, 2);
  EXPECT_EQ(stats[3].rest_layers, 1);
  EXPECT_EQ(stats[3].composed_layers, 1);
  EXPECT_EQ(stats[3].programs, 1);
}

// rand15M with the value cache joined (every layer's v~ written into the cache and summed by the
// program before its scores, wo after the sum where tile memory holds it): every logit of a greedy
// and a sampled story is the int8 path's bit for bit (expect_chips_equal_int8 counts the runs).
// Every layer's wo reads its heads' bytes side by side (plan_r15 L1): 5 groups of 8 + 6 x 48
// units, 96 less than each head at its 64-byte place. The last layer's rest and FFN run inside its
// joined program (placed first, ChipTransformer::early_rest, where the room after the sums did not
// hold them), and every layer still joins and keeps q's products: 6 runs a token with a run a
// layer; composed, every boundary's rest fits too (L4/L5: the rests share their weight copies), so
// a token takes one run. Without the join layers option it runs apart: 7 runs.
TEST(ChipPathStepD, TheValueCacheJoinedOnRand15MGivesTheInt8PathsLogitsBitForBit) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  std::string why;
  const auto model = reference_model(data, "rand15M", why);
  if (!model) GTEST_SKIP() << why;
#ifdef TINYCORAL_ASAN
  constexpr int kSteps = 3;  // (test time)
#else
  constexpr int kSteps = 6;
#endif
  const llm::Int8Options options = full_attention_options();
  llm::Int8Options apart = options, a_run_a_layer = options;
  apart.join_layers = false;
  a_run_a_layer.layers_per_run = 1;
  std::vector<llm::ChipPathStats> stats;
  expect_chips_equal_int8(model->ck, model->tok, kSteps, {options, apart, a_run_a_layer}, stats);
  const int layers = model->ck.config.n_layers;
  for (const llm::ChipPathStats& s : stats) {
    EXPECT_EQ(s.value_tilde_layers, layers);
    EXPECT_EQ(s.value_sum_layers, layers);
    EXPECT_EQ(s.joined_layers, layers);
    EXPECT_EQ(s.rope_kept_layers, layers);
    int64_t units = 0;
    for (const int u : s.tile_units) {
      EXPECT_LE(u, compiler::kFcParamUnits);
      units += u;
    }
    // The parameters and q's kept products' rows (one on each tile that computes some layer's
    // q with them): nothing else is resident.
    EXPECT_GT(s.rope_kept_rows, 0);
    EXPECT_LE(s.rope_kept_rows, llm::kPlanTiles);
    EXPECT_EQ(units * 64, s.resident_bytes + int64_t{s.rope_kept_rows} * 256);
    const llm::Config& c = model->ck.config;
    EXPECT_EQ(s.wo_resident_bytes,
              int64_t{64} * s.wo_layers * ((c.dim + 63) / 64) *
                  compiler::fc_units_per_tile(c.n_heads * (c.dim / c.n_heads), false));
  }
  EXPECT_EQ(stats[0].rest_layers, 1);
  // The room the dim-K FCs' K = 288 (not 320) and the keys at K = head_size leave holds every
  // layer's wo, joined and apart.
  EXPECT_EQ(stats[0].wo_layers, layers);
  EXPECT_GT(stats[0].rest_shared_groups, 0);
  EXPECT_EQ(stats[1].rest_layers, 0);
  EXPECT_EQ(stats[1].wo_layers, layers);
  EXPECT_EQ(stats[1].programs, layers + 1);
  // A run a layer; composed, the room every wo's side-by-side heads leave (L1: 5 layers x 5
  // groups x 96 units) takes some boundaries' rests (none with the heads at their 64-byte
  // places), a run less a token each.
  EXPECT_EQ(stats[2].rest_layers, 1);
  EXPECT_EQ(stats[2].wo_layers, layers);
  EXPECT_EQ(stats[2].composed_layers, 0);
  EXPECT_EQ(stats[2].programs, layers);
  // Composed: every boundary's rest finds room (L1's wo side by side, L4/L5's shared weight
  // copies), so the whole transformer is one program a token.
  EXPECT_EQ(stats[0].composed_layers, layers - 1);
  EXPECT_EQ(stats[0].programs, 1);
}

// rand15M as above, a run a layer, with a generator (ChipTransformer::rest_check_for_tests) that
// refuses the first placement's rest (so the constructor places the last layer's wo and rest
// first: early_rest) and then every rest that puts two groups of one FC on a tile: early_rest's
// rest, placed with two a tile, is placed again from the tiles as they were with one group a
// tile and runs in the last layer's joined program; the logits are the int8 path's.
int g_rest_tries = 0, g_two_a_tile_refusals = 0;
TEST(ChipPathStepD, TheEarlyRestIsPlacedAgainOneGroupATileWhereTwoAreRefused) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  std::string why;
  const auto model = reference_model(data, "rand15M", why);
  if (!model) GTEST_SKIP() << why;
  llm::Int8Options options = full_attention_options();
  options.layers_per_run = 1;
  g_rest_tries = 0;
  g_two_a_tile_refusals = 0;
  struct Unset {
    ~Unset() { llm::ChipTransformer::rest_check_for_tests = nullptr; }
  } unset;
  llm::ChipTransformer::rest_check_for_tests =
      [](const std::vector<const compiler::FcLayerRest*>& rests) {
        bool two = false;
        for (const compiler::FcLayerRest* r : rests)
          for (const compiler::FcPlacement* p : {&r->add_at, &r->norm_at})
            two = two || std::set<int>(p->tiles.begin(), p->tiles.end()).size() != p->tiles.size();
        // (The first placement's two tries, two a tile and one: refused whatever their layout.)
        if (++g_rest_tries <= 2) throw compiler::LayoutRejected("refused for the test");
        if (two) {
          ++g_two_a_tile_refusals;
          throw compiler::LayoutRejected("two groups of one FC on a tile, refused for the test");
        }
      };
  std::vector<llm::ChipPathStats> stats;
  expect_chips_equal_int8(model->ck, model->tok, 2, {options}, stats);
  // The first placement's two tries, early_rest's with two a tile, then with one.
  EXPECT_EQ(g_rest_tries, 4);
  EXPECT_EQ(g_two_a_tile_refusals, 1);
  EXPECT_EQ(stats[0].rest_layers, 1);
  EXPECT_EQ(stats[0].joined_layers, model->ck.config.n_layers);
  EXPECT_EQ(stats[0].programs, model->ck.config.n_layers);
}

// `generate --device sim --chip-residual` with the value cache, RoPE and RMSNorm on the chip (and
// with the scores, RoPE's sums and the key's column there too) writes the int8 CPU path's text on
// both test checkpoints, every layer's v~ returned by the program computing its v (refused without
// its parts on a device too: Int8Residual.GenerateTakesTheFlagWithItsParts); with the scores' flags
// each layer's write of v~ and its weighted sum join the program before (L + 1 runs a token).
TEST(ChipPathStepD, GenerateWithTheResidualStreamInInt8WritesTheInt8Text) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  const std::string parts = " --chip-rms --chip-rope --weighted-sum value-cache --chip-residual";
  for (const std::string name : {"rand_gqa", "rand15M"}) {
    SCOPED_TRACE(name);
    std::string why;
    const auto path = reference_checkpoint(data, name, why);
    if (!path) GTEST_SKIP() << why;
    const int layers = name == "rand15M" ? 6 : 2;
    for (const std::string flags : {"", " --scores-on-chip --key-column-write"}) {
      SCOPED_TRACE(flags);
#ifdef TINYCORAL_ASAN
      if (name == "rand15M" && flags.empty()) continue;  // (test time: rand_gqa takes that path)
#endif
      std::string cpu_text;
      const nlohmann::json j = sim_writes_cpu_text(data, *path, name, "--device cpu --int8" + parts,
                                                   "--device sim" + parts + flags, cpu_text);
      ASSERT_FALSE(j.is_null());
      EXPECT_EQ(j.at("chip").at("value_tilde_layers_on_chip"), layers);
      EXPECT_EQ(j.at("chip").at("value_sum_layers_on_chip"), layers);
      // With the scores' flags each layer's v~ write and sum join the program before it.
      const int joined = flags.empty() ? 0 : layers;
      EXPECT_EQ(j.at("chip").at("joined_layers_on_chip"), joined);
      // And the last layer's rest and FFN join its program too, and every layer's program runs
      // behind the rest before it: one run a token on both checkpoints.
      const int rest = !flags.empty();
      const int composed = j.at("chip").at("layers_composed").get<int>();
      EXPECT_EQ(composed, rest ? layers - 1 : 0);
      EXPECT_EQ(j.at("chip").at("layer_rest_on_chip"), rest);
      EXPECT_EQ(j.at("chip").at("modeled").at("runs_per_token"),
                2 * layers + 1 - joined - rest - composed);
    }
  }
}

// The chains' r (compiler::FcChainRms: the residual add's bytes into scalar memory, the scalar
// core's routine, r pushed as the program's second output) is the int8 path's chip_rms_scale of the
// same bytes bit for bit, for every layer and position of a greedy and a sampled story on both
// test checkpoints; without chip_rms no chain computes r; with RoPE's sums on the chip, every
// layer's scores' program makes their multipliers from r.
TEST(ChipPathStepD, ChainsReturnTheInt8PathsRmsScaleBitForBit) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  for_each_reference_model(data, [](const std::string& name, const LoadedModel& model) {
    const llm::Checkpoint& ck = model.ck;
    const int layers = ck.config.n_layers, steps = name == "rand15M" ? 5 : 8;
    llm::ThreadPool pool(2);
    const llm::Calibration cal = llm::calibrate(ck, pool, 8);
    const llm::Int8Options options{.chip_rms = true};
    llm::Int8Transformer cpu(ck, pool, cal, options);
    auto tpu = runtime::open_virtual_edgetpu();
    llm::ChipTransformer chip(ck, pool, cal, *tpu, options);
    EXPECT_EQ(chip.stats().rms_layers, layers - 1);
    std::set<uint32_t> distinct;
    int compared = 0;
    for (const auto& [temperature, prompt] :
         std::vector<std::pair<float, std::string>>{{0.0f, "Once upon"}, {1.0f, ""}}) {
      SCOPED_TRACE("temperature " + std::to_string(temperature));
      const auto want = run(cpu, model.tok, temperature, 42, prompt, steps);
      const auto got = run(chip, model.tok, temperature, 42, prompt, steps);
      ASSERT_EQ(got.logits.size(), want.logits.size());
      ASSERT_GE(want.logits.size(), size_t(steps) / 2);
      for (int pos = 0; pos < int(want.logits.size()); ++pos)
        for (int l = 0; l < layers; ++l) {
          const uint32_t r = std::bit_cast<uint32_t>(chip.rms_scale_at(l, pos));
          ASSERT_EQ(r, std::bit_cast<uint32_t>(cpu.rms_scale_at(l, pos)))
              << "layer " << l << ", position " << pos;
          if (l > 0) {
            distinct.insert(r);
            ++compared;
          }
        }
      EXPECT_EQ(got.logits, want.logits);
    }
    // r moves with the layer and the position.
    EXPECT_GT(distinct.size(), size_t(compared) / 2) << compared << " chip r's";
    auto plain = runtime::open_virtual_edgetpu();
    EXPECT_EQ(llm::ChipTransformer(ck, pool, cal, *plain, {}).stats().rms_layers, 0);
    // With RoPE's sums in the scores' programs every layer's program makes their multipliers from
    // the chain's r (none falls back to the host's rows), and a few positions are still the int8
    // path's.
    const llm::Int8Options sums{.chip_scores = true, .chip_rope = true, .chip_rms = true};
    llm::Int8Transformer cpu_sums(ck, pool, cal, sums);
    auto tpu_sums = runtime::open_virtual_edgetpu();
    llm::ChipTransformer chip_sums(ck, pool, cal, *tpu_sums, sums);
    EXPECT_EQ(chip_sums.stats().rope_sum_layers, layers);
    EXPECT_EQ(chip_sums.stats().rope_mult_layers, layers);
    EXPECT_EQ(run(chip_sums, model.tok, 0.0f, 42, "Once", 3).logits,
              run(cpu_sums, model.tok, 0.0f, 42, "Once", 3).logits);
  });
}

}  // namespace
}  // namespace tinycoral::testing
