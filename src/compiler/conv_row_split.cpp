// The two row-split forms (conv_row_split.h): halo rows first under a stage written in place, the
// swap under a depthwise stage handing its bands over the ring.
#include "compiler/conv_row_split.h"

#include <algorithm>
#include <cstdint>

#include "compiler/conv_ops.h"

namespace tinycoral::compiler::conv {

namespace {

// Both forms split the last layer of a stage of one round before a next stage of one round whose
// first image no later layer keeps for a residual ADD (the second op's writes and the hand-over
// would race that reader). The next stage, or null where layer i is not such a layer.
const Stage* next_plain_stage(const ConvChain& chain, const std::vector<Stage>& stages, size_t si,
                              size_t i) {
  if (si + 1 >= stages.size()) return nullptr;
  const Stage& s = stages[si];
  const Stage& to = stages[si + 1];
  if (i + 1 != s.end || s.tiles.front().rounds > 1 || to.tiles.front().rounds > 1) return nullptr;
  for (const ConvLayer& later : chain.layers)
    if (later.residual_of == static_cast<int>(to.first)) return nullptr;
  return &to;
}

}  // namespace

std::vector<HaloFirst> halo_first(const ConvChain& chain, const std::vector<Stage>& stages,
                                  size_t si, size_t i) {
  std::vector<HaloFirst> picks;
  const Stage* next = next_plain_stage(chain, stages, si, i);
  if (next == nullptr) return picks;
  const Stage& s = stages[si];
  const Stage& to = *next;
  const ConvLayer& l = chain.layers[i];
  // (Nothing may come between the rest and the hand-over: the next stage fills no image before
  // it (not over the input, the stage after it not written in place early; its second image
  // filled before the first op instead, below).)
  if (!to.halo_in || to.over_input) return picks;
  if (si + 2 < stages.size() && stages[si + 2].halo_in && !stages[si + 2].fill_late) return picks;
  if (l.depthwise || l.residual() || !l.heads.empty() || joined(l)) return picks;
  // A next stage of several layers has its second image filled while layer i runs: only where
  // that image lies off layer i's input, its output and the next stage's first image.
  auto apart = [](int a, int n, int b, int m) { return a + n <= b || b + m <= a; };
  for (const Plan& t : to.tiles) {
    if (to.end == to.first + 1 || !t.layers[to.first + 1].needs_fill()) continue;
    const auto p = std::find_if(s.tiles.begin(), s.tiles.end(),
                                [&](const Plan& q) { return q.tile == t.tile; });
    if (p == s.tiles.end()) return picks;
    const LayerPlan& second = t.layers[to.first + 1];
    const LayerPlan& in = p->layers[i];
    const LayerPlan& into = t.layers[to.first];
    const int at = second.in_base, n = second.in_bytes();
    if (!apart(at, n, in.in_base, in.in_bytes()) || !apart(at, n, into.in_base, into.in_bytes()) ||
        !apart(at, n, p->out_base, p->out_bytes))
      return picks;
  }
  bool rest = false;
  for (const Plan& p : s.tiles) {
    if (p.pixel_band() || p.into_base < 0) return {};
    const LayerPlan& lp = p.layers[i];
    const int n = lp.ob - lp.oa;
    // (The rows others read are the band's first or last or both.)
    bool edges = n >= 3 && (row_readers(p, to, lp.oa) != 0 || row_readers(p, to, lp.ob - 1) != 0);
    for (int y = lp.oa + 1; edges && y + 1 < lp.ob; ++y) edges = row_readers(p, to, y) == 0;
    if (edges)
      picks.push_back({{lp.oa, n - 1, 2}, {lp.oa + 1, 1, n - 2}});
    else
      picks.push_back({{lp.oa, 1, n}, {lp.oa, 1, 0}});
    rest = rest || edges;
  }
  if (!rest) picks.clear();
  return picks;
}

std::vector<RowRange> swap_split(const ConvChain& chain, const std::vector<Stage>& stages,
                                 size_t si, size_t i) {
  std::vector<RowRange> rows;
  const Stage* next = next_plain_stage(chain, stages, si, i);
  if (next == nullptr) return rows;
  const Stage& s = stages[si];
  const Stage& to = *next;
  const ConvLayer& l = chain.layers[i];
  if (!l.depthwise || to.halo_in) return rows;
  // (Bytes [first, end) of a tile's narrow memory.)
  struct Region {
    int tile, first, end;
  };
  // (Rows [ya, yb) of a padded image, whole rows.)
  auto rows_of = [](int tile, const LayerPlan& lp, int ya, int yb) {
    const int row = lp.wp * lp.cin;
    return Region{tile, lp.in_base + lp.slide + ya * row, lp.in_base + lp.slide + yb * row};
  };
  // The next stage's images its fills write before the second op (its first two; the stage
  // after it, written in place, has its image filled after the hand-over).
  std::vector<Region> filled;
  for (size_t k = to.first; k < std::min(to.first + 2, to.end); ++k)
    for (const Plan& t : to.tiles) {
      const LayerPlan& lp = t.layers[k];
      if (lp.needs_fill() || to.over_input)
        filled.push_back({t.tile, lp.in_base, lp.in_base + lp.in_bytes()});
    }
  int tallest = 0;
  for (const Plan& p : s.tiles) tallest = std::max(tallest, p.layers[i].ob - p.layers[i].oa);
  if (tallest < 2) return rows;
  // (Bytes of every band and of a row of the tallest bands; cycles of a row of the op, taps x
  // positions x channel words / 4: the clock's 16 MACs a step.)
  int64_t band_bytes = 0, tall_rows = 0, row_cycles = 0;
  for (const Plan& p : s.tiles) {
    const LayerPlan& lp = p.layers[i];
    if (p.pixel_band() || p.into_base >= 0 || surplus_pixels(lp) > 0) return rows;
    band_bytes += int64_t{lp.ob - lp.oa} * p.out_row;
    if (lp.ob - lp.oa == tallest) tall_rows += p.out_row;
    row_cycles = std::max(row_cycles, int64_t{lp.blocks} * l.kh * l.kw * (lp.cin / 4) / 4);
  }
  // The first op's rows of each band: the tallest bands but their last k rows, the others whole.
  auto first_rows = [&](const Plan& p, int k) {
    const LayerPlan& lp = p.layers[i];
    return RowRange{lp.oa, lp.ob - (lp.ob - lp.oa == tallest ? k : 0)};
  };
  // Whether the fills and the first hand-over's writes (on each receiver the rows it reads of
  // the first op's) lie off what the second op reads and writes on every tile: the input rows
  // its rows read and its output rows, which the second hand-over reads. (Not whole images: v1
  // 1.0's 56 x 56 and DeepLab's 33 x 33 depthwise stages have their next stage's first image
  // over their input, but not the rows the last ones read.)
  // (Whole-image receivers may get any row of their image, not only theirs.)
  const bool whole_images = whole_image_receivers(to);
  auto apart = [&](int k) {
    std::vector<Region> written = filled;
    for (const Plan& p : s.tiles) {
      const RowRange f = first_rows(p, k);
      for (const Plan& t : to.tiles) {
        const LayerPlan& lp = t.layers[to.first];
        const int lo = whole_images ? lp.top : lp.need_top,
                  hi = whole_images ? lp.top + lp.hp : lp.need_top + lp.need_rows;
        const int ya = std::max(f.first, lo), yb = std::min(f.end, hi);
        if (ya < yb) written.push_back(rows_of(t.tile, lp, ya - lp.top, yb - lp.top));
      }
    }
    for (const Plan& p : s.tiles) {
      const LayerPlan& lp = p.layers[i];
      const int a = first_rows(p, k).end, b = lp.ob;
      if (a >= b) continue;
      // (From the first input row row a reads to one past the last row b - 1 reads, and a row
      // more for the window's overrun, inside the image.)
      const int ya = lp.need_top - lp.top + (a - lp.oa) * l.stride_h;
      const int yb =
          lp.need_top - lp.top + (b - 1 - lp.oa) * l.stride_h + (l.kh - 1) * l.dilation_h + 2;
      Region in = rows_of(p.tile, lp, ya, yb);
      in.first = std::max(in.first, lp.in_base);
      in.end = std::min(in.end, lp.in_base + lp.in_bytes());
      const OutTarget o = out_target(p, i);
      const Region used[] = {
          in,
          {p.tile, o.base + (a - lp.oa) * o.row_words * 4, o.base + (b - lp.oa) * o.row_words * 4}};
      for (const Region& w : written)
        for (const Region& u : used)
          if (w.tile == u.tile && w.first < u.end && u.first < w.end) return false;
    }
    return true;
  };
  // The second op's rows: those that hide the most ring cycles, the fewer of the first
  // hand-over's at 64 bytes a cycle and the second op's, less the cycles by which the longest
  // of the shorter bands' ops ends after the tallest bands' first op (the second op waits for
  // every tile: DeepLab's 17-row bands beside 16-row ones hid little under their last 6 rows
  // and ran slower, 11.6357 ms against 11.6259 without the form). Only where that pays for the
  // words the form adds, some 100 to 130 (1.6 to 2 KB of USB transfer, about 1.5 k cycles):
  // PoseNet's 23 x 31 pairs hide 3.0 k cycles under their last row (of 3), DeepLab's 33 x 33
  // depthwise layers 3.6 k under their last 3 (of 11), v1 1.0's 56 x 56 x 128 layer 4.0 k under
  // its last 2 (of 7); v1 0.5's 80 x 80 layer 3 (40 KB to send) ran slower with it.
  int shorter = 0;
  for (const Plan& p : s.tiles)
    if (const int n = p.layers[i].ob - p.layers[i].oa; n < tallest) shorter = std::max(shorter, n);
  int last = 0;
  int64_t hidden = 0;
  for (int k = 1; k < tallest; ++k) {
    const int64_t h = std::min((band_bytes - k * tall_rows) / 64, k * row_cycles) -
                      std::max(0, shorter - (tallest - k)) * row_cycles;
    if (h > hidden && apart(k)) hidden = h, last = k;
  }
  if (hidden < 1500) return rows;
  for (const Plan& p : s.tiles) rows.push_back(first_rows(p, last));
  return rows;
}

}  // namespace tinycoral::compiler::conv
