// Many sequences at once (issue 14, step e): B sequences advance one token each per step, each with
// its own prompt, sampler, position and KV cache, while every layer matmul (and FFN) of a step is
// computed for all of them together by a BatchMatmuls in the int8 path's arithmetic (either of
// Int8Options' arithmetics): on the CPU (CpuBatchMatmuls, one pass over the weights for all rows)
// or as one program over all rows per matmul on an Edge TPU (ChipBatchMatmuls, batch_chip.h).
//
// How: each sequence runs the int8 path itself (Int8Transformer over shared weights) and the
// generation loop (generate.h) on a thread of its own; its integer seams (matmuls, FFNs, u) meet at
// a lockstep barrier, and the last sequence to arrive computes that step for every row. So each
// sequence computes exactly what it computes alone (its text is the int8 path's, sequence by
// sequence), and a sequence that is done (its steps, or BOS) leaves the batch.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "llm/generate.h"
#include "llm/int8_model.h"

namespace tinycoral::llm {

// One row of a batched step: the sequence it belongs to, its quantized input and output (as the
// sequence's Int8Transformer hands them to its integer seams).
struct BatchRow {
  int sequence;
  const int8_t* in;
  int8_t* out;
};

// A batched step: a layer matmul (0..6, LayerMatmul), or one of these.
constexpr int kBatchFfn = -1;     // the FFN from w1's input to w2's output (Int8Transformer::ffn_q)
constexpr int kBatchValues = -2;  // fused_layers: u from v (Int8Transformer::values_q)

// The batch's integer steps: exactly the int8 path's (int8_model.h), with the integer matmul over
// all rows computed by a subclass: on the CPU (CpuBatchMatmuls) or on an Edge TPU
// (ChipBatchMatmuls, batch_chip.h). Each sequence is an Int8Transformer over the weights built
// here, so quantizing, dequantizing, the residual add, RMSNorm's scale and attention are its own.
class BatchMatmuls {
 public:
  BatchMatmuls(const Checkpoint& ck, ThreadPool& pool, const Calibration& calibration,
               Int8Options options = {});
  virtual ~BatchMatmuls();
  // Step `step` of `layer` for every row; rows come in sequence order, at most one per sequence.
  void run(int layer, int step, std::span<const BatchRow> rows);
  const QuantizedMatmul& matmul(int layer, LayerMatmul m) const {
    return weights_->matmul(layer, m);
  }
  const std::shared_ptr<const Int8Weights>& weights() const { return weights_; }

 protected:
  // yq[i] = the chip's FULLY_CONNECTED of xq[i] for each of the rows of `sequences` (xq:
  // [n][cols], yq: [n][rows] of matmul `m`).
  virtual void matmul_q(int layer, LayerMatmul m, std::span<const int> sequences, const int8_t* xq,
                        int8_t* yq) = 0;
  // The whole FFN of every row (xq: w1's input [n][dim], yq: w2's output [n][dim]) in one go, or
  // false (then w1 and w3, the gate on the host and w2 run as matmul_q calls).
  virtual bool ffn_whole_q(int layer, std::span<const int> sequences, const int8_t* xq,
                           int8_t* yq) {
    (void)layer, (void)sequences, (void)xq, (void)yq;
    return false;
  }
  // fused_layers: u of every row (v: [n][kv_dim], u: [n][n_heads * dim]); by default on the host.
  virtual void values_q(int layer, std::span<const int> sequences, const int8_t* v, int8_t* u);
  // The same on the CPU: each thread's slice of weight rows passed over by every row while it is
  // in cache; the sums are exact integers, so the order changes nothing.
  void cpu_matmul_q(int layer, LayerMatmul m, size_t n, const int8_t* xq, int8_t* yq);
  ThreadPool& pool_;

 private:
  void ffn_q(int layer, size_t n);
  std::shared_ptr<const Int8Weights> weights_;  // the int8 path's, shared with every sequence
  std::vector<int> sequences_;
  std::vector<int8_t> xq_, yq_, h1_, h3_, m_;
  std::vector<int32_t> acc_;
};

class CpuBatchMatmuls : public BatchMatmuls {
 public:
  using BatchMatmuls::BatchMatmuls;

 protected:
  void matmul_q(int layer, LayerMatmul m, std::span<const int> sequences, const int8_t* xq,
                int8_t* yq) override {
    cpu_matmul_q(layer, m, sequences.size(), xq, yq);
  }
};

struct BatchRequest {
  std::string prompt;
  int steps = 256;  // run.c's -n: 0 or more than seq_len mean seq_len
  float temperature = 1.0f, topp = 0.9f;
  uint64_t seed = 1;
};

struct BatchSequence {
  std::string text;  // what generate() emits, pieces joined
  GenerateResult result;
};

struct BatchRun {
  std::vector<BatchSequence> sequences;  // in request order
  int64_t positions = 0;                 // forward passes of all sequences together
  int steps = 0;                         // lockstep forward passes (the longest sequence's)
  double wall_s = 0;
  double tokens_per_second() const { return wall_s > 0 ? double(positions) / wall_s : 0; }
};

// Bounds on a batch: a thread per sequence, and every sequence's float32 KV cache and activations
// allocated at the start (stories15M: 3.7 MB a sequence, so 1,024 sequences take 3.7 GB).
constexpr int kMaxBatch = 1024;
constexpr int64_t kMaxBatchStateBytes = int64_t{8} << 30;

// Runs every request to its end. Throws Error (before any work) for an empty batch, one past the
// bounds above, or a prompt that does not fit in seq_len, naming the sequence; an error inside
// the batch stops all of it.
BatchRun generate_batch(const Checkpoint& ck, const Tokenizer& tokenizer, BatchMatmuls& matmuls,
                        std::span<const BatchRequest> requests);

}  // namespace tinycoral::llm
