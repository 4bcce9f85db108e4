// The batch path (issue 14, step e): B sequences in lockstep, each layer matmul computed for all of
// them at once - by the int8 arithmetic on the CPU, and by one batched program per matmul on the
// virtual Edge TPU - must give every sequence the tokens the int8 CPU path gives it alone
// (sequence by sequence, the oracle), for the same prompt with different seeds, different
// prompts, greedy and sampled, and sequences that end at different steps; bad batches get clear
// errors. A tiny model with hidden 2100 puts K > 1024 (w2) on the chip as well, with 64 sequences
// (more rows than its program takes at once).
#include "llm/batch.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "compiler/fc_batch_codegen.h"
#include "llama2c_files.h"
#include "llm/batch_chip.h"
#include "llm/generate.h"
#include "runtime/device_select.h"
#include "support/sanitizers.h"

namespace tinycoral::testing {
namespace {

// Mixed requests: a shared prompt with several seeds, other prompts, greedy and sampled, and
// different lengths (some sequences leave the batch early).
std::vector<llm::BatchRequest> mixed_requests(int count, int steps) {
  const std::vector<std::string> prompts = {"Once upon", "", "Lily", "Once upon a time"};
  std::vector<llm::BatchRequest> out;
  for (int i = 0; i < count; ++i) {
    llm::BatchRequest r;
    r.prompt = i % 3 == 0 ? "Once upon" : prompts[size_t(i) % prompts.size()];
    r.steps = steps - (i % 4) * (steps / 8);
    r.temperature = i % 2 == 0 ? 1.0f : 0.0f;
    r.topp = i % 4 == 1 ? 0.9f : 1.0f;
    r.seed = 100 + uint64_t(i);
    out.push_back(r);
  }
  return out;
}

// The test checkpoints' batches: rand_gqa's sequences and steps, rand15M's steps (4 sequences).
// Sanitized, rand_gqa's 8 of up to 10 steps: the same mixed prompts, greedy and sampled, ending at
// four different steps (the same paths); rand15M's 4 steps (its programs run as on 8).
#ifdef TINYCORAL_ASAN
constexpr int kGqaSequences = 8, kGqaSteps = 10, kBigSteps = 4;
#else
constexpr int kGqaSequences = 16, kGqaSteps = 16, kBigSteps = 8;
#endif

// The oracle: the int8 CPU path, one sequence after another.
std::vector<std::vector<int>> int8_alone(const llm::Checkpoint& ck, const llm::Tokenizer& tok,
                                         const llm::Calibration& cal,
                                         const std::vector<llm::BatchRequest>& requests,
                                         llm::Int8Options options) {
  llm::ThreadPool pool(2);
  std::vector<std::vector<int>> out;
  for (const llm::BatchRequest& r : requests) {
    llm::Int8Transformer model(ck, pool, cal, options);
    llm::Sampler sampler(r.temperature, r.topp, r.seed);
    out.push_back(
        llm::generate(model, tok, sampler, r.prompt, r.steps, [](const std::string&) {}).tokens);
  }
  return out;
}

void expect_same_tokens(const llm::BatchRun& run, const std::vector<std::vector<int>>& want) {
  ASSERT_EQ(run.sequences.size(), want.size());
  int64_t positions = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(run.sequences[i].result.tokens, want[i]) << "sequence " << i;
    EXPECT_FALSE(run.sequences[i].text.empty()) << "sequence " << i;
    positions += run.sequences[i].result.positions;
  }
  EXPECT_EQ(run.positions, positions);
}

// What the chip's batch path leaves to the host, or splits (llm::ChipBatchMatmuls).
struct ChipBatchForm {
  bool values_on_host = false;
  bool ffn_programs = true;
};

// Both batch paths against the oracle on `ck`, the chip's in each of `forms`; `stats` gets the
// chip's figures of each. One calibration, oracle and CPU batch for all of them.
void expect_batches_equal_int8(const llm::Checkpoint& ck, const llm::Tokenizer& tok, int count,
                               int steps, llm::Int8Options options,
                               const std::vector<ChipBatchForm>& forms,
                               std::vector<llm::ChipBatchStats>& stats) {
  stats.assign(forms.size(), {});
  llm::ThreadPool pool(2);
  const llm::Calibration cal = llm::calibrate(ck, pool, 8);
  const std::vector<llm::BatchRequest> requests = mixed_requests(count, steps);
  const std::vector<std::vector<int>> want = int8_alone(ck, tok, cal, requests, options);
  // The requests do differ (else the batch would prove little): at least the prompts' stories.
  EXPECT_GE(std::set<std::vector<int>>(want.begin(), want.end()).size(),
            size_t(std::min(count, 3)));
  {
    SCOPED_TRACE("cpu");
    llm::CpuBatchMatmuls cpu(ck, pool, cal, options);
    expect_same_tokens(llm::generate_batch(ck, tok, cpu, requests), want);
  }
  for (size_t f = 0; f < forms.size(); ++f) {
    SCOPED_TRACE("virtual Edge TPU, form " + std::to_string(f));
    auto tpu = runtime::open_virtual_edgetpu();
    llm::ChipBatchMatmuls chip(ck, pool, cal, *tpu, options, forms[f].values_on_host,
                               forms[f].ffn_programs);
    const llm::BatchRun run = llm::generate_batch(ck, tok, chip, requests);
    expect_same_tokens(run, want);
    EXPECT_EQ(run.steps, steps);  // the longest sequences ran every step in lockstep
    // Each step ran each program once for all rows (none per sequence), or in chunks when the
    // rows exceed what one program takes.
    if (count <= 16) {
      EXPECT_EQ(chip.stats().runs, chip.stats().programs * run.steps);
    } else {
      EXPECT_GT(chip.stats().runs, chip.stats().programs * run.steps);
    }
    EXPECT_GT(chip.stats().modeled.total_ms_high(), 0);
    stats[f] = chip.stats();
  }
}

// The same with the chip's batch path in one form; its figures.
llm::ChipBatchStats expect_batch_equals_int8(const llm::Checkpoint& ck, const llm::Tokenizer& tok,
                                             int count, int steps, llm::Int8Options options) {
  std::vector<llm::ChipBatchStats> stats;
  expect_batches_equal_int8(ck, tok, count, steps, options, {ChipBatchForm{}}, stats);
  return stats.at(0);
}

// The older arithmetic (--unfused-layers): step a's programs over all rows, each layer's FFN one
// batched fused program (w1, w3, the gate on the tiles, w2), or on rand_gqa also split (w1 + w3
// and w2 as programs, the gate on the host).
TEST(BatchPath, BothTestCheckpointsGiveEverySequenceTheInt8PathsTokens) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  for_each_reference_model(data, [](const std::string& name, const LoadedModel& model) {
    const llm::Checkpoint& ck = model.ck;
    const llm::Tokenizer& tok = model.tok;
    const bool big = name == "rand15M";
    // The split FFN's programs are rand_gqa's (larger): not again on rand15M.
    std::vector<ChipBatchForm> forms = {{.ffn_programs = true}};
    if (!big) forms.push_back({.ffn_programs = false});
    std::vector<llm::ChipBatchStats> stats;
    expect_batches_equal_int8(ck, tok, big ? 4 : kGqaSequences, big ? kBigSteps : kGqaSteps,
                              llm::Int8Options{false}, forms, stats);
    for (size_t f = 0; f < forms.size(); ++f) {
      const bool ffn_programs = forms[f].ffn_programs;
      SCOPED_TRACE(ffn_programs ? "FFN one program" : "FFN split");
      const llm::ChipBatchStats& s = stats[f];
      EXPECT_EQ(s.chip_matmuls, 7 * ck.config.n_layers);
      EXPECT_EQ(s.host_matmuls, 0) << s.host_reason;
      EXPECT_EQ(s.ffn_programs, ffn_programs ? ck.config.n_layers : 0);
      // q+k+v, o, the FFN per layer; split: w1+w3 and w2, as in step a.
      EXPECT_EQ(s.programs, (ffn_programs ? 3 : 4) * ck.config.n_layers);
    }
  });
}

