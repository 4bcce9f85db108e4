// Sequences in lockstep, their layer matmuls batched (batch.h).
#include "llm/batch.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>

#include "common/error.h"
#include "llm/kernels.h"

namespace tinycoral::llm {

BatchMatmuls::BatchMatmuls(const Checkpoint& ck, ThreadPool& pool, const Calibration& calibration,
                           Int8Options options)
    : pool_(pool), weights_(std::make_shared<const Int8Weights>(ck, calibration, options)) {
  if (options.chip_residual) fail("the batch path has no residual stream in int8");
}

BatchMatmuls::~BatchMatmuls() = default;

void BatchMatmuls::run(int layer, int step, std::span<const BatchRow> rows) {
  const Config& c = weights_->config;
  const size_t n = rows.size();
  size_t in = 0, out = 0;
  if (step == kBatchFfn) {
    in = size_t(c.dim);
    out = size_t(c.dim);
  } else if (step == kBatchValues) {
    in = size_t(c.kv_dim());
    out = size_t(c.n_heads) * size_t(c.dim);
  } else {
    const QuantizedMatmul& q = matmul(layer, LayerMatmul(step));
    in = size_t(q.cols);
    out = size_t(q.rows);
  }
  sequences_.clear();
  xq_.resize(n * in);
  yq_.resize(n * out);
  for (size_t i = 0; i < n; ++i) {
    sequences_.push_back(rows[i].sequence);
    std::copy_n(rows[i].in, in, xq_.data() + i * in);
  }
  if (step == kBatchFfn)
    ffn_q(layer, n);
  else if (step == kBatchValues)
    values_q(layer, sequences_, xq_.data(), yq_.data());
  else
    matmul_q(layer, LayerMatmul(step), sequences_, xq_.data(), yq_.data());
  for (size_t i = 0; i < n; ++i) std::copy_n(yq_.data() + i * out, out, rows[i].out);
}

// w1 and w3, the chip's gate on the int8 values, w2: Int8Transformer::ffn_q for every row.
void BatchMatmuls::ffn_q(int layer, size_t n) {
  if (ffn_whole_q(layer, sequences_, xq_.data(), yq_.data())) return;
  const size_t hidden = size_t(weights_->config.hidden_dim);
  h1_.resize(n * hidden);
  h3_.resize(n * hidden);
  m_.resize(n * hidden);
  matmul_q(layer, LayerMatmul::kW1, sequences_, xq_.data(), h1_.data());
  matmul_q(layer, LayerMatmul::kW3, sequences_, xq_.data(), h3_.data());
  for (size_t i = 0; i < n; ++i)
    gate(weights_->gates[size_t(layer)], h1_.data() + i * hidden, h3_.data() + i * hidden,
         int(hidden), m_.data() + i * hidden);
  matmul_q(layer, LayerMatmul::kW2, sequences_, m_.data(), yq_.data());
}

void BatchMatmuls::values_q(int layer, std::span<const int> sequences, const int8_t* v, int8_t* u) {
  const Config& c = weights_->config;
  const size_t in = size_t(c.kv_dim()), out = size_t(c.n_heads) * size_t(c.dim);
  pool_.parallel_for(int(sequences.size()), 1, [&](int begin, int end) {
    for (int i = begin; i < end; ++i)
      weights_->values_q(layer, v + size_t(i) * in, u + size_t(i) * out);
  });
}

void BatchMatmuls::cpu_matmul_q(int layer, LayerMatmul m, size_t n, const int8_t* xq, int8_t* yq) {
  const QuantizedMatmul& q = matmul(layer, m);
  const size_t cols = size_t(q.cols), outs = size_t(q.rows);
  acc_.resize(n * outs);
  pool_.parallel_for(q.rows, 16, [&](int begin, int end) {
    for (size_t i = 0; i < n; ++i) {
      int32_t* acc = acc_.data() + i * outs;
      matvec_int8_rows(q.w.data(), xq + i * cols, acc, q.cols, begin, end);
      for (int r = begin; r < end; ++r) yq[i * outs + size_t(r)] = requantize_row(q, r, acc[r]);
    }
  });
}

namespace {

// Thrown in a sequence's thread when another part of the batch failed: it only unwinds.
struct BatchStopped {};

// The barrier where the sequences' layer matmuls meet: when every sequence still running has
// arrived, the last one computes the matmul for all of them.
class Lockstep {
 public:
  Lockstep(BatchMatmuls& matmuls, int sequences) : matmuls_(matmuls), active_(sequences) {}

  // `m` is a layer matmul, kBatchFfn or kBatchValues.
  void arrive(int sequence, int layer, int m, const int8_t* in, int8_t* out) {
    std::unique_lock lock(mu_);
    if (error_) throw BatchStopped{};
    arrivals_.push_back({sequence, layer, m, in, out});
    const uint64_t phase = phase_;
    if (int(arrivals_.size()) == active_)
      flush();
    else
      done_.wait(lock, [&] { return phase_ != phase; });
    if (error_) throw BatchStopped{};
  }

  // A sequence is done (or failed): the others no longer wait for it.
  void leave(std::exception_ptr error) {
    std::unique_lock lock(mu_);
    if (error && !error_) fail_all(error);
    --active_;
    if (!error_ && active_ > 0 && int(arrivals_.size()) == active_) flush();
  }

  std::exception_ptr error() const { return error_; }
  int phases() const { return phases_; }

 private:
  struct Arrival {
    int sequence, layer, m;
    const int8_t* in;
    int8_t* out;
  };

