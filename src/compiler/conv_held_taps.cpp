// Holder tiles for the tap entries of split dense depthwise layers (hold_dense_taps, conv_plan.h):
// a layer's round trips through scalar memory then take one producer a run of parts held
// together, not one a part (docs/compiler.md "Fewer producers for a split depthwise layer's
// taps").
#include <algorithm>

#include "compiler/conv_plan.h"

namespace tinycoral::compiler::conv {

void hold_dense_taps(Shapes& s, const std::vector<Stage>& stages) {
  TakenRows taken = rows_taken(s);
  // (The cached ADD rows come before in the parameter stream and in wide memory.)
  for (const LayerPlan& lp : s.layers) {
    if (lp.add_row < 0) continue;
    if (lp.add_row + kAddWeightRows <= static_cast<int>(taken.used.front().size()))
      taken.take(lp.add_mask, lp.add_row, lp.add_row + kAddWeightRows);
    taken.offset += size_t{kAddWeightRows} * kRowBytes;
  }
  for (size_t i = 0; i < s.layers.size(); ++i) {
    LayerPlan& lp = s.layers[i];
    lp.holds.clear();
    if (!lp.dense() || lp.parts.size() < 2) continue;
    // Only where the generator runs the parts at once (conv_codegen: `at_once`): split by output
    // groups over the stage's tiles, every part resident from the caching program on.
    const auto stage = std::find_if(stages.begin(), stages.end(),
                                    [&](const Stage& st) { return st.first <= i && i < st.end; });
    if (stage == stages.end() || stage->tiles.front().g1 == 0) continue;
    bool resident = true;
    for (const Part& part : lp.parts)
      resident = resident && s.segments[static_cast<size_t>(part.segment)].first_of_group;
    if (!resident) continue;
    for (size_t k = 0; k + 1 < lp.parts.size();) {
      // The longest free run below the segments' top on any tile (the lowest tile first).
      int tile = -1, at = 0, length = 0;
      for (int t = 0; t < kTiles; ++t) {
        const std::vector<bool>& used = taken.used[static_cast<size_t>(t)];
        for (int r = 0, run = 0; r < kSegmentRows; ++r) {
          run = used[static_cast<size_t>(r)] ? 0 : run + 1;
          if (run > length) tile = t, at = r + 1 - run, length = run;
        }
      }
      // As many parts from k on as it holds; fewer than two would save nothing.
      size_t end = k;
      int rows = 0;
      while (end < lp.parts.size() &&
             rows + lp.trip_rows(lp.parts[end].g0, lp.parts[end].g1) <= length)
        rows += lp.trip_rows(lp.parts[end].g0, lp.parts[end].g1), ++end;
      if (end < k + 2) break;
      taken.take(tile_bit(tile), at, at + rows);
      lp.holds.push_back(
          {static_cast<int>(k), static_cast<int>(end), tile, at, rows, taken.offset});
      taken.offset += static_cast<size_t>(rows) * kRowBytes;
      k = end;
    }
  }
}

}  // namespace tinycoral::compiler::conv
