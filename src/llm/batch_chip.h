// The batch path's layer matmuls on an Edge TPU (issue 14, step e): each matmul of a step runs for
// all rows of the batch as one batched FULLY_CONNECTED program (compiler/fc_batch_codegen.h) over
// weights resident in tile memory, and each layer's FFN as one batched fused program (w1 and w3,
// the gate on the tiles as the batch-1 fused FFN computes it, w2; compiler::generate_ffn_batch:
// only w2's output returns), or where that does not fit w1 + w3 and w2 as matmul programs with the
// gate on the host in the chip's ops. Either way the int8 path's arithmetic, so every sequence gets
// the text it gets alone on the int8 CPU path. With Int8Options::fused_layers (the default), q, k
// and v are the folded matmuls and wo is not run; u = wo_h v (n_heads x dim bytes per row, six
// times o) is one program per layer whose groups each read their head's slice of v
// (FcPlacement::in_at), or where that does not fit one program per kv head (the host cuts the
// slices). With `values_on_host` the host computes u from v's bytes instead: wo's matmul leaves the
// chip, but returning u costs more modeled USB time than the host needs to compute it
// (docs/llm.md "The batch path"). The residual add runs on the host, in the same integers, inside
// each sequence.
//
// Plan, step a's (matmul_plan.h): matmuls of one input (q, k, v; w1, w3 when not fused) share a
// program when their groups fit in 32 together, each group keeping its matmul's output stage; more
// than 2048 outputs are cut into programs; each program's groups go to the least-filled tiles (a
// fused FFN's w1 and w3 group i on one tile), and every caching program runs once at
// construction. A program takes as many rows as one tile's narrow memory holds X and the outputs
// for (455 at stories15M's dim 288, 170 at its hidden 768, 139 for its fused FFN); a larger batch
// runs it in even chunks, and a row count is rounded up to a power of two (padding rows hold the
// zero point; their outputs are dropped) so that few programs are generated. K above 1024 is no
// limit here (the batch program streams the whole row to every tile); only weights that no longer
// fit tile memory stay on the host, in the same arithmetic.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compiler/fc_codegen.h"
#include "llm/batch.h"
#include "llm/matmul_plan.h"
#include "runtime/edgetpu.h"
#include "runtime/stick_time.h"

namespace tinycoral::llm {

struct ChipBatchStats {
  int chip_matmuls = 0, host_matmuls = 0;  // per layer stack; fused_layers: u counts as wo...
  int host_values = 0;         // ...except in these layers, whose u the host computes by choice
  int ffn_programs = 0;        // layers whose FFN is one batched fused program (w1, w3, gate, w2)
  int programs = 0;            // programs per forward pass of the batch (one chunk)
  int64_t resident_bytes = 0;  // parameter bytes cached in tile memory
  int max_tile_units = 0;      // the fullest tile's parameter units (of 8192)
  std::string host_reason;     // why the first host matmul is not on the chip
  runtime::StickTime modeled, caching;  // every execution run so far; the one-time caching
  int runs = 0;
  double chip_wall_s = 0;  // wall time inside EdgeTpu::run
};

class ChipBatchMatmuls : public BatchMatmuls {
 public:
  // `tpu` must outlive this; its tile memory is filled with the layers' weights here.
  // `values_on_host`: fused_layers' u computed by the host from v instead of by programs whose
  // outputs return over USB; the same integers either way. `ffn_programs`: each layer's FFN as one
  // batched fused program where it fits (compiler::generate_ffn_batch; only w2's output returns),
  // else w1 + w3 and w2 as matmul programs with the gate on the host (the same integers).
  ChipBatchMatmuls(const Checkpoint& ck, ThreadPool& pool, const Calibration& calibration,
                   runtime::EdgeTpu& tpu, Int8Options options = {}, bool values_on_host = false,
                   bool ffn_programs = true);
  ~ChipBatchMatmuls() override;
  const ChipBatchStats& stats() const { return stats_; }

 protected:
  void matmul_q(int layer, LayerMatmul m, std::span<const int> sequences, const int8_t* xq,
                int8_t* yq) override;
  void values_q(int layer, std::span<const int> sequences, const int8_t* v, int8_t* u) override;
  bool ffn_whole_q(int layer, std::span<const int> sequences, const int8_t* xq,
                   int8_t* yq) override;

 private:
  struct Program;
  struct FfnProgram;
  bool ffn_program(int layer, TileAllocator& tiles);
  // Runs `exe` over x_ (re-caching the weights after a recovery); its output in y_.
  void run_execution(const std::shared_ptr<runtime::Program>& exe);
  // Planned matmuls by id: a LayerMatmul (0..6), or kValueIds + h for u of head h (fused_layers).
  static constexpr int kValueIds = kLayerMatmuls;
  const QuantizedMatmul& planned(int layer, int id) const;
  std::vector<int>& plan_of(int layer, int id);
  // Runs matmul `id` for every row (on the host when it has no programs).
  void run_matmul(int layer, int id, std::span<const int> sequences, const int8_t* xq, int8_t* yq);
  void run_chunk(Program& p, int layer, int called, std::span<const int> sequences,
                 const int8_t* xq, int8_t* yq);
  // Runs `p` over n rows of the caller's (padded into X); the result in y_. Returns the row count
  // the program ran with.
  int run_rows(Program& p, const int8_t* xq, int n);
  bool values_program(int layer, TileAllocator& tiles);
  std::shared_ptr<runtime::Program> execution(Program& p, int rows);
  compiler::FcLayer fc_layer(int layer, const Program& p) const;
  void cache_all();
  runtime::EdgeTpu& tpu_;
  std::vector<Program> programs_;
  std::vector<std::vector<int>> plans_;  // [layer][id]: its programs; empty = host
  int ids_per_layer_ = kLayerMatmuls;
  std::vector<int> values_programs_;               // [layer]: the program of every head's u, or -1
  std::vector<std::unique_ptr<FfnProgram>> ffns_;  // [layer]: its fused FFN, or null
  // Results of matmuls a shared program computed beside the one asked for, per sequence, kept
  // until their own call (which must bring the same quantized input).
  struct Pending {
    int layer = -1;
    std::vector<int8_t> out, xq;
  };
  std::map<std::pair<int, int>, Pending> pending_;  // (sequence, matmul)
  std::vector<int8_t> x_, y_, vh_, uh_;
  ChipBatchStats stats_;
  int recoveries_seen_ = 0;
};

}  // namespace tinycoral::llm
