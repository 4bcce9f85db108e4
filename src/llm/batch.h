// Many sequences at once (issue 14, step e): B sequences advance one token each per step, each with
// its own prompt, sampler, position and KV cache, while every layer matmul (and FFN) of a step is
// computed for all of them together by a BatchMatmuls in the int8 path's arithmetic: on the CPU
// (CpuBatchMatmuls, one pass over the weights for all rows) or as one program over all rows per
// matmul on an Edge TPU (ChipBatchMatmuls, batch_chip.h).
//
// How: each sequence runs the unchanged forward pass (transformer.h) and generation loop
// (generate.h) on a thread of its own; its layer matmuls and FFNs meet at a lockstep barrier, and
// the last sequence to arrive computes that step for every row. So each sequence computes exactly
// what it computes alone with the same arithmetic (its text is the int8 path's, sequence by
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

// One row of a batched step: the sequence it belongs to, its input and its output (as the
// forward pass hands them to layer_matmul or ffn; an FFN's output may be its input).
struct BatchRow {
  int sequence;
  const float* in;
  float* out;
};

// The batch's arithmetic: exactly the int8 path's (int8_model.h) - each matmul's input quantized,
// the chip's FULLY_CONNECTED in integers, the output dequantized; the FFN as w1 and w3, the chip's
// gate (SiLU(h1) h3 on the int8 values) and w2 - with the integer matmul over all rows computed by
// a subclass: on the CPU (CpuBatchMatmuls) or on an Edge TPU (ChipBatchMatmuls, batch_chip.h).
class BatchMatmuls {
 public:
  BatchMatmuls(const Checkpoint& ck, ThreadPool& pool, const Calibration& calibration);
  virtual ~BatchMatmuls();
  // Matmul `m` of `layer` for every row; rows come in sequence order, at most one per sequence.
  void run(int layer, LayerMatmul m, std::span<const BatchRow> rows);
  // The FFN of `layer` (w1, w3, the gate, w2) for every row.
  void ffn(int layer, std::span<const BatchRow> rows);
  const QuantizedMatmul& matmul(int layer, LayerMatmul m) const;

 protected:
  // yq[i] = the chip's FULLY_CONNECTED of xq[i] for each of the rows of `sequences` (xq:
  // [n][cols], yq: [n][rows] of matmul `m`).
  virtual void matmul_q(int layer, LayerMatmul m, std::span<const int> sequences, const int8_t* xq,
                        int8_t* yq) = 0;
  // The same on the CPU: each thread's slice of weight rows passed over by every row while it is
  // in cache; the sums are exact integers, so the order changes nothing.
  void cpu_matmul_q(int layer, LayerMatmul m, size_t n, const int8_t* xq, int8_t* yq);
  ThreadPool& pool_;

 private:
  std::unique_ptr<Int8Transformer> model_;  // the int8 path's quantized weights and gates
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
