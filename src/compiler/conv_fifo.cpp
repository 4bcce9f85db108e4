// Weights through a FIFO from owner tiles (conv_fifo.h).
#include "compiler/conv_fifo.h"

#include <algorithm>

namespace tinycoral::compiler::conv {

bool fifo_capable(const LayerPlan& lp) {
  const ConvLayer& l = *lp.l;
  return !l.depthwise && !l.residual() && l.heads.empty() && !joined(l) && lp.block == 1 &&
         lp.kwords <= kFifoMaxRows;
}

void chunk_fifo_windows(Shapes& s, const std::vector<Stage>& stages) {
  for (size_t i = 0; i < s.layers.size(); ++i) {
    LayerPlan& lp = s.layers[i];
    lp.chunk = lp.psum_rows = 0;
    if (!lp.fifo) continue;
    int positions = 0;
    for (const Stage& stage : stages)
      if (i >= stage.first && i < stage.end)
        for (const Plan& p : stage.tiles) {
          positions = std::max(positions, positions_of(p, p.layers[i]));
        }
    int chunk = std::min(kChunkMaxRows, lp.window_words);
    while (chunk > 1 && lp.window_words % chunk != 0) --chunk;
    if (chunk >= 4 && chunk < lp.kwords && chunk + positions < lp.kwords)
      lp.chunk = chunk, lp.psum_rows = positions;
  }
}

namespace {

// The order an owned part's runs are sent in (their rows renumbered to it). Every run but the
// last waits for the run before it at a fence on that run's tile, and a fence on a tile that
// computes the layer must come before the layer's ops (fifo_broadcast in conv_codegen.cpp), where
// the scalar core's wait for the runs before it holds every op back. So the runs on computing
// tiles come first but for the longest, which goes last (needing no fence after it); the runs on
// other tiles go between, their fences after the ops. (v2's 7 x 7 FIFO layers: 45 and 440 weight
// rows before their ops where 945 and 1,370 were, with the turns of own_fifo_weights.)
void send_order(std::vector<Part::Owned>& runs, uint32_t computing) {
  auto on_computing = [&](const Part::Owned& run) { return (computing & tile_bit(run.tile)) != 0; };
  std::vector<Part::Owned> order;
  auto longest = runs.end();
  for (auto it = runs.begin(); it != runs.end(); ++it)
    if (on_computing(*it) && (longest == runs.end() || it->r1 - it->r0 > longest->r1 - longest->r0))
      longest = it;
  if (longest == runs.end()) return;
  for (auto it = runs.begin(); it != runs.end(); ++it)
    if (on_computing(*it) && it != longest) order.push_back(*it);
  for (const Part::Owned& run : runs)
    if (!on_computing(run)) order.push_back(run);
  order.push_back(*longest);
  int r = 0;
  for (Part::Owned& run : order) {
    const int rows = run.r1 - run.r0;
    run.r0 = r, run.r1 = r += rows;
  }
  runs = std::move(order);
}

}  // namespace

bool own_fifo_weights(Shapes& s) {
  // The rows each tile's segment groups take, then the owners' runs.
  WideRows used;
  size_t stream_rows = 0;
  for (const Segment& seg : s.segments) {
    stream_rows += static_cast<size_t>(seg.rows);
    for (int t = 0; t < kTiles; ++t)
      if (seg.mask & tile_bit(t)) used.take(t, seg.base_row, seg.base_row + seg.rows);
  }
  // A chain with residual ADDs keeps the top rows under the segments' top free of runs on every
  // tile: rows all of an ADD's tiles have free there hold its cached weight rows (cache_add_rows;
  // v2: one tile's runs ending 2 rows under the top left 6 ADDs on 14 tiles room for 5).
  bool adds = false;
  for (const LayerPlan& lp : s.layers) adds = adds || lp.l->residual();
  if (adds)
    for (int t = 0; t < kTiles; ++t) used.take(t, kSegmentRows - kAddWeightRows, kSegmentRows);
  // The longest run of free rows of tile t: its first row and length (the lowest of equal ones).
  auto longest_gap = [&](int t) {
    int best = 0, best_at = 0;
    for (const auto& [a, b] : used.free_runs(t))
      if (b - a > best) best = b - a, best_at = a;
    return std::pair{best_at, best};
  };
  std::vector<LayerPlan> layers = s.layers;
  size_t offset = stream_rows * kRowBytes;
  for (LayerPlan& lp : layers) {
    if (!lp.fifo) continue;
    uint32_t computing = 0;  // the tiles that compute the layer
    for (const Part& part : lp.parts)
      computing |= s.segments[static_cast<size_t>(part.segment)].mask;
    // The parts take a run each in turn, so that each finds one long run before any takes a
    // second (the fences before the ops wait for all runs of a part but its longest).
    std::vector<int> placed(lp.parts.size(), 0);
    for (Part& part : lp.parts) part.owned.clear(), part.chunk = lp.chunk;
    // (Runs of whole windows: a K-chunked window's rows, else a group's.)
    const int unit = lp.chunk > 0 ? lp.chunk : lp.kwords;
    for (bool more = true; more;) {
      more = false;
      for (size_t k = 0; k < lp.parts.size(); ++k) {
        Part& part = lp.parts[k];
        const uint32_t mask = s.segments[static_cast<size_t>(part.segment)].mask;
        const int total = (part.g1 - part.g0) * lp.kwords, r = placed[k];
        if (r == total) continue;
        // (Ties go to a tile that does not compute the part.)
        int tile = -1, row = 0, rows = 0;
        bool outside = false;
        for (int t = 0; t < kTiles; ++t) {
          const auto [at, free] = longest_gap(t);
          const int n = std::min(total - r, free / unit * unit);
          const bool out = (mask & tile_bit(t)) == 0;
          if (n > rows || (n == rows && n > 0 && out && !outside)) {
            tile = t, row = at, rows = n, outside = out;
          }
        }
        if (rows == 0) return false;
        part.owned.push_back({r, r + rows, tile, row, 0});
        used.take(tile, row, row + rows);
        placed[k] += rows;
        more = more || placed[k] < total;
      }
    }
    for (Part& part : lp.parts) {
      send_order(part.owned, computing);
      for (Part::Owned& run : part.owned) {
        run.offset = offset;
        offset += static_cast<size_t>(run.r1 - run.r0) * kRowBytes;
      }
    }
  }
  s.layers = std::move(layers);
  return true;
}

void fifo_instead_of_turns(Layout& layout) {
  Shapes& s = layout.shapes;
  size_t groups = 0;
  bool turns = false;
  for (const Segment& seg : s.segments) {
    groups = std::max(groups, static_cast<size_t>(seg.group) + 1);
    turns = turns || !seg.first_of_group;
  }
  if (!turns) return;
  // The segments' groups as they were assigned (assign_segments' inputs): tiles, base rows, and
  // as top the highest row a group's segments reach.
  std::vector<uint32_t> masks(groups, 0);
  std::vector<int> bases(groups, 0), tops(groups, kSegmentRows);
  std::vector<bool> has_turns(groups, false);
  for (const Segment& seg : s.segments) {
    const auto g = static_cast<size_t>(seg.group);
    if (seg.first_of_group) {
      masks[g] = seg.mask;
      bases[g] = seg.base_row;
      tops[g] = seg.base_row + seg.rows;
    }
  }
  for (const Segment& seg : s.segments) {
    const auto g = static_cast<size_t>(seg.group);
    tops[g] = std::max(tops[g], seg.base_row + seg.rows);
    has_turns[g] = has_turns[g] || !seg.first_of_group;
  }
  std::vector<int> group_of(s.layers.size(), 0), splits(s.layers.size(), 1);
  Shapes fifo = s;
  bool any = false;
  for (size_t i = 0; i < fifo.layers.size(); ++i) {
    LayerPlan& lp = fifo.layers[i];
    if (lp.parts.empty()) continue;
    int g0 = INT32_MAX, g1 = 0;
    bool turning = false;
    for (const Part& part : lp.parts) {
      const int g = s.segments[static_cast<size_t>(part.segment)].group;
      g0 = std::min(g0, g);
      g1 = std::max(g1, g + 1);
      turning = turning || has_turns[static_cast<size_t>(g)];
    }
    group_of[i] = g0;
    // (A layer split by output groups over tiles: one group of segments per slice.)
    int slices = 0;
    for (int g = g0; g < g1; ++g)
      for (const Part& part : lp.parts)
        if (s.segments[static_cast<size_t>(part.segment)].group == g) {
          ++slices;
          break;
        }
    splits[i] = slices;
    if (turning && fifo_capable(lp)) lp.fifo = any = true;
  }
  if (!any) return;
  chunk_fifo_windows(fifo, layout.stages);
  assign_segments(fifo, group_of, masks, bases, splits, tops);
  for (const Segment& seg : fifo.segments)
    if (!seg.first_of_group) return;  // turns remain: the FIFOs do not replace them
  if (!own_fifo_weights(fifo)) return;
  s = std::move(fifo);
}

}  // namespace tinycoral::compiler::conv