// The default arithmetic, the fused layers' (RMSNorm folded into q, k, v, the residual add in
// integers, wo folded into u): the batch gives every sequence the tokens of the int8 path alone. On
// the chip q, k, v are the folded matmuls and wo is not run; u is one program per layer (each head
// reading its slice of v), or one per kv head where that does not fit, or with values_on_host
// computed by the host from v.
TEST(BatchPath, FusedLayersGiveEverySequenceTheInt8PathsTokens) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  for_each_reference_model(data, [](const std::string& name, const LoadedModel& model) {
    const llm::Checkpoint& ck = model.ck;
    const llm::Tokenizer& tok = model.tok;
    const bool big = name == "rand15M";
    const llm::Config& c = ck.config;
    // u on the host: the same programs as rand_gqa's (fewer of them) on rand15M: not again.
    std::vector<ChipBatchForm> forms = {{.values_on_host = false}};
    if (!big) forms.push_back({.values_on_host = true});
    std::vector<llm::ChipBatchStats> stats;
    expect_batches_equal_int8(ck, tok, big ? 4 : kGqaSequences, big ? kBigSteps : kGqaSteps,
                              llm::Int8Options{true}, forms, stats);
    for (size_t f = 0; f < forms.size(); ++f) {
      const bool values_on_host = forms[f].values_on_host;
      SCOPED_TRACE(values_on_host ? "u on the host" : "u on the chip");
      const llm::ChipBatchStats& s = stats[f];
      EXPECT_EQ(s.host_matmuls, 0) << s.host_reason;
      EXPECT_EQ(s.ffn_programs, c.n_layers);
      if (!values_on_host) {
        EXPECT_EQ(s.chip_matmuls, 7 * c.n_layers);  // u counts as wo
        EXPECT_EQ(s.host_values, 0);
        // q+k+v, u (every head reading its slice of v), the FFN.
        EXPECT_EQ(s.programs, 3 * c.n_layers);
      } else {
        EXPECT_EQ(s.chip_matmuls, 6 * c.n_layers);
        EXPECT_EQ(s.host_values, c.n_layers);
        EXPECT_EQ(s.programs, 2 * c.n_layers);  // q+k+v, the FFN
      }
    }
  });
  if (IsSkipped()) return;
  // u on the chip: 8 heads of dim 320: u's 40 groups do not fit one program, so one per kv head
  // (4); head size 14: v's slices are not whole words, so one per kv head (2) as well.
  struct Case {
    TinyShape shape;
    int programs;
    uint32_t seed;
  };
  for (const Case& test : {Case{{320, 256, 1, 8, 4, 300, 16, true}, 2 + 4, 7},
                           Case{{56, 128, 1, 4, 2, 300, 16, true}, 2 + 2, 11}}) {
    SCOPED_TRACE("dim " + std::to_string(test.shape.dim));
    const LoadedModel model = tiny_model(test.shape, TinyWeights(test.shape, test.seed));
    const llm::Checkpoint& ck = model.ck;
    const llm::Tokenizer& tok = model.tok;
    const llm::ChipBatchStats s = expect_batch_equals_int8(ck, tok, 6, 8, llm::Int8Options{true});
    EXPECT_EQ(s.host_matmuls, 0) << s.host_reason;
    EXPECT_EQ(s.programs, test.programs);
  }
}

