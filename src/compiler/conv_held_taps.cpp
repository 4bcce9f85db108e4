// Holder tiles for the tap entries of split dense depthwise layers (hold_dense_taps, conv_plan.h):
// a layer's round trips through scalar memory then take one producer a run of parts held
// together, not one a part (docs/compiler.md "Fewer producers for a split depthwise layer's
// taps").
#include <algorithm>
#include <optional>
#include <vector>

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

// (More pieces would only add loads to the caching program.)
constexpr int kMostPieces = 16;

// Where parts' entries go: `parts` of them (their rows sum[parts]) from row `row` of tile `tile`,
// in pieces of `piece` rows every `step` rows.
struct Holder {
  int parts = 0, tile = 0, row = 0, piece = 0, step = 0;
};

// The holder of the most parts from the first on (sum[j]: the rows of the first j; at least two
// parts). First the longest free run below the segments' top on any tile (the lowest tile first),
// as many parts as it holds. Where no run holds them all, pieces of equal length at a constant
// step on one tile (the producer's walk of two levels, docs/compiler.md "Held taps in pieces"),
// the first piece starting or ending where a free run does, if they hold more parts.
std::optional<Holder> holder(const TakenRows& taken, const std::vector<int>& sum) {
  const int most = static_cast<int>(sum.size()) - 1;
  std::optional<Holder> best;
  int tile = -1, at = 0, length = 0;
  for (int t = 0; t < kTiles; ++t) {
    const std::vector<bool>& used = taken.used[static_cast<size_t>(t)];
    for (int r = 0, run = 0; r < kSegmentRows; ++r) {
      run = used[static_cast<size_t>(r)] ? 0 : run + 1;
      if (run > length) tile = t, at = r + 1 - run, length = run;
    }
  }
  int fits = 0;
  while (fits < most && sum[static_cast<size_t>(fits + 1)] <= length) ++fits;
  if (fits >= 2)
    best = Holder{fits, tile, at, sum[static_cast<size_t>(fits)], sum[static_cast<size_t>(fits)]};
  if (fits == most) return best;
  // free[t][r]: the free rows from row r on, on tile t; the places a piece may start.
  std::vector<std::vector<int>> free(kTiles, std::vector<int>(kSegmentRows + 1, 0));
  std::vector<std::vector<int>> runs(kTiles);  // (start, length) pairs, flattened
  for (int t = 0; t < kTiles; ++t) {
    const std::vector<bool>& used = taken.used[static_cast<size_t>(t)];
    std::vector<int>& f = free[static_cast<size_t>(t)];
    for (int r = kSegmentRows - 1; r >= 0; --r)
      f[static_cast<size_t>(r)] =
          used[static_cast<size_t>(r)] ? 0 : f[static_cast<size_t>(r + 1)] + 1;
    for (int r = 0; r < kSegmentRows; ++r)
      if (f[static_cast<size_t>(r)] > 0 && (r == 0 || f[static_cast<size_t>(r - 1)] == 0))
        runs[static_cast<size_t>(t)].insert(runs[static_cast<size_t>(t)].end(),
                                            {r, f[static_cast<size_t>(r)]});
  }
  for (int parts = most; parts > std::max(fits, 1); --parts) {
    const int rows = sum[static_cast<size_t>(parts)];
    // The fewest pieces first (the longest ones), a tile's lowest rows first.
    for (int n = 2; n <= kMostPieces; ++n) {
      if (rows % n != 0) continue;
      const int piece = rows / n;
      for (int t = 0; t < kTiles; ++t) {
        const std::vector<int>& f = free[static_cast<size_t>(t)];
        const std::vector<int>& rs = runs[static_cast<size_t>(t)];
        std::vector<int> places;
        for (size_t q = 0; q < rs.size(); q += 2)
          if (rs[q + 1] >= piece) places.insert(places.end(), {rs[q], rs[q] + rs[q + 1] - piece});
        std::sort(places.begin(), places.end());
        for (int a : places)
          for (int step = piece; a + (n - 1) * step + piece <= kSegmentRows; ++step) {
            if (f[static_cast<size_t>(a + step)] < piece) continue;
            bool ok = true;
            for (int j = 1; j < n && ok; ++j) ok = f[static_cast<size_t>(a + j * step)] >= piece;
            if (ok) return Holder{parts, t, a, piece, step};
          }
      }
    }
  }
  return best;
}

// A run of parts held together: from part `first`, where `at` says.
struct HeldRun {
  size_t first = 0;
  Holder at;
};

// The runs of a layer whose parts' entries take `rows` rows each, each of as many parts as a
// holder takes; their rows taken in `taken`.
std::vector<HeldRun> runs_of(TakenRows& taken, const std::vector<int>& rows) {
  std::vector<HeldRun> runs;
  for (size_t k = 0; k + 1 < rows.size();) {
    // The rows of parts k .. j - 1 together (at least two parts: one would save nothing).
    std::vector<int> sum = {0};
    for (size_t j = k; j < rows.size(); ++j) sum.push_back(sum.back() + rows[j]);
    const std::optional<Holder> at = holder(taken, sum);
    if (!at) break;
    const int held = sum[static_cast<size_t>(at->parts)];
    for (int j = 0; j < held / at->piece; ++j)
      taken.take(tile_bit(at->tile), at->row + j * at->step, at->row + j * at->step + at->piece);
    runs.push_back({k, *at});
    k += static_cast<size_t>(at->parts);
  }
  return runs;
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
    std::vector<int> rows;
    for (const Part& part : lp.parts) rows.push_back(lp.trip_rows(part.g0, part.g1));
    for (const HeldRun& run : runs_of(taken, rows)) {
      const int n = run.at.parts;
      int held = 0;
      for (int j = 0; j < n; ++j) held += rows[run.first + static_cast<size_t>(j)];
      lp.holds.push_back({static_cast<int>(run.first), static_cast<int>(run.first) + n, run.at.tile,
                          run.at.row, held, taken.offset, run.at.piece, run.at.step});
      taken.offset += static_cast<size_t>(held) * kRowBytes;
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