  void flush() {
    std::sort(arrivals_.begin(), arrivals_.end(),
              [](const Arrival& a, const Arrival& b) { return a.sequence < b.sequence; });
    rows_.clear();
    for (const Arrival& a : arrivals_) rows_.push_back({a.sequence, a.in, a.out});
    const Arrival& first = arrivals_.front();
    try {
      for (const Arrival& a : arrivals_)
        if (a.layer != first.layer || a.m != first.m)
          fail("the batch's sequences left lockstep (layer ", a.layer, " step ", a.m,
               " beside layer ", first.layer, " step ", first.m, ")");
      matmuls_.run(first.layer, first.m, rows_);
      if (first.layer == 0 && first.m == int(LayerMatmul::kQ)) ++phases_;
    } catch (...) {
      fail_all(std::current_exception());
    }
    arrivals_.clear();
    ++phase_;
    done_.notify_all();
  }

  void fail_all(std::exception_ptr error) {
    error_ = error;
    ++phase_;
    arrivals_.clear();
    done_.notify_all();
  }

  BatchMatmuls& matmuls_;
  std::mutex mu_;
  std::condition_variable done_;
  int active_;
  std::vector<Arrival> arrivals_;
  std::vector<BatchRow> rows_;
  uint64_t phase_ = 0;
  int phases_ = 0;
  std::exception_ptr error_;
};

// One sequence: the int8 path's forward pass with its integer seams sent to the lockstep.
class Member : public Int8Transformer {
 public:
  Member(const Checkpoint& ck, ThreadPool& pool, std::shared_ptr<const Int8Weights> weights,
         Lockstep& lockstep, int sequence)
      : Int8Transformer(ck, pool, std::move(weights)), lockstep_(lockstep), sequence_(sequence) {}

 protected:
  void matmul_q(int layer, LayerMatmul m, const int8_t* xq, int8_t* yq) override {
    lockstep_.arrive(sequence_, layer, int(m), xq, yq);
  }
  void ffn_q(int layer, const int8_t* xq, int8_t* yq) override {
    lockstep_.arrive(sequence_, layer, kBatchFfn, xq, yq);
  }
  void values_q(int layer, const int8_t* v, int8_t* u) override {
    lockstep_.arrive(sequence_, layer, kBatchValues, v, u);
  }

 private:
  Lockstep& lockstep_;
  int sequence_;
};

}  // namespace

BatchRun generate_batch(const Checkpoint& ck, const Tokenizer& tokenizer, BatchMatmuls& matmuls,
                        std::span<const BatchRequest> requests) {
  if (requests.empty()) fail("a batch needs at least one sequence (B = 0)");
  if (requests.size() > size_t(kMaxBatch))
    fail("a batch of ", requests.size(), " sequences: at most ", kMaxBatch, " (one thread each)");
  const int seq_len = ck.config.seq_len;
  // Each sequence owns a float32 KV cache and its activations, allocated up front.
  const Config& c = ck.config;
  const bool fused = matmuls.weights()->options.fused_layers;
  const double state =
      4.0 * (2.0 * c.n_layers * c.seq_len * c.kv_dim() + double(c.n_heads) * c.seq_len +
             c.vocab_size + 6.0 * c.hidden_dim) +
      (fused ? double(c.n_layers) * c.seq_len * (double(c.n_heads) * c.dim + 4.0) : 0.0);
  if (state * double(requests.size()) > kMaxBatchStateBytes)
    fail("a batch of ", requests.size(), " sequences needs ",
         int64_t(state * double(requests.size()) / (1 << 20)),
         " MiB of KV caches and activations (", "at most ", kMaxBatchStateBytes / (1 << 20),
         " MiB)");
  // generate()'s checks, made before any thread starts so that a bad prompt names its sequence.
  for (size_t i = 0; i < requests.size(); ++i) {
    const std::string& prompt = requests[i].prompt;
    if (prompt.size() >= size_t(seq_len) * size_t(tokenizer.max_token_length()))
      fail("sequence ", i, ": the prompt (", prompt.size(), " bytes) cannot fit in seq_len ",
           seq_len, " tokens");
    const size_t tokens = tokenizer.encode(prompt).size();
    if (tokens > size_t(seq_len))
      fail("sequence ", i, ": the prompt is ", tokens, " tokens with BOS, more than seq_len ",
           seq_len);
  }
  const int n = static_cast<int>(requests.size());
  Lockstep lockstep(matmuls, n);
  BatchRun run;
  run.sequences.resize(size_t(n));
  std::vector<std::unique_ptr<ThreadPool>> pools;
  std::vector<std::unique_ptr<Member>> members;
  for (int i = 0; i < n; ++i) {
    pools.push_back(std::make_unique<ThreadPool>(1));
    members.push_back(std::make_unique<Member>(ck, *pools.back(), matmuls.weights(), lockstep, i));
  }
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      std::exception_ptr error;
      try {
        const BatchRequest& r = requests[size_t(i)];
        Sampler sampler(r.temperature, r.topp, r.seed);
        BatchSequence& out = run.sequences[size_t(i)];
        out.result = generate(*members[size_t(i)], tokenizer, sampler, r.prompt, r.steps,
                              [&](const std::string& piece) { out.text += piece; });
      } catch (const BatchStopped&) {
      } catch (...) {
        error = std::current_exception();
        errors[size_t(i)] = error;
      }
      lockstep.leave(error);
    });
  }
  for (std::thread& t : threads) t.join();
  run.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (lockstep.error()) std::rethrow_exception(lockstep.error());
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  for (const BatchSequence& s : run.sequences) run.positions += s.result.positions;
  run.steps = lockstep.phases();
  return run;
}

}  // namespace tinycoral::llm