TEST(BatchPath, KAbove1024RunsOnTheChipToo) {
  TinyShape shape;
  shape.dim = 80;       // K = 80: padded to 128
  shape.hidden = 2100;  // w1/w3: N = 2100, two programs each; w2: K = 2100 on the chip
  shape.heads = 4;
  shape.kv_heads = 2;
  shape.layers = 1;
  shape.vocab = 300;
  shape.seq_len = 32;
  const LoadedModel model = tiny_model(shape, TinyWeights(shape));
  const llm::Checkpoint& ck = model.ck;
  const llm::Tokenizer& tok = model.tok;
  // 64 sequences: more rows than w2's program takes (K = 2112: 62), so it runs in two chunks
  // while all 64 are running; when the shortest sequences end (mixed_requests: a quarter each
  // ending after `steps`, 7/8, 6/8 and 5/8 of it), the rows drop to 48, 32 and 16, one chunk each.
  ASSERT_LT(compiler::fc_batch_max_rows(2112, 1), 64);
#ifdef TINYCORAL_ASAN
  // Sanitized: 8 steps (sequences ending after 8, 7, 6 and 5): the same two chunks while all 64
  // run and the same drops.
  constexpr int kSteps = 8;
#else
  constexpr int kSteps = 16;
#endif
  const llm::ChipBatchStats s =
      expect_batch_equals_int8(ck, tok, 64, kSteps, llm::Int8Options{false});
  // Every step runs the seven programs once, w2 once more while all 64 run (until the shortest
  // sequences' last step, 5/8 of the steps), and no more after the drop: the chunks and the drops.
  const int all_running = kSteps - 3 * (kSteps / 8);
  EXPECT_EQ(s.runs, 7 * kSteps + all_running);
  EXPECT_EQ(s.chip_matmuls, 7);
  EXPECT_EQ(s.host_matmuls, 0) << s.host_reason;
  EXPECT_EQ(s.programs, 7);      // q+k+v, o, w1 and w3 in two programs each, w2
  EXPECT_EQ(s.ffn_programs, 0);  // w1 and w3 together exceed the 32 groups of one program
}

