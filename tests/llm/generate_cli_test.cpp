// `tinycoral generate` end to end on a tiny checkpoint written here: the streamed text is the
// library's, --json reports it, the int8 path is deterministic and thread-count independent, and
// every bad input is one line on stderr with exit code 2.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "llama2c_files.h"
#include "llm/checkpoint.h"
#include "llm/generate.h"
#include "llm/int8_model.h"
#include "llm/kernels.h"

namespace tinycoral::testing {
namespace {

class GenerateCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("tinycoral_generate_cli_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    shape_.vocab = 320;
    shape_.seq_len = 40;
    shape_.shared = false;
    write_bytes(dir_ / "model.bin", tiny_v0(shape_, TinyWeights(shape_)));
    write_bytes(dir_ / "tokenizer.bin", tiny_tokenizer(shape_.vocab));
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string q(const std::string& name) const { return "'" + (dir_ / name).string() + "'"; }
  std::filesystem::path dir_;
  TinyShape shape_;
};

TEST_F(GenerateCli, StreamsTheLibrarysStoryAndReportsSpeed) {
  const llm::Checkpoint ck = llm::load_checkpoint(dir_ / "model.bin");
  const llm::Tokenizer tok = llm::Tokenizer::load(dir_ / "tokenizer.bin", ck.config.vocab_size);
  llm::ThreadPool pool(1);
  llm::Transformer model(ck, pool);
  llm::Sampler sampler(0.9f, 0.8f, 1234);
  std::string text;
  llm::generate(model, tok, sampler, "ab", 30, [&](const std::string& p) { text += p; });
  const CommandResult r = run_cli("generate " + q("model.bin") +
                                  " -n 30 -t 0.9 -p 0.8 -s 1234 -i ab --device cpu --threads 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, text + "\n");
  EXPECT_NE(r.err.find("tok/s on the CPU (float32, 2 threads)"), std::string::npos) << r.err;

  const CommandResult j = run_cli("generate " + q("model.bin") + " -z " + q("tokenizer.bin") +
                                  " -n 30 -t 0.9 -p 0.8 -s 1234 -i ab --json --threads 1");
  ASSERT_EQ(j.exit_code, 0) << j.err;
  const auto json = nlohmann::json::parse(j.out);
  EXPECT_EQ(json.at("text"), text);
  EXPECT_EQ(json.at("prompt_tokens"), 4);  // BOS, " ", "a", "b"
  EXPECT_EQ(json.at("positions"), 30);
  EXPECT_EQ(json.at("arithmetic"), "float32");
}

TEST_F(GenerateCli, Int8PathIsDeterministicAcrossThreadCounts) {
  const std::string args = " -n 40 -t 0 -i abc --device cpu --int8";
  const CommandResult one = run_cli("generate " + q("model.bin") + args + " --threads 1");
  const CommandResult three = run_cli("generate " + q("model.bin") + args + " --threads 3");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_EQ(one.out, three.out);
  EXPECT_GT(one.out.size(), 5u);
  EXPECT_NE(one.err.find("int8 (Edge TPU arithmetic)"), std::string::npos) << one.err;
}

TEST_F(GenerateCli, BadInputsAreOneLineAndExitTwo) {
  auto expect_error = [&](const std::string& args, const std::string& what) {
    const CommandResult r = run_cli("generate " + args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(what), std::string::npos) << args << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  };
  expect_error(q("model.bin") + " --device usb:7", "Coral USB Accelerator");
  expect_error(q("model.bin") + " --device gpu", "unknown device");
  expect_error(q("missing.bin") + " --device cpu", "missing.bin");
  expect_error(q("model.bin") + " --device cpu -i " + std::string(45, 'q'), "seq_len 40");
  std::vector<uint8_t> bytes = tiny_v0(shape_, TinyWeights(shape_));
  bytes.resize(bytes.size() - 4);
  write_bytes(dir_ / "short.bin", bytes);
  write_bytes(dir_ / "tokenizer.bin", tiny_tokenizer(shape_.vocab - 1));
  expect_error(q("short.bin") + " --device cpu", "truncated");
  expect_error(q("model.bin") + " --device cpu", "tokenizer");
}

// With the AVX2 kernels and with the portable ones (which every CPU without AVX2 runs).
TEST(Llama2cGreedy, PrunedClassifierKeepsTheArgmaxAndItsLogitsExact) {
  for (bool avx2 : {true, false}) {
    llm::set_kernels_use_avx2(avx2);
    SCOPED_TRACE(llm::kernels_use_avx2() ? "AVX2" : "portable");
    TinyShape s;
    s.vocab = 700;
    s.shared = false;
    const llm::Checkpoint ck = llm::parse_checkpoint(tiny_v0(s, TinyWeights(s, 11)));
    llm::ThreadPool pool(1);
    llm::Transformer full(ck, pool), pruned(ck, pool);
    pruned.set_argmax_only(true);
    int token = llm::kBos, skipped = 0;
    for (int pos = 0; pos < s.seq_len; ++pos) {
      const std::span<float> fa = full.forward(token, pos);
      const std::vector<float> a(fa.begin(), fa.end());
      const std::span<float> b = pruned.forward(token, pos);
      const int best = llm::argmax(a);
      EXPECT_EQ(llm::argmax(b), best) << pos;
      for (size_t i = 0; i < a.size(); ++i) {
        if (std::isinf(b[i])) {
          EXPECT_LT(a[i], a[size_t(best)]);
          ++skipped;
        } else {
          EXPECT_EQ(a[i], b[i]);
        }
      }
      token = best;
    }
    EXPECT_GT(skipped, s.seq_len * s.vocab / 2) << "the bound prunes little";
  }
  llm::set_kernels_use_avx2(true);
}

// The fused layers' attention sum: the AVX2 kernel's bits are the portable loop's (no fused
// multiply-add), for lengths with and without a tail of 8.
TEST(Llama2cKernels, DequantizedAxpyIsTheSameInBothVersions) {
  std::vector<int8_t> q(304);
  std::vector<float> base(q.size());
  for (size_t j = 0; j < q.size(); ++j) {
    q[j] = static_cast<int8_t>(int(j * 37 % 256) - 128);
    base[j] = std::sin(float(j)) * 3.0f;
  }
  for (int n : {0, 5, 8, 64, 301}) {
    std::vector<float> a = base, b = base;
    llm::set_kernels_use_avx2(true);
    llm::axpy_dequantized(0.3712f, q.data(), -7, 0.0123f, a.data(), n);
    llm::axpy_dequantized(-1.25f, q.data(), 3, 0.5f, a.data(), n);
    llm::set_kernels_use_avx2(false);
    llm::axpy_dequantized(0.3712f, q.data(), -7, 0.0123f, b.data(), n);
    llm::axpy_dequantized(-1.25f, q.data(), 3, 0.5f, b.data(), n);
    for (int j = 0; j < n; ++j) {
      const float want = (base[size_t(j)] + 0.3712f * (float(q[size_t(j)] + 7) * 0.0123f)) +
                         -1.25f * (float(q[size_t(j)] - 3) * 0.5f);
      ASSERT_EQ(b[size_t(j)], want) << j;
      ASSERT_EQ(a[size_t(j)], b[size_t(j)]) << j;
    }
    EXPECT_EQ(a[size_t(n)], base[size_t(n)]);  // nothing past n
  }
  llm::set_kernels_use_avx2(true);
}

TEST(Llama2cInt8, AgreesWithFloatOnATinyModel) {
  // Teacher-forced on the float model's own greedy run: the int8 path's next-token choice agrees
  // most of the time and its distribution stays close (the numbers for real shapes: docs/llm.md).
  TinyShape s;
  s.dim = 32;
  s.hidden = 88;
  s.heads = 4;
  s.kv_heads = 4;
  s.vocab = 300;
  s.seq_len = 48;
  const llm::Checkpoint ck = llm::parse_checkpoint(tiny_v0(s, TinyWeights(s, 3)));
  llm::ThreadPool pool(1);
  const llm::Calibration cal = llm::calibrate(ck, pool, 48);
  llm::Transformer f(ck, pool);
  llm::Int8Transformer q(ck, pool, cal);
  int token = llm::kBos, agree = 0;
  double kl_sum = 0;
  for (int pos = 0; pos < s.seq_len; ++pos) {
    const std::span<float> lf = f.forward(token, pos);
    std::vector<float> pf(lf.begin(), lf.end());
    const std::span<float> lq = q.forward(token, pos);
    std::vector<float> pq(lq.begin(), lq.end());
    const int next = llm::argmax(pf);
    agree += llm::argmax(pq) == next;
    llm::softmax(pf);
    llm::softmax(pq);
    for (size_t i = 0; i < pf.size(); ++i)
      if (pf[i] > 0) kl_sum += pf[i] * std::log(pf[i] / std::max(pq[i], 1e-30f));
    token = next;
  }
  EXPECT_GE(agree, s.seq_len * 3 / 4) << agree << " of " << s.seq_len;
  EXPECT_LT(kl_sum / s.seq_len, 0.05) << kl_sum / s.seq_len;
  // Every quantized weight is in [-127, 127] and the output stage's clamps bracket the int8 range.
  const llm::QuantizedMatmul& m = q.matmul(1, llm::LayerMatmul::kW2);
  EXPECT_EQ(m.rows, s.dim);
  EXPECT_EQ(m.cols, s.hidden);
  for (int8_t v : m.w) EXPECT_GE(v, -127);
  EXPECT_NEAR(m.clamp_lo, -128 - m.out.zero_point, 1e-3);
  EXPECT_NEAR(m.clamp_hi, 127 - m.out.zero_point, 1e-3);
}

}  // namespace
}  // namespace tinycoral::testing
