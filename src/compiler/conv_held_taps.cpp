// Holder tiles for the tap entries of split dense depthwise layers (hold_dense_taps, conv_plan.h):
// a layer's round trips through scalar memory then take one producer a run of parts held
// together, not one a part (docs/compiler.md "Fewer producers for a split depthwise layer's
// taps").
#include <algorithm>

#include "compiler/conv_plan.h"

namespace tinycoral::compiler::conv {

namespace {
// Whether segment `own`'s rows [a, b) on the tiles of `mask` are the only rows there: no other
// segment of its group (turns load the group's rows again every inference), no other segment,
// owner's copy, FIFO weight run or cached ADD row there.
bool only_rows_there(const Shapes& s, int own, uint32_t mask, int a, int b) {
  auto meets = [&](uint32_t m, int lo, int hi) { return (m & mask) != 0 && lo < b && a < hi; };
  const Segment& mine = s.segments[static_cast<size_t>(own)];
  for (size_t k = 0; k < s.segments.size(); ++k) {
    const Segment& seg = s.segments[k];
    if (static_cast<int>(k) == own) continue;
    if (seg.group == mine.group || meets(seg.mask, seg.base_row, seg.base_row + seg.rows))
      return false;
    if (seg.owner >= 0 && meets(tile_bit(seg.owner), seg.owner_row, seg.owner_row + seg.rows))
      return false;
  }
  for (const LayerPlan& lp : s.layers) {
    if (lp.add_row >= 0 && meets(lp.add_mask, lp.add_row, lp.add_row + kAddWeightRows))
      return false;
    for (const Part& part : lp.parts)
      for (const Part::Owned& run : part.owned)
        if (meets(tile_bit(run.tile), run.row, run.row + run.r1 - run.r0)) return false;
  }
  return true;
}
}  // namespace

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
    // Only where the generator runs the parts at once (parts_run_at_once, conv_plan.h).
    const auto stage = std::find_if(stages.begin(), stages.end(),
                                    [&](const Stage& st) { return st.first <= i && i < st.end; });
    if (stage == stages.end() || !parts_run_at_once(s, *stage, lp)) continue;
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
    // A held part's own entries are read by nothing now: free for the layers after, unless its
    // group takes turns (the execution program loads its rows again) or other rows lie there.
    for (const HeldTaps& hold : lp.holds)
      for (int k = hold.p0; k < hold.p1; ++k) {
        const Part& part = lp.parts[static_cast<size_t>(k)];
        const Segment& seg = s.segments[static_cast<size_t>(part.segment)];
        const int a = lp.weight_row(part), b = a + lp.trip_rows(part.g0, part.g1);
        if (!only_rows_there(s, part.segment, seg.mask, a, b)) continue;
        for (int t = 0; t < kTiles; ++t)
          if (seg.mask & tile_bit(t))
            for (int r = a; r < b; ++r)
              taken.used[static_cast<size_t>(t)][static_cast<size_t>(r)] = false;
      }
  }
}

}  // namespace tinycoral::compiler::conv