// Eleven layers of 0.85 MB: more than the 8 MiB of tile memory, so the last matmuls stay on the
// host, in the same arithmetic, beside the chip's.
TEST(BatchPath, WeightsPastTileMemoryStayOnTheHostExactly) {
  TinyShape shape;
  shape.dim = 256;
  shape.hidden = 768;
  shape.heads = 4;
  shape.kv_heads = 4;
  shape.layers = 11;
  shape.vocab = 300;
  shape.seq_len = 16;
  const LoadedModel model = tiny_model(shape, TinyWeights(shape));
  const llm::Checkpoint& ck = model.ck;
  const llm::Tokenizer& tok = model.tok;
  // The default arithmetic: u of the last layers stays on the host as well (for room, not by
  // choice: host_values counts only the latter).
#ifdef TINYCORAL_ASAN
  // Sanitized: three sequences of four steps (distinct prompts) take the same host and chip paths.
  const llm::ChipBatchStats s = expect_batch_equals_int8(ck, tok, 3, 4, llm::Int8Options{});
#else
  const llm::ChipBatchStats s = expect_batch_equals_int8(ck, tok, 4, 6, llm::Int8Options{});
#endif
  EXPECT_EQ(s.host_values, 0);
  EXPECT_EQ(s.chip_matmuls + s.host_matmuls, 7 * 11);
  EXPECT_GT(s.chip_matmuls, 7 * 8);
  EXPECT_GT(s.host_matmuls, 0);
  EXPECT_NE(s.host_reason.find("fill the tile memory"), std::string::npos) << s.host_reason;
}

TEST(BatchPath, BadBatchesGetClearErrors) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  std::string why;
  const auto path = reference_checkpoint(data, "rand_gqa", why);
  if (!path) GTEST_SKIP() << why;
  const llm::Checkpoint ck = llm::load_checkpoint(*path);
  const llm::Tokenizer tok =
      llm::Tokenizer::load(llama2c_dir(data) / "tokenizer.bin", ck.config.vocab_size);
  llm::ThreadPool pool(1);
  const llm::Calibration cal = llm::calibrate(ck, pool, 4);
  llm::CpuBatchMatmuls cpu(ck, pool, cal);
  const auto message = [&](const std::vector<llm::BatchRequest>& requests) {
    try {
      llm::generate_batch(ck, tok, cpu, requests);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message({}).find("B = 0"), std::string::npos);
  EXPECT_NE(message(std::vector<llm::BatchRequest>(llm::kMaxBatch + 1)).find("at most 1024"),
            std::string::npos);
  // A matmul that fails mid-batch stops every sequence (none hangs at the barrier) and its error
  // is the batch's.
  struct Failing : llm::CpuBatchMatmuls {
    using CpuBatchMatmuls::CpuBatchMatmuls;
    int calls = 0;
    void matmul_q(int layer, llm::LayerMatmul m, std::span<const int> sequences, const int8_t* xq,
                  int8_t* yq) override {
      if (++calls == 20) fail("the chip stopped");
      CpuBatchMatmuls::matmul_q(layer, m, sequences, xq, yq);
    }
  } failing(ck, pool, cal);
  try {
    llm::generate_batch(ck, tok, failing, mixed_requests(5, 6));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "the chip stopped");
  }
  EXPECT_EQ(failing.calls, 20);
  std::string long_prompt;
  for (int i = 0; i < ck.config.seq_len; ++i) long_prompt += " dog";
  const std::string m = message({{"Once", 4}, {long_prompt, 4}});
  EXPECT_NE(m.find("sequence 1: the prompt is"), std::string::npos) << m;
  EXPECT_NE(m.find("more than seq_len"), std::string::npos) << m;
}

