// How layer matmuls become FULLY_CONNECTED programs over weights resident in tile memory: the one
// planner of the chip path (chip_model.h) and the batch path (batch_chip.h).
//
// Matmuls of one input (q, k, v; w1, w3; the heads of one kv head's u) share a program when their
// 64-output groups fit in 32 together, each group keeping its matmul's output stage; a matmul of
// more than 2048 outputs is cut into programs. Each program's groups go to the least-filled tiles
// at each tile's first free wide unit (FcPlacement). A matmul is on the chip only when all its
// programs are; the others stay on the host in the same arithmetic, with the reason.
#pragma once

#include <array>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "compiler/fc_codegen.h"
#include "compiler/fc_layer.h"
#include "llm/int8_model.h"

namespace tinycoral::llm {

constexpr int kPlanTiles = 16;
constexpr int kMaxProgramOutputs = 2048;  // two 64-output groups on each tile

constexpr int kKStep = 64;  // K is padded to a multiple of this
// Rows rounded up to whole 64-output groups; K padded to a multiple of 64.
inline int whole_groups(int rows) { return (rows + 63) / 64 * 64; }

// Tile memory as the placement sees it: each tile's parameters fill wide units from 0 up, so the
// tiles fill evenly (stories15M's six layers fill the fullest tile to 90%).
class TileAllocator {
 public:
  // Each group to the least-filled tile that has fewer than `per_tile` of this program's groups
  // (two when there are more than 16), at that tile's first free unit; false (and nothing placed)
  // when one does not fit.
  bool place(int groups, int units, compiler::FcPlacement& placement);
  // place() with at most room[t] of the groups on tile t (a chain's output rows left there).
  bool place(int groups, int units, compiler::FcPlacement& placement,
             const std::array<int, kPlanTiles>& room);
  // Pairs of groups on one tile each (a fused FFN's w1 and w3 group i): the least-filled tiles
  // with room for both, one pair per tile.
  bool place_pairs(int pairs, int units, compiler::FcPlacement& placement);
  // Groups whose weights are the same (the RoPE sums'): each group's own `units` (its aux rows)
  // as place() puts them, and on each tile one copy of a whole group (`copy_units`: aux rows and
  // weights) at copies[t] (-1: none yet; the copy is made where the first group lands), which
  // every group there reads: weight_units[g] = its tile's copy + the copy's own two aux rows (8
  // units, whatever `units` is). Tiles that already hold a copy count as less filled by its size.
  bool place_sharing(int groups, int units, int copy_units, std::array<int, kPlanTiles>& copies,
                     compiler::FcPlacement& placement);
  // place_sharing with group g on tile `prefer[g]` where that tile has room for it (at most two
  // groups a tile), else (and for -1) on the least-filled tile as place_sharing puts it;
  // place_sharing is this with no preference.
  bool place_sharing_on(const std::vector<int>& prefer, int units, int copy_units,
                        std::array<int, kPlanTiles>& copies, compiler::FcPlacement& placement);
  // `units` (a multiple of 4) on tile `tile` at its first free unit, which it returns; -1 (and
  // nothing taken) when they do not fit.
  int take(int tile, int units);
  int max_fill() const;
  // Each tile's filled units (of compiler::kFcParamUnits), from unit 0 up: a tile's one free run
  // is the rest, so the most a group placed there can take.
  const std::array<int, kPlanTiles>& fills() const { return fill_; }

 private:
  std::array<int, kPlanTiles> fill_{};  // units, always a multiple of 4 (whole rows)
};

// A matmul to plan: the caller's id for it, its quantized form, its name for the reason.
struct PlannedMatmul {
  int id;
  const QuantizedMatmul* q;
  std::string name;
};

// One program: whole matmuls side by side (or one chunk of a matmul with more than 2048 outputs),
// each segment starting at a 64-output group.
struct FcProgramPlan {
  struct Segment {
    int id, row0, rows, out_at;
  };
  std::vector<Segment> segments;
  int outputs = 0, k_padded = 0;
  compiler::FcPlacement placement;
};

// A layer's matmuls that read the same input, in forward()'s order: candidates for one program.
const std::vector<std::vector<LayerMatmul>>& input_sets();

struct InputSetPlan {
  std::vector<FcProgramPlan> programs;  // placed; every matmul in them is whole on the chip
  std::vector<int> on_host;             // ids of the matmuls left on the host
  std::string host_reason;              // why the first of them is, or ""
};

// Plans matmuls that read the same input (same quantization): segments, then each program checked
// against the batch generator at one row (its K and groups per tile; K > 1024 runs as a one-row
// batch program at batch 1) and placed. `layer` names the reason.
InputSetPlan plan_input_set(std::span<const PlannedMatmul> set, int layer, TileAllocator& tiles);

// A program's segments as one generator layer: each segment's rows at its output offset, K padded
// with zero columns, padding rows with zero weights and multipliers, every group with its matmul's
// output stage. The chip works in uint8: every zero point + 128, and the boundaries are int8 (the
// runtime flips the sign bit), so the host hands over the int8 path's very bytes.
compiler::FcLayer fc_layer_of(const FcProgramPlan& p,
                              const std::function<const QuantizedMatmul&(int id)>& matmul);

// A fused FFN's two generator layers (step b's, also the batch path's): w1's and w3's 64-output
// groups side by side (up, K = k_padded), then w2 (down, K = w1's rows padded to whole groups).
struct FfnPlan {
  FcProgramPlan up, down;
};
FfnPlan plan_ffn(int k_padded, int w1_rows, int w2_rows);

// The gate's constants as the fused FFN generator takes them (zero points in its uint8 form).
void set_ffn_gate(const QuantizedGate& q, compiler::FfnLayer& f);

// The residual add as the FFN chain's pairwise follower 0 (compiler::FfnChain::pairwise): output
// i reads x2[i] and w2's output i (group g: x2's piece g, then w2's), integer weights a and b,
// the zero points' difference as its bias; dim outputs padded to whole groups.
compiler::FcLayer residual_add_layer(const QuantizedAdd& add, int dim);

// RMSNorm before the FFN as the diagonal FC of x2's bytes (QuantizedRmsInput, int8_residual.h):
// output j reads x2's byte j (K = 64: group g reads x2's piece g), weight sign(g_j), no bias, x2's
// and the FFN input's zero points, the FFN input's clamps; its multipliers are per token
// (f32(c_j r_ffn), made on the chip: compiler::FcLayerRest), here c_j. dim outputs padded to whole
// groups (weight and multiplier 0).
compiler::FcLayer rms_input_layer(const QuantizedRmsInput& q, int dim);

}  // namespace tinycoral::llm
