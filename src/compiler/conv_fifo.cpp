// Weights through a FIFO from owner tiles (conv_fifo.h).
#include "compiler/conv_fifo.h"

#include <algorithm>
#include <cstdint>

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

// The rows of `lp`'s parts sent before its ops (fifo_runs_before_ops).
int rows_before_ops(const LayerPlan& lp, uint32_t computing) {
  int rows = 0;
  for (const Part& part : lp.parts) {
    const size_t n = fifo_runs_before_ops(part, computing);
    for (size_t k = 0; k < n; ++k) rows += part.owned[k].r1 - part.owned[k].r0;
  }
  return rows;
}

// Each part of FIFO layer `lp` on one computing tile (the one with the most free rows in whole
// windows of `unit` rows), its rows beyond that tile's on tiles that do not compute the layer,
// those sent first; the first run's first window as a run of its own (the ops start at their
// first fill, so every part's comes early). No fence then stands on a computing tile (a tile's
// runs need none between them): no run holds the ops back. False when some part does not fit so.
bool on_one_computing_tile(LayerPlan& lp, WideRows& used, uint32_t computing, int unit) {
  auto whole = [&](const std::pair<int, int>& run) {
    return (run.second - run.first) / unit * unit;
  };
  // (Largest free runs of `tile` first.)
  auto take = [&](int tile, int& left, std::vector<Part::Owned>& runs) {
    for (int n = 1; n > 0 && left > 0;) {
      std::pair<int, int> longest{0, 0};
      for (const auto& run : used.free_runs(tile))
        if (whole(run) > whole(longest)) longest = run;
      n = std::min(left, whole(longest));
      if (n == 0) break;
      runs.push_back({0, n, tile, longest.first, 0});
      used.take(tile, longest.first, longest.first + n);
      left -= n;
    }
  };
  for (Part& part : lp.parts) {
    int best = -1, best_rows = 0;
    for (int t = 0; t < kTiles; ++t) {
      if ((computing & tile_bit(t)) == 0) continue;
      int rows = 0;
      for (const auto& run : used.free_runs(t)) rows += whole(run);
      if (rows > best_rows) best = t, best_rows = rows;
    }
    if (best < 0) return false;
    const int total = (part.g1 - part.g0) * lp.kwords;
    int own = std::min(total, best_rows), rest = total - own;
    std::vector<Part::Owned> runs, mine;
    take(best, own, mine);
    for (int t = 0; t < kTiles && rest > 0; ++t)
      if ((computing & tile_bit(t)) == 0) take(t, rest, runs);
    if (rest > 0 || own > 0) return false;
    runs.insert(runs.end(), mine.begin(), mine.end());
    if (runs.front().r1 > unit) {
      Part::Owned head = runs.front();
      head.r1 = unit;
      runs.front().row += unit;
      runs.front().r1 -= unit;
      runs.insert(runs.begin(), head);
    }
    int r = 0;
    for (Part::Owned& run : runs) {
      const int rows = run.r1 - run.r0;
      run.r0 = r, run.r1 = r += rows;
    }
    part.owned = std::move(runs);
  }
  return true;
}

}  // namespace

size_t fifo_runs_before_ops(const Part& part, uint32_t computing) {
  size_t fenced = 0;
  for (size_t k = 1; k < part.owned.size(); ++k)
    if (part.owned[k - 1].tile != part.owned[k].tile &&
        (computing & tile_bit(part.owned[k - 1].tile)) != 0)
      fenced = k;
  return fenced;
}

void refit_fifo_runs(Shapes& s, const std::vector<bool>& keep) {
  bool adds = false;
  for (const LayerPlan& lp : s.layers) adds = adds || lp.l->residual();
  for (size_t i = 0; i < s.layers.size(); ++i) {
    LayerPlan& lp = s.layers[i];
    if (!lp.fifo || keep[i]) continue;
    // Every row taken but this layer's runs: the segments and their owners, the other FIFO
    // layers' runs, the ADDs' cached rows, the held taps, the rows kept for the ADDs' fills.
    // (Rows under the segments' top only: free runs end there, and the depthwise FIFO and rows the
    // ADDs keep above it are no room for runs.)
    WideRows used;
    auto take = [&](int tile, int a, int b) {
      if (a < kSegmentRows) used.take(tile, a, std::min(b, kSegmentRows));
    };
    uint32_t computing = 0;
    for (const Segment& seg : s.segments) {
      for (int t = 0; t < kTiles; ++t)
        if (seg.mask & tile_bit(t)) take(t, seg.base_row, seg.base_row + seg.rows);
      if (seg.owner >= 0) take(seg.owner, seg.owner_row, seg.owner_row + seg.rows);
    }
    for (const Part& part : lp.parts)
      computing |= s.segments[static_cast<size_t>(part.segment)].mask;
    if (adds)
      for (int t = 0; t < kTiles; ++t) take(t, kSegmentRows - kAddWeightRows, kSegmentRows);
    for (size_t j = 0; j < s.layers.size(); ++j) {
      const LayerPlan& other = s.layers[j];
      if (j != i)
        for (const Part& part : other.parts)
          for (const Part::Owned& run : part.owned)
            take(run.tile, run.row, run.row + run.r1 - run.r0);
      if (other.add_row >= 0)
        for (int t = 0; t < kTiles; ++t)
          if (other.add_mask & tile_bit(t)) take(t, other.add_row, other.add_row + kAddWeightRows);
      for (const HeldTaps& hold : other.holds)
        for (int k = 0; k < hold.pieces(); ++k)
          take(hold.tile, hold.row + k * hold.step, hold.row + k * hold.step + hold.piece);
    }
    LayerPlan one = lp;
    const int unit = lp.chunk > 0 ? lp.chunk : lp.kwords;
    // (Taken where the ops waited for rows, as on one computing tile they wait for none, or where
    // the parts then start together: of one part, the first window alone gains nothing.)
    if (!on_one_computing_tile(one, used, computing, unit)) continue;
    if (rows_before_ops(lp, computing) == 0 && lp.parts.size() < 2) continue;
    // (The same rows of the parameter stream, from the layer's first run's offset.)
    size_t offset = SIZE_MAX;
    for (const Part& part : lp.parts)
      for (const Part::Owned& run : part.owned) offset = std::min(offset, run.offset);
    for (Part& part : one.parts)
      for (Part::Owned& run : part.owned) {
        run.offset = offset;
        offset += static_cast<size_t>(run.r1 - run.r0) * kRowBytes;
      }
    lp = std::move(one);
  }
}

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