TEST(BatchPath, GenerateBatchOnTheSimulatorWritesEachSeedsInt8Story) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  std::string why;
  const auto path = reference_checkpoint(data, "rand_gqa", why);
  if (!path) GTEST_SKIP() << why;
  const std::string args = generate_args(data, *path, "-n 12 -t 0.8 -i 'Lily' --calibration 8");
  const CommandResult sim = run_cli(args + " -s 5 --batch 3 --device sim --json");
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  const auto j = nlohmann::json::parse(sim.out);
  ASSERT_EQ(j.at("sequences").size(), 3u);
  for (int i = 0; i < 3; ++i) {
    const CommandResult cpu =
        run_cli(args + " -s " + std::to_string(5 + i) + " --device cpu --int8");
    ASSERT_EQ(cpu.exit_code, 0) << cpu.err;
    EXPECT_EQ(j.at("sequences")[size_t(i)].at("text").get<std::string>() + "\n", cpu.out) << i;
    EXPECT_EQ(j.at("sequences")[size_t(i)].at("seed"), 5 + i);
  }
  const auto& m = j.at("chip").at("modeled");
  EXPECT_GT(m.at("stick_tokens_per_second").get<double>(), 0);
  EXPECT_EQ(j.at("positions"), 36);
  const CommandResult text = run_cli(args + " -s 5 --batch 3 --device sim");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.err.find("batch of 3: 36 tokens in 12 steps"), std::string::npos) << text.err;
  EXPECT_NE(text.err.find("modeled stick: "), std::string::npos) << text.err;
  EXPECT_NE(text.err.find("tok/s aggregate"), std::string::npos) << text.err;
  // The older arithmetic in a batch: each seed's --int8 --unfused-layers story.
  const CommandResult unfused =
      run_cli(args + " -s 6 --batch 2 --device sim --unfused-layers --json");
  ASSERT_EQ(unfused.exit_code, 0) << unfused.err;
  const CommandResult unfused_cpu = run_cli(args + " -s 7 --device cpu --int8 --unfused-layers");
  ASSERT_EQ(unfused_cpu.exit_code, 0) << unfused_cpu.err;
  EXPECT_EQ(
      nlohmann::json::parse(unfused.out).at("sequences")[1].at("text").get<std::string>() + "\n",
      unfused_cpu.out);
  // u on the host: the same stories (the same integers), reported as the host's by choice.
  const CommandResult host_u =
      run_cli(args + " -s 5 --batch 3 --device sim --values-on-host --json");
  ASSERT_EQ(host_u.exit_code, 0) << host_u.err;
  const auto hj = nlohmann::json::parse(host_u.out);
  for (size_t i = 0; i < 3; ++i)
    EXPECT_EQ(hj.at("sequences")[i].at("text"), j.at("sequences")[i].at("text")) << i;
  EXPECT_EQ(j.at("chip").at("values_on_host_layers"), 0);
  EXPECT_EQ(hj.at("chip").at("values_on_host_layers"), 2);  // rand_gqa's layers
  const CommandResult no_batch = run_cli(args + " --device sim --values-on-host");
  EXPECT_EQ(no_batch.exit_code, 2);
  EXPECT_NE(no_batch.err.find("--values-on-host needs --batch"), std::string::npos) << no_batch.err;
  const CommandResult zero = run_cli(args + " --batch 0");
  EXPECT_EQ(zero.exit_code, 2);
  EXPECT_NE(zero.err.find("--batch must be at least 1 (got 0)"), std::string::npos) << zero.err;
}

}  // namespace
}  // namespace tinycoral::testing
