// How a conv chain's shapes, parameter segments, tile bands and stages follow from its layers
// (conv_plan.h).
#include "compiler/conv_plan.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <utility>

#include "common/error.h"

namespace tinycoral::compiler::conv {

namespace {

// Whether each weight i of `l` equals weight i - i % Cout + i % kColumns: every 64-channel group
// of a depthwise layer has the first one's weights. (Walked row by row of Cout weights rather
// than dividing by Cout at each: the placement search makes the shapes anew for every candidate,
// and v2's 7 x 7 pool of 1280 channels, all its 62,720 weights equal, took a twentieth of its
// compile.)
bool groups_repeat(const ConvLayer& l) {
  const size_t cout = static_cast<size_t>(l.cout), n = l.weights.size();
  for (size_t row = 0; row < n; row += cout)
    for (size_t i = row; i < std::min(row + cout, n); ++i)
      if (l.weights[i] != l.weights[row + i % static_cast<size_t>(kColumns)]) return false;
  return true;
}

}  // namespace

Shapes shapes_of(const ConvChain& chain) {
  Shapes s;
  for (const ConvLayer& l : chain.layers) {
    LayerPlan lp;
    lp.l = &l;
    lp.block = block_of(l);
    while ((l.pad_left + lp.extra) * l.cin % 4 != 0) ++lp.extra;
    lp.window_off = lp.extra * l.cin % 4;
    lp.window_words = (lp.window_off + ((lp.block - 1) * l.stride_w + l.reach_w()) * l.cin + 3) / 4;
    lp.blocks = (l.ow + lp.block - 1) / lp.block;
    lp.kwords = l.kh * lp.window_words;
    lp.groups = (l.cout + kColumns - 1) / kColumns;
    if (l.depthwise) {
      lp.dw_words = std::min(l.cin, kColumns) / 4;
      lp.kwords = l.kh * l.kw * lp.dw_words;
    }
    lp.group_ch = lp.block > 1         ? lp.block * block_cout(l)
                  : l.cout <= kColumns ? channels_stored(l, 1)
                                       : kColumns;
    lp.planes = l.bias.empty() ? 1 : 2;
    lp.cin = l.cin;
    // (One group of a pool with more taps than the dense FIFO holds: its rows read in place.)
    lp.shared_rows = l.depthwise && (lp.groups > 1 || l.kh * l.kw > kDepthwiseFifoRows);
    // (A pool's weights are all equal; any layer's groups may share theirs.)
    for (size_t i = 0; i < l.weights.size() && lp.shared_rows && lp.groups == 1; ++i)
      lp.shared_rows = l.weights[i] == l.weights[0];
    if (lp.shared_rows && lp.groups > 1) lp.shared_rows = groups_repeat(l);
    // (Not for pools the FIFO could hold, taps <= kDepthwiseFifoRows: v1 0.5's 5x5 pool freed
    // 375 rows that led the placement to a layout the simulator runs 0.013 ms slower.)
    lp.same_words = lp.shared_rows && l.cout % kColumns == 0 && l.kh * l.kw > kDepthwiseFifoRows &&
                    std::all_of(l.weights.begin(), l.weights.end(),
                                [&](auto w) { return w == l.weights.front(); });
    s.layers.push_back(lp);
  }
  return s;
}

// The parameter parts: layers in order fill segments of up to kWideUnitsLimit units; a layer that
// does not fit the rest of a segment starts the next one, and a layer larger than a whole segment
// is split by groups over as many as it needs. `group_of[i]` is layer i's group of segments (a
// new group starts a new segment), `masks[g]` the tiles that hold group g and `bases[g]` the
// wide row its segments load at (parts' rows count from wide row 0). A layer split by output
// groups over `splits[i]` tiles has one part per tile, each the first segment of its own group
// (group_of[i] + t).
void assign_segments(Shapes& s, const std::vector<int>& group_of,
                     const std::vector<uint32_t>& masks, const std::vector<int>& bases,
                     const std::vector<int>& splits, const std::vector<int>& tops) {
  s.segments.clear();
  size_t offset = 0;
  for (size_t i = 0; i < s.layers.size(); ++i) {
    LayerPlan& lp = s.layers[i];
    lp.parts.clear();
    if (lp.l->residual()) continue;  // no parameters
    const int group = group_of[i];
    // Groups [g_begin, g_end) into the segments of group `into`, below its top.
    auto place = [&](int g_begin, int g_end, int into) {
      const auto own = static_cast<size_t>(into);
      const int base = bases[own];
      const int top = tops.empty() ? kSegmentRows : tops[own];
      for (int g = g_begin; g < g_end;) {
        const int left = g_end - g;
        if (s.segments.empty() || s.segments.back().group != into ||
            (s.segments.back().rows > 0 &&
             base + s.segments.back().rows + lp.rows_of(left) > top)) {
          const bool first = s.segments.empty() || s.segments.back().group != into;
          s.segments.push_back({0, into, first, masks[own], offset, base});
        }
        Segment& seg = s.segments.back();
        int n = left;
        while (n > 1 && base + seg.rows + lp.rows_of(n) > top) --n;
        lp.parts.push_back({g, g + n, base + seg.rows, static_cast<int>(s.segments.size()) - 1});
        seg.rows += lp.rows_of(n);
        offset += static_cast<size_t>(lp.rows_of(n)) * kRowBytes;
        g += n;
      }
    };
    if (splits[i] > 1) {
      // One group of segments per tile, its groups' parts in order.
      for (int t = 0; t < splits[i]; ++t)
        place(lp.groups * t / splits[i], lp.groups * (t + 1) / splits[i], group + t);
      continue;
    }
    // Fan-out heads: each in parts of its own (its ops carry its output zero point), heads that
    // share a group in the same parts (each its own op on them).
    if (!lp.l->heads.empty()) {
      for (const auto& [g0, g1] : lp.l->head_spans()) place(g0, g1, group);
      continue;
    }
    place(0, lp.groups, group);
  }
}

std::vector<std::pair<int, int>> WideRows::free_runs(int tile) const {
  std::vector<std::pair<int, int>> taken = taken_[static_cast<size_t>(tile)], runs;
  std::sort(taken.begin(), taken.end());
  int at = 0;
  for (const auto& [a, b] : taken) {
    if (a > at) runs.push_back({at, a});
    at = std::max(at, b);
  }
  if (kSegmentRows > at) runs.push_back({at, kSegmentRows});
  return runs;
}

void own_turns(Shapes& s) {
  // The wide rows each tile's groups take turns in, then the owners' rows.
  WideRows used;
  std::vector<int> group_rows;
  bool turns = false;
  for (const Segment& seg : s.segments) {
    const auto g = static_cast<size_t>(seg.group);
    if (group_rows.size() <= g) group_rows.resize(g + 1, 0);
    group_rows[g] = std::max(group_rows[g], seg.rows);
    turns = turns || !seg.first_of_group;
  }
  if (!turns) return;
  for (const Segment& seg : s.segments)
    if (seg.first_of_group)
      for (int t = 0; t < kTiles; ++t)
        if (seg.mask & tile_bit(t))
          used.take(t, seg.base_row, seg.base_row + group_rows[static_cast<size_t>(seg.group)]);
  std::vector<bool> has_turns(group_rows.size(), false);
  for (const Segment& seg : s.segments)
    if (!seg.first_of_group) has_turns[static_cast<size_t>(seg.group)] = true;
  for (Segment& seg : s.segments) {
    if (!has_turns[static_cast<size_t>(seg.group)] || seg.rows == 0) continue;
    // The tile with the most free rows that has a run of seg.rows (its lowest such run).
    int best = -1, best_free = -1, row = 0;
    for (int t = 0; t < kTiles; ++t) {
      int found = -1, free = 0;
      for (const auto& [a, b] : used.free_runs(t)) {
        if (found < 0 && b - a >= seg.rows) found = a;
        free += b - a;
      }
      if (found >= 0 && free > best_free) {
        best = t;
        best_free = free;
        row = found;
      }
    }
    if (best < 0) continue;
    seg.owner = best;
    seg.owner_row = row;
    used.take(best, row, row + seg.rows);
  }
}

namespace {
constexpr int kFilled = kAddRows / kRowUnits;  // (the ADD fills' rows)
}  // namespace

void TakenRows::take(uint32_t mask, int a, int b) {
  for (int t = 0; t < kTiles; ++t)
    if (mask & tile_bit(t))
      for (int r = a; r < b; ++r) used[static_cast<size_t>(t)][static_cast<size_t>(r)] = true;
}

bool TakenRows::free(uint32_t mask, int a, int b) const {
  for (int t = 0; t < kTiles; ++t)
    if (mask & tile_bit(t))
      for (int r = a; r < b; ++r)
        if (used[static_cast<size_t>(t)][static_cast<size_t>(r)]) return false;
  return true;
}

TakenRows rows_taken(const Shapes& s) {
  int taps = 0;
  for (const LayerPlan& lp : s.layers)
    // (Capped: a layer with more taps than FIFO rows is refused after the layout, unsupported().)
    if (lp.dense()) taps = std::max(taps, std::min(lp.l->kh * lp.l->kw, kDepthwiseFifoRows));
  TakenRows t;
  t.used.assign(kTiles, std::vector<bool>(kFilled, false));
  t.take(0xffff, kSegmentRows, kSegmentRows + taps);
  for (const Segment& seg : s.segments) {
    t.take(seg.mask, seg.base_row, seg.base_row + seg.rows);
    if (seg.owner >= 0) t.take(tile_bit(seg.owner), seg.owner_row, seg.owner_row + seg.rows);
    t.offset += static_cast<size_t>(seg.rows) * kRowBytes;
  }
  for (const LayerPlan& lp : s.layers)
    for (const Part& part : lp.parts)
      for (const Part::Owned& run : part.owned) {
        t.take(tile_bit(run.tile), run.row, run.row + run.r1 - run.r0);
        t.offset += static_cast<size_t>(run.r1 - run.r0) * kRowBytes;
      }
  return t;
}

void cache_add_rows(Shapes& s, const std::vector<Stage>& stages) {
  // Wide rows up to the fills' rows (kAddRows): the depthwise FIFO's rows past the most taps a
  // dense depthwise layer of the chain takes are free too.
  bool joins = false;
  for (const LayerPlan& lp : s.layers) joins = joins || joined(*lp.l);
  TakenRows taken = rows_taken(s);
  size_t offset = taken.offset;
  std::vector<size_t> adds;
  for (size_t i = 0; i < s.layers.size(); ++i) {
    LayerPlan& lp = s.layers[i];
    lp.add_row = -1;
    if (!lp.l->residual()) continue;
    const auto stage = std::find_if(stages.begin(), stages.end(),
                                    [&](const Stage& st) { return st.first <= i && i < st.end; });
    if (stage == stages.end()) continue;
    lp.add_mask = tile_mask(stage->tiles);
    adds.push_back(i);
    // Free rows, the highest first (out of the way of rows placed later).
    for (int r = kFilled - kAddWeightRows; r >= 0; --r)
      if (taken.free(lp.add_mask, r, r + kAddWeightRows)) {
        taken.take(lp.add_mask, r, r + kAddWeightRows);
        lp.add_row = r;
        break;
      }
  }
  // Else the rows the fills build into (kAddRows), on tiles where no other ADD keeps its rows
  // there and no ADD left to its fills (nor a joined heads layer's ADD) builds there.
  uint32_t at_filled = joins ? 0xffff : 0;
  for (size_t i : adds) {
    LayerPlan& lp = s.layers[i];
    if (lp.add_row < 0 && (at_filled & lp.add_mask) == 0) lp.add_row = kFilled;
    if (lp.add_row == kFilled) at_filled |= lp.add_mask;
  }
  for (bool changed = true; changed;) {
    changed = false;
    uint32_t filling = 0;
    for (size_t i : adds)
      if (s.layers[i].add_row < 0) filling |= s.layers[i].add_mask;
    for (size_t i : adds) {
      LayerPlan& lp = s.layers[i];
      if (lp.add_row == kFilled && (lp.add_mask & filling) != 0) lp.add_row = -1, changed = true;
    }
  }
  for (size_t i : adds) {
    LayerPlan& lp = s.layers[i];
    if (lp.add_row < 0) continue;
    lp.add_offset = offset;
    offset += size_t{kAddWeightRows} * kRowBytes;
  }
}

// Tile `tile`'s plan of layers [first, end) computing output rows [y0, y1) of layer end - 1.
// `out_at_top`: the output goes to the next stage, so it sits at the top of narrow memory, out of
// the way of the next stage's images.
namespace {

// Whether `bare` are `shapes`' layers as bare_layers makes them.
bool bare_of(const std::vector<LayerPlan>& bare, const Shapes& shapes) {
  if (bare.size() != shapes.layers.size()) return false;
  for (size_t i = 0; i < bare.size(); ++i) {
    const LayerPlan& s = shapes.layers[i];
    if (bare[i].planned_parts != static_cast<int>(s.parts.size())) return false;
    LayerShape shape = s;
    shape.planned_parts = bare[i].planned_parts;
    if (!(shape == bare[i])) return false;
  }
  return true;
}

}  // namespace

BareLayers bare_layers(const Shapes& shapes) {
  // (The search makes stages of the same shapes by the thousand, of two or three shapes in turn:
  // a split stage's slices. Comparing them with the last few made costs less than a copy, which
  // was a tenth of DeepLab's compile.)
  constexpr size_t kKept = 4;
  thread_local std::array<BareLayers, kKept> made;
  thread_local size_t next = 0;
  for (size_t k = 0; k < kKept; ++k) {
    const BareLayers& m = made[(next + kKept - 1 - k) % kKept];  // (the last made first)
    if (m && bare_of(*m, shapes)) return m;
  }
  auto layers = std::make_shared<std::vector<LayerPlan>>();
  layers->reserve(shapes.layers.size());
  for (const LayerPlan& s : shapes.layers) {
    layers->push_back(LayerPlan{static_cast<const LayerShape&>(s)});
    layers->back().planned_parts = static_cast<int>(s.parts.size());
  }
  made[next] = layers;
  next = (next + 1) % kKept;
  return layers;
}

void PlanLayers::unshare() {
  if (!own_)
    own_ = std::make_shared<Own>();
  else if (own_.use_count() > 1)
    own_ = std::make_shared<Own>(*own_);
}

LayerPlan& PlanLayers::own(size_t i) {
  unshare();
  if (i - own_->first < own_->window.size()) return own_->window[i - own_->first];
  if (!bare_) fail("plan layers: layer ", i, " of ", own_->window.size());
  return own_->others.try_emplace(i, (*bare_)[i]).first->second;
}

size_t PlanLayers::checked(size_t i) const {
  if (i >= size()) fail("plan layers: layer ", i, " of ", size());
  return i;
}

void PlanLayers::push_back(const LayerPlan& lp) {
  if (bare_) fail("plan layers: push_back on a plan made from shapes");
  unshare();
  own_->window.push_back(lp);
}

Plan plan_of(const ConvChain& chain, const Shapes& shapes, size_t first, size_t end, int tile,
             int y0, int y1, bool out_at_top, bool full_input, const BareLayers& bare_in) {
  Plan p;
  p.tile = tile;
  p.y0 = y0;
  p.first = first;
  p.end = end;
  const BareLayers bare = bare_in ? bare_in : bare_layers(shapes);
  // The stage's layers, the plan's own (built here and handed to the plan at the end: the search
  // makes plans by the hundred thousand, and each access through PlanLayers checks whether the
  // plan owns its layers).
  std::vector<LayerPlan> window(bare->begin() + static_cast<std::ptrdiff_t>(first),
                                bare->begin() + static_cast<std::ptrdiff_t>(end));
  auto layer = [&](size_t i) -> LayerPlan& { return window[i - first]; };
  // The bands, from the stage's last layer back.
  int oa = y0, ob = y1;
  for (size_t i = end; i-- > first;) {
    const ConvLayer& l = chain.layers[i];
    LayerPlan& lp = layer(i);
    lp.oa = oa;
    lp.ob = ob;
    const int top = oa * l.stride_h - l.pad_top;
    const int bottom = (ob - 1) * l.stride_h - l.pad_top + l.reach_h();
    oa = std::max(top, 0);
    ob = std::min(bottom, l.h);
  }
  for (size_t i = first; i < end; ++i) {
    const ConvLayer& l = chain.layers[i];
    LayerPlan& lp = layer(i);
    lp.top = lp.oa * l.stride_h - l.pad_top;
    lp.hp = (lp.ob - 1) * l.stride_h - l.pad_top + l.reach_h() - lp.top;
    lp.need_top = lp.top;
    lp.need_rows = lp.hp;
    if (i == first && full_input) {
      lp.full = true;
      lp.top = -l.pad_top;
      lp.hp = std::max((l.oh - 1) * l.stride_h + l.reach_h(), l.h + l.pad_top);
    }
    // Rows 4 bytes past whole 8-byte units travel two to a packet (one tile): the first image
    // then keeps every row, also those no output reads (VALID), so that the pairs stay whole.
    if (i == 0 && l.w * l.cin % 8 != 0) lp.hp = std::max(lp.hp, l.h - lp.top);
    // Wide enough for the image, the extra pixels and the last block's window.
    const int window_end = lp.extra * l.cin - lp.window_off +
                           (lp.blocks - 1) * lp.block * l.stride_w * l.cin + 4 * lp.window_words;
    lp.wp = std::max(lp.extra + l.w + l.pad_left, (window_end + l.cin - 1) / l.cin);
    // Room for the partial last block of the layer before (its surplus pixels, refilled with
    // the zero point after its op, surplus_fill, or after the hand-over into a stage that starts
    // here, hand_over_surplus_fill).
    if (i > 0) {
      const LayerPlan& before = i > first ? layer(i - 1) : (*bare)[i - 1];
      lp.wp = std::max(lp.wp, lp.extra + l.pad_left + l.w + surplus_pixels(before));
    }
    while (lp.wp * l.cin % 4 != 0) ++lp.wp;
    if (l.residual() && static_cast<size_t>(l.residual_of) >= first) {
      // A residual ADD's image takes its operand's geometry (the padded input of a 3x3 layer
      // in a ResNet block): one row pitch and one interior column for both, so the op reads
      // them with one offset.
      const LayerPlan& xp = layer(static_cast<size_t>(l.residual_of));
      lp.extra = xp.extra + xp.l->pad_left;
      lp.wp = xp.wp;
    }
  }
  // Two regions take turns: layer i reads its image from region i % 2 and writes the next one
  // into the other, which held image i - 1 (read by then); the images are filled just in time
  // (execution_program).
  // An image a residual ADD of the stage reads later is kept in one of two more regions (taking
  // turns, one per residual) until the ADD has run.
  std::vector<int> kept(bare->size(), -1);
  int kept_count = 0;
  for (size_t i = first; i < end; ++i) {
    const ConvLayer& l = chain.layers[i];
    if (l.residual() && static_cast<size_t>(l.residual_of) >= first)
      kept[static_cast<size_t>(l.residual_of)] = 2 + kept_count++ % 2;
  }
  auto region_of = [&](size_t i) {
    return kept[i] >= 0 ? kept[i] : static_cast<int>((i - first) % 2);
  };
  int region[4] = {0, 0, 0, 0};
  for (size_t i = first; i < end; ++i)
    region[region_of(i)] = std::max(region[region_of(i)], round_up(layer(i).in_bytes(), 64));
  const int region_base[4] = {0, region[0], region[0] + region[1],
                              region[0] + region[1] + region[2]};
  for (size_t i = first; i < end; ++i) layer(i).in_base = region_base[region_of(i)];
  p.regions_end = region_base[3] + region[3];
  p.add_scratch = p.regions_end;
  bool adds = false;
  for (size_t i = first; i < end; ++i) adds = adds || chain.layers[i].residual();
  if (adds) p.regions_end += 64;
  for (size_t i = first; i < end; ++i)
    if (joined(chain.layers[i])) {
      const LayerPlan& lp = layer(i);
      p.join_base = round_up(p.regions_end, 64);
      p.regions_end = p.join_base + round_up((lp.ob - lp.oa) * lp.blocks * join_pitch(*lp.l), 64) +
                      kJoinProducts + kJoinAux;
    }
  const LayerPlan& last = layer(end - 1);
  // (Joined heads in blocks of pixels: the last join writes each pixel's channels, packed.)
  p.out_ch = !joined(*last.l) ? channels_stored(*last.l, last.block)
             : last.block > 1 ? last.l->heads.front().cout
                              : join_slot(*last.l);
  p.out_row = last.blocks * last.block * p.out_ch;
  p.out_bytes = round_up((last.ob - last.oa) * p.out_row, 8);
  p.out_base = out_at_top ? kNarrowBytes - round_up(p.out_bytes, 64) - 64 : p.regions_end;
  p.narrow_end = out_at_top ? kNarrowBytes : round_up(p.regions_end + p.out_bytes, 8) + 64;
  p.out_at_top = out_at_top;
  p.layers = PlanLayers(bare, first, std::move(window));
  return p;
}

namespace {

// Stage s's plan on `tile`, or none.
const Plan* plan_on(const Stage& s, int tile) {
  for (const Plan& p : s.tiles)
    if (p.tile == tile) return &p;
  return nullptr;
}

// How stage b can take its first image from stage a in place (write_in_place).
enum class InPlace {
  kNo,
  // The same tiles and output groups, and each tile's rows of stage a's last layer among the rows
  // its band of stage b reads (the same bands, or PoseNet's front stages, whose bands nearly line
  // up: a stride-2 layer's band reading one row of the next tile's).
  kEveryTile,
  // Both split by output groups, b's first layer a split depthwise one (each tile reads only its
  // groups' channels), and some tiles only on one side: those in both compute the same groups and
  // write them in place; a tile only in a sends its groups over the ring to the tile only in b
  // that computes them (v2's 7 x 7 x 960 pairs, the 1x1 layer on tiles 0-14 and the depthwise
  // one on 0-13 and 15: one transfer instead of 15).
  kSharedTiles,
};

// Whether tile p of stage a can write its last layer's rows into tile q's first image of b.
bool writes_into(const Plan& p, const Plan& q) {
  const LayerPlan& last = p.layers[p.end - 1];
  const LayerPlan& lp = q.layers[q.first];
  // (A pixel band writes parts of its first and last rows: its hand-over sends just its pixels.)
  if (p.g0 != q.g0 || p.g1 != q.g1 || !p.out_at_top || !q.out_at_top || lp.kept || p.pixel_band() ||
      last.block != 1 || surplus_pixels(last) != 0 || joined(*last.l) || !last.l->heads.empty() ||
      lp.cin != p.out_ch || lp.extra != 0 || lp.need_top > last.oa ||
      lp.need_top + lp.need_rows < last.ob)
    return false;
  // (Other bands than stage a's and a stage b of several layers are fine; either stage in
  // rounds only where neither is split by output groups.)
  return (p.g1 == 0 && q.g1 == 0) || (p.rounds == 1 && q.rounds == 1);
}

InPlace in_place(const ConvChain& chain, const Stage& a, const Stage& b) {
  if (b.first != a.end) return InPlace::kNo;
  // (Nor where a residual ADD's operand crosses into or out of stage b: the hand-over that keeps
  // it reads the sender's output, and its walk is not the halo's.)
  for (size_t i = b.first; i < chain.layers.size(); ++i) {
    const ConvLayer& l = chain.layers[i];
    if (i < b.end && (joined(l) || (l.residual() && static_cast<size_t>(l.residual_of) < b.first)))
      return InPlace::kNo;
    if (i >= b.end && l.residual_of == static_cast<int>(b.first)) return InPlace::kNo;
  }
  if (a.tiles.size() == b.tiles.size()) {
    bool every = true;
    for (size_t k = 0; k < a.tiles.size() && every; ++k)
      every = a.tiles[k].tile == b.tiles[k].tile && writes_into(a.tiles[k], b.tiles[k]);
    if (every) return InPlace::kEveryTile;
  }
  // (Each tile computing its groups on the whole map: with row bands the shared tiles' halo rows
  // went one a transfer, where the sets of tiles took them in gathers before, and the senders'
  // ops split by where they write: v2's 14 x 14 x 576 pair, 1.6 KB more instructions.)
  auto whole = [](const LayerPlan& lp) { return lp.oa == 0 && lp.ob == lp.l->oh; };
  auto split = [&](const Plan& p) {
    return p.g1 > 0 && p.rounds == 1 && whole(p.layers[p.first]) && whole(p.layers[p.end - 1]);
  };
  size_t shared = 0;
  for (const Plan& q : b.tiles) {
    const LayerPlan& lp = q.layers[q.first];
    if (!split(q) || !q.out_at_top || lp.cin == lp.l->cin || lp.kept) return InPlace::kNo;
    if (const Plan* p = plan_on(a, q.tile)) {
      if (!writes_into(*p, q)) return InPlace::kNo;
      ++shared;
      continue;
    }
    // (A tile only in b: one only in a computes its groups.)
    if (std::none_of(a.tiles.begin(), a.tiles.end(), [&](const Plan& p) {
          return split(p) && !plan_on(b, p.tile) && p.g0 == q.g0 && p.g1 == q.g1;
        }))
      return InPlace::kNo;
  }
  for (const Plan& p : a.tiles)
    if (!split(p)) return InPlace::kNo;
  return shared > 0 ? InPlace::kSharedTiles : InPlace::kNo;
}

// Where stage s's output waits on `tile` (the top of narrow memory where it has no plan there).
int out_base_on(const Stage& s, int tile) {
  const Plan* p = plan_on(s, tile);
  return p ? p->out_base : kNarrowBytes;
}

// Stage a's tile p writes its last layer's rows into stage b's first image on its tile, q, where
// it now lies.
void link(Plan& p, const Plan& q) {
  const LayerPlan& lp = q.layers[q.first];
  p.into_base = lp.pixel(std::as_const(p.layers)[p.end - 1].oa - lp.top, lp.l->pad_left);
  p.into_row_words = lp.row_words();
}

void link(Stage& a, const Stage& b, size_t t) { link(a.tiles[t], b.tiles[t]); }

// The end of stage b's images but its first on tile t (its rounds' regions), which the first
// image moved by write_in_place must stay above.
int other_images_end(const Stage& b, size_t t) {
  const Plan& q = b.tiles[t];
  if (q.rounds > 1) return q.regions_end;
  int end = 0;
  for (size_t i = b.first + 1; i < b.end; ++i)
    end = std::max(end, q.layers[i].in_base + q.layers[i].in_bytes());
  return end;
}

// Where stage b's first image fits nowhere beside stage a's images (PoseNet's 89 x 121 x 96 map
// between layers 5-6 in rounds and layers 7-8): it lies over stage a's first image, whose rows
// each round has read before its last layer writes the rows of b's (Stage::over_input). Needs
// a in rounds, both images of one row pitch, padding and zero point (so that the padding
// columns a's image was filled with serve b's too), b's image at its planned place, and each
// round's rows written only where the rounds after it read nothing; a tile's first image moves up
// where that needs it. Returns whether it did.
bool over_input(const ConvChain& chain, const Shapes& shapes, std::vector<Stage>& stages,
                size_t k) {
  Stage& a = stages[k];
  Stage& b = stages[k + 1];
  const int rounds = a.tiles.front().rounds;
  if (rounds < 2 || a.halo_in) return false;
  std::vector<int> shift(a.tiles.size(), 0);
  for (size_t t = 0; t < a.tiles.size(); ++t) {
    const Plan& p = a.tiles[t];
    const LayerPlan& f = p.layers[p.first];
    const LayerPlan& lp = std::as_const(b.tiles[t].layers)[b.first];
    const int pitch = f.wp * f.cin;
    // (The same columns: b's rows land on a's at a whole number of rows, padding on padding.)
    if (f.wp != lp.wp || f.cin != lp.cin || f.extra != lp.extra || lp.full || f.l->w != lp.l->w ||
        f.l->pad_left != lp.l->pad_left || f.l->in_zp != lp.l->in_zp || lp.in_base < 0 ||
        (lp.in_base - f.in_base) % pitch != 0)
      return false;
    // Rounds 0..r-2 write rows [ya, yb) of b's; round r + 1 reads a's first image from its top on.
    for (int r = 0; r + 1 < rounds; ++r) {
      const Plan next = round_plan(chain, shapes, p, r + 1);
      const int written_end = lp.in_base + (next.layers[p.end - 1].oa - lp.top) * pitch;
      const int read_from = f.in_base + (next.layers[p.first].top - f.top) * pitch;
      shift[t] = std::max(shift[t], round_up(written_end - read_from, 4));
    }
    // (Below the output of the stage before a, handed over into it.)
    if (lp.in_base + lp.in_bytes() > p.round_base + shift[t] ||
        f.in_base + shift[t] + f.in_bytes() > out_base_on(stages[k - 1], p.tile) ||
        p.regions_end + shift[t] > std::min(kNarrowBytes - 64, p.out_base))
      return false;
  }
  for (size_t t = 0; t < a.tiles.size(); ++t) {
    Plan& p = a.tiles[t];
    p.layers[p.first].in_base += shift[t];
    p.round_base += shift[t];
    p.regions_end += shift[t];
    p.add_scratch = p.regions_end;
    link(a, b, t);
  }
  b.halo_in = true;
  b.over_input = true;
  return true;
}

}  // namespace

void write_in_place(const ConvChain& chain, const Shapes& shapes, std::vector<Stage>& stages,
                    bool from_first) {
  // Narrow bytes the image must stay off on each tile: a residual ADD's kept operand
  // (keep_operands), live from the hand-over into the operand's stage (at the end of the stage
  // before it) to the ADD's stage; an image dead before that hand-over or filled after the ADD
  // may lie over it.
  struct Taken {
    int lo, hi;
    size_t from, to;  // stages
  };
  std::vector<std::vector<Taken>> taken(kTiles);
  bool residuals = false;
  for (const ConvLayer& l : chain.layers) residuals = residuals || l.residual();
  for (size_t sb = 0; sb < stages.size(); ++sb)
    for (const Plan& t : stages[sb].tiles)
      for (size_t j = 0; j < t.layers.size(); ++j) {
        const LayerPlan& lp = t.layers[j];
        if (!lp.kept) continue;
        size_t sa = 0;
        while (sa + 1 < stages.size() && j >= stages[sa].end) ++sa;
        taken[static_cast<size_t>(t.tile)].push_back(
            {lp.in_base, lp.in_base + lp.in_bytes(), sa > 0 ? sa - 1 : 0, sb});
      }
  // (Out of the first stage only where asked and the host's image is not staged
  // (ConvChain::repack_w): a staging may lie where the image would move. A staging whose pixels
  // the repack widens may: the image of the stage after is filled after the repack.)
  for (size_t k = from_first && (chain.repack_w == 0 || chain.repack_cin > 0) ? 0 : 1;
       k + 1 < stages.size(); ++k) {
    Stage& a = stages[k];
    Stage& b = stages[k + 1];
    const InPlace how = in_place(chain, a, b);
    if (how == InPlace::kNo) continue;
    // One address on every tile: above stage a's images, below the output of the stage before a
    // (still to be handed over when the image is filled) and stage b's own.
    // Where that does not fit, above the output of the stage before a too, filled once the
    // hand-over into a has read it (Stage::fill_late).
    // (In chains with residual ADDs, where that does not fit, right above stage a's images when
    // clear of stage b's other images and its ADD's scratch words, which stay where planned.)
    // (Stage b's tiles, which are stage a's but where only some are shared: a tile only in b
    // holds none of a's images, one only in a none of b's.)
    int base = 0, low = 0, top = kNarrowBytes, late_top = kNarrowBytes;
    for (size_t t = 0; t < b.tiles.size(); ++t) {
      if (const Plan* p = plan_on(a, b.tiles[t].tile))
        low = std::max(low, round_up(p->regions_end, 64));
      base = std::max({base, low, round_up(other_images_end(b, t), 64)});
      top = std::min(top, b.tiles[t].out_base);
      late_top = std::min(late_top, b.tiles[t].out_base);
      if (k > 0) top = std::min(top, out_base_on(stages[k - 1], b.tiles[t].tile));
    }
    // (The whole image where it fits, else each tile's band of it: its own rows and the halo.)
    int image = 0, band = 0;
    for (const Plan& q : b.tiles) {
      const LayerPlan& lp = q.layers[b.first];
      image = std::max(image, round_up(lp.in_bytes(), 64));
      band = std::max(band, round_up(round_up(lp.need_rows * lp.wp * lp.cin, 4), 64));
    }
    bool adds = false, operand = false;  // (an ADD in b; one reading b's first image)
    for (size_t i = b.first + 1; i < b.end; ++i) {
      adds = adds || chain.layers[i].residual();
      operand = operand || chain.layers[i].residual_of == static_cast<int>(b.first);
    }
    auto clear = [&](int at, int bytes) {
      auto off = [&](int lo, int hi) { return hi <= at || at + bytes <= lo; };
      for (const Plan& q : b.tiles) {
        // (Stage b's image lives from stage a's fill (counted from the stage before a: fills
        // may go early) to stage b's first op, which ends before the hand-over after b starts
        // where b has more layers.)
        for (const Taken& x : taken[static_cast<size_t>(q.tile)])
          if ((x.from < k + 1 || (x.from == k + 1 && b.end == b.first + 1)) && x.to + 1 >= k &&
              !off(x.lo, x.hi))
            return false;
        for (size_t i = b.first + 1; residuals && i < b.end; ++i)
          if (!off(q.layers[i].in_base, q.layers[i].in_base + q.layers[i].in_bytes())) return false;
        if (adds && !off(q.add_scratch, q.add_scratch + 64)) return false;
      }
      return true;
    };
    auto fits = [&](int bytes) { return base + bytes <= top && clear(base, bytes); };
    // (The whole image, or its bands where no ADD of b reads it whole.)
    auto placed = [&] { return fits(image) || (!operand && fits(band)); };
    bool late = false;
    if (!placed()) {
      if (!residuals) {
        top = late_top;
        late = true;
      } else if (std::all_of(b.tiles.begin(), b.tiles.end(),
                             [](const Plan& q) { return q.rounds == 1; })) {
        // (Not under a stage in rounds: `clear` knows the band's images, not its rounds'.)
        base = low;
      }
    }
    if (!placed()) {
      if (!residuals && how == InPlace::kEveryTile) over_input(chain, shapes, stages, k);
      continue;
    }
    if (!fits(image)) {
      for (Plan& q : b.tiles) {
        LayerPlan& lp = q.layers[b.first];
        lp.full = false;
        lp.top = lp.need_top;
        lp.hp = lp.need_rows;
      }
    }
    for (Plan& q : b.tiles) {
      LayerPlan& lp = q.layers[q.first];
      lp.in_base = base;
      q.regions_end = std::max(q.regions_end, round_up(base + lp.in_bytes(), 64));
      if (!adds) q.add_scratch = q.regions_end;
    }
    for (Plan& p : a.tiles)
      if (const Plan* q = plan_on(b, p.tile)) link(p, *q);
    b.halo_in = true;
    b.fill_late = late;
  }
}

void slice_plan(Plan& p, int g0, int g1) {
  // (Read through the const layers: `p` is often a copy sharing them, PlanLayers.)
  const LayerPlan& last = std::as_const(p.layers)[p.end - 1];
  p.g0 = g0;
  p.g1 = g1;
  // (The last slice of a layer whose channels end inside a group holds only the channels left.)
  p.out_ch = std::min(g1 * kColumns, channels_stored(*last.l, last.block)) - g0 * kColumns;
  p.out_row = last.blocks * last.block * p.out_ch;
  p.out_bytes = round_up((last.ob - last.oa) * p.out_row, 8);
  if (p.out_at_top) p.out_base = kNarrowBytes - round_up(p.out_bytes, 64) - 64;
}

bool splittable(const LayerPlan& lp, int n, bool three) {
  const ConvLayer& l = *lp.l;
  if (n < 2 || n > kTiles || l.residual() || joined(l) || lp.block != 1 || l.cout % 4 != 0 ||
      lp.groups % n != 0)
    return false;
  const int per_tile = lp.groups / n;  // 64 bytes of each pixel per group
  // (Channels ending inside a group, MobileNet v2's 96 and 160: the last slice holds the rest,
  // which must also be whole pixels per packet or whole packets per pixel.)
  const int last = l.cout - (lp.groups - per_tile) * kColumns;
  // (Three groups a slice, 192 bytes of each pixel, where asked: four pixels' slices make three
  // whole packets, and the hand-overs' walks write a slice's pixels across packet boundaries.)
  if (three && per_tile == 3 && last == 3 * kColumns) return true;
  return (4 % per_tile == 0 || per_tile % 4 == 0) && (kPiece % last == 0 || last % kPiece == 0);
}

bool pairs_with_depthwise(const ConvChain& chain, size_t i) {
  if (i + 1 >= chain.layers.size()) return false;
  const ConvLayer& l = chain.layers[i];
  const ConvLayer& d = chain.layers[i + 1];
  return !l.depthwise && !l.residual() && !joined(l) && l.heads.empty() && d.depthwise &&
         !d.residual() && d.heads.empty() && d.cin == l.cout;
}

Stage split_stage(const ConvChain& chain, const Shapes& shapes, size_t i, int n, int tile0,
                  int bands, size_t end, bool pixels) {
  if (end <= i) end = i + 1;
  Shapes sliced = shapes;
  const int groups = shapes.layers[i].groups;
  for (size_t j = i; j < end; ++j)
    if (shapes.layers[j].l->depthwise) sliced.layers[j].cin = groups / n * kColumns;
  Stage s = stage_of(chain, sliced, i, end, 0, bands, pixels);
  const std::vector<Plan> band = std::move(s.tiles);
  s.tiles.clear();
  for (int t = 0; t < n; ++t)
    for (size_t b = 0; b < band.size(); ++b) {
      Plan p = band[b];
      p.tile = tile0 + t * static_cast<int>(band.size()) + static_cast<int>(b);
      slice_plan(p, groups * t / n, groups * (t + 1) / n);
      s.tiles.push_back(std::move(p));
    }
  return s;
}

Plan round_plan(const ConvChain& chain, const Shapes& shapes, const Plan& p, int k,
                const BareLayers& bare) {
  const LayerPlan& last = p.layers[p.end - 1];
  const int rows = last.ob - last.oa;
  const int ya = last.oa + rows * k / p.rounds, yb = last.oa + rows * (k + 1) / p.rounds;
  Plan q = plan_of(chain, shapes, p.first, p.end, p.tile, ya, yb, p.out_at_top, false, bare);
  // The first image: rows of the band's, where the hand-over (or the host) put them.
  const LayerPlan& f = p.layers[p.first];
  LayerPlan& qf = q.layers[p.first];
  qf.in_base = f.in_base + (qf.top - f.top) * f.wp * f.cin;
  // The other images in two regions taking turns from round_base on.
  int region[2] = {0, 0};
  for (size_t i = p.first + 1; i < p.end; ++i)
    region[(i - p.first) % 2] =
        std::max(region[(i - p.first) % 2], round_up(q.layers[i].in_bytes(), 64));
  for (size_t i = p.first + 1; i < p.end; ++i)
    q.layers[i].in_base = p.round_base + ((i - p.first) % 2 == 1 ? 0 : region[1]);
  q.regions_end = p.round_base + region[0] + region[1];
  q.add_scratch = q.regions_end;
  for (size_t i = p.first; i < p.end; ++i)
    if (chain.layers[i].residual()) {
      q.regions_end += 64;  // (the ADD's scratch words)
      break;
    }
  // The output: the band's, at this round's rows.
  q.y0 = p.y0;
  q.out_base = p.out_base + (ya - last.oa) * p.out_row;
  if (p.into_base >= 0) {
    q.into_base = p.into_base + (ya - last.oa) * p.into_row_words * 4;
    q.into_row_words = p.into_row_words;
  }
  q.narrow_end = p.narrow_end;
  return q;
}

namespace {

// `p` (a band's plan) in `rounds` rounds: the band's first image, then room for the largest
// round's other images, then (unless it waits at the top) the output. False when the rounds
// cannot help: a stage of one layer, residual ADDs, fewer rows than rounds. `bare`:
// bare_layers(shapes).
bool in_rounds(const ConvChain& chain, const Shapes& shapes, Plan& p, int rounds,
               const BareLayers& bare) {
  const LayerPlan& last = std::as_const(p.layers)[p.end - 1];
  if (p.end - p.first < 2 || last.ob - last.oa < rounds || p.g1 > 0) return false;
  for (size_t i = p.first; i < p.end; ++i) {
    const ConvLayer& l = chain.layers[i];
    if ((l.residual() && static_cast<size_t>(l.residual_of) != p.first) || joined(l)) return false;
  }
  p.rounds = rounds;
  // (The first image from byte 0: plan_of put it after the other regions when a residual ADD of
  // the stage reads it, but in rounds those regions are the round's, after it.)
  p.layers[p.first].in_base = 0;
  p.round_base = round_up(p.layers[p.first].in_base + p.layers[p.first].in_bytes(), 64);
  int end = p.round_base;
  for (int k = 0; k < rounds; ++k)
    end = std::max(end, round_plan(chain, shapes, p, k, bare).regions_end);
  p.regions_end = p.add_scratch = end;
  if (!p.out_at_top) {
    p.out_base = p.regions_end;
    p.narrow_end = round_up(p.regions_end + p.out_bytes, 8) + 64;
  }
  return true;
}

// Whether a stage from layer `first` may keep its whole first image on every tile: not when the
// first layer is a residual ADD or its image is one's operand (kept images take their operand's
// geometry, the band's).
bool may_keep_full_input(const ConvChain& chain, size_t first) {
  if (chain.layers[first].residual()) return false;
  for (const ConvLayer& l : chain.layers)
    if (l.residual() && static_cast<size_t>(l.residual_of) == first) return false;
  return true;
}

}  // namespace

bool pixel_stage(const ConvChain& chain, const Shapes& shapes, size_t first, size_t end) {
  if (first == 0 || end >= chain.layers.size()) return false;
  for (size_t i = first; i < end; ++i) {
    const ConvLayer& l = chain.layers[i];
    const LayerPlan& lp = shapes.layers[i];
    if (l.depthwise || l.residual() || joined(l) || !l.heads.empty() || l.kh != 1 || l.kw != 1 ||
        l.stride_h != 1 || l.stride_w != 1 || l.pad_top != 0 || l.pad_left != 0 || lp.block != 1 ||
        lp.extra != 0 || l.cin % 4 != 0 || l.cout % 4 != 0 || l.oh != l.h || l.ow != l.w)
      return false;
  }
  return true;
}

// Tiles of a stage: its last layer's output rows split as evenly as possible over up to
// `max_tiles` tiles from `tile0` on (one tile when the host's rows must travel two to a packet).
Stage stage_of(const ConvChain& chain, const Shapes& shapes, size_t first, size_t end, int tile0,
               int max_tiles, bool pixels) {
  const BareLayers bare = bare_layers(shapes);  // (one for all the stage's plans)
  if (pixels && pixel_stage(chain, shapes, first, end)) {
    // Pixel bands: rows as the pixels touch them, no rounds (plan_of's images are gapless: no
    // padding, no extra pixels, no window overrun for a 1x1 layer).
    const ConvLayer& l = chain.layers[end - 1];
    const int n = l.oh * l.ow, count = std::min(max_tiles, n);
    Stage s;
    s.first = first;
    s.end = end;
    for (int pass = count > 1 && may_keep_full_input(chain, first) ? 0 : 1; pass < 2; ++pass) {
      s.tiles.clear();
      for (int t = 0; t < count; ++t) {
        const int pa = n * t / count, pb = n * (t + 1) / count;
        Plan p = plan_of(chain, shapes, first, end, tile0 + t, pa / l.ow, (pb + l.ow - 1) / l.ow,
                         true, pass == 0, bare);
        p.pa = pa;
        p.pb = pb;
        s.tiles.push_back(std::move(p));
      }
      bool fits = true;
      for (const Plan& t : s.tiles)
        fits = fits && t.narrow_end <= kNarrowBytes && t.regions_end <= t.out_base;
      if (fits) break;
    }
    // (Rows with room past their pixels, a layer before ending on a partial block: row bands.)
    bool gapless = true;
    for (const Plan& t : s.tiles)
      for (size_t i = first; i < end; ++i) gapless = gapless && t.layers[i].wp == t.layers[i].l->w;
    if (gapless) return s;
  }
  const int oh = chain.layers[end - 1].oh;
  const ConvLayer& l0 = chain.layers[first];
  const int count = first == 0 && l0.w * l0.cin % 8 != 0 ? 1 : std::min(max_tiles, oh);
  Stage s;
  s.first = first;
  s.end = end;
  const bool last = end == chain.layers.size();
  // Every tile keeps the whole first image when it fits.
  for (int pass = count > 1 && may_keep_full_input(chain, first) ? 0 : 1; pass < 2; ++pass) {
    s.tiles.clear();
    for (int t = 0; t < count; ++t)
      s.tiles.push_back(plan_of(chain, shapes, first, end, tile0 + t, oh * t / count,
                                oh * (t + 1) / count, !last, pass == 0, bare));
    bool fits = true;
    for (const Plan& t : s.tiles)
      fits = fits && t.narrow_end <= kNarrowBytes && t.regions_end <= t.out_base;
    if (fits) return s;
  }
  // Too large at once: each band in rounds (Plan::rounds), as few as fit.
  for (int rounds = 2; rounds <= 8; ++rounds) {
    std::vector<Plan> tiles = s.tiles;
    bool fits = true;
    for (Plan& t : tiles)
      fits = fits && in_rounds(chain, shapes, t, rounds, bare) && t.narrow_end <= kNarrowBytes &&
             t.regions_end <= t.out_base;
    if (!fits) continue;
    s.tiles = std::move(tiles);
    break;
  }
  return s;
}

bool stage_allowed(const ConvChain& chain, size_t a, size_t b) {
  for (size_t i = b; i < chain.layers.size(); ++i) {
    const ConvLayer& add = chain.layers[i];
    if (!add.residual()) continue;
    const auto j = static_cast<size_t>(add.residual_of);
    if (j < a || j >= b) continue;
    const ConvLayer& x = chain.layers[j];
    if (j != a || j == 0 || x.pad_top != 0 || x.pad_left != 0 || x.kh != 1 || x.kw != 1)
      return false;
  }
  return true;
}

namespace {

// Whether a plan's images (from the lowest to regions_end: its ADD scratch and joined heads'
// words too; without its first image where `first_too` is false) or its output touch narrow
// bytes [lo, hi).
bool plan_overlaps(const Plan& p, int lo, int hi, bool first_too) {
  auto meets = [&](int a, int b) { return a < hi && lo < b; };
  int low = p.regions_end;
  for (size_t i = first_too ? p.first : p.first + 1; i < p.end; ++i)
    low = std::min(low, p.layers[i].in_base);
  if (p.rounds > 1) low = std::min(low, p.round_base);
  return meets(low, p.regions_end) || meets(p.out_base, p.out_base + p.out_bytes);
}

// Stage s's images moved up by `d` bytes on every tile (its output too where it does not wait at
// the top).
void shift_stage(Stage& s, int d) {
  for (Plan& p : s.tiles) {
    for (size_t i = p.first; i < p.end; ++i) p.layers[i].in_base += d;
    p.regions_end += d;
    p.add_scratch += d;
    if (p.join_base > 0) p.join_base += d;
    if (!p.out_at_top) {
      p.out_base += d;
      p.narrow_end += d;
    }
  }
}

// ADD i's operand j, the first image of stage sa, read in place on the tiles of the ADD's stage
// sb that hold all of it in sa's geometry (an all-gathered image: v2's 7 x 7 blocks, whose
// expansions split by output groups each read the whole image) where nothing from the
// hand-over into sa to the ADD writes over the ADD's rows of it: the stages after sa whose images
// would, moved up above it on all their tiles where they still fit. Those tiles' plans of the ADD
// get the copy as their kept image (LayerPlan::in_place). False, and the stages unchanged, when
// some tile cannot: the operand then travels again (the caller places it).
bool keep_in_place(const ConvChain& chain, std::vector<Stage>& stages, size_t i, size_t sa,
                   size_t sb) {
  const auto j = static_cast<size_t>(chain.layers[i].residual_of);
  // (No other ADD's operand live across these stages: its kept image sits above their images.)
  for (size_t k = 0; k < chain.layers.size(); ++k)
    if (k != i && chain.layers[k].residual() &&
        static_cast<size_t>(chain.layers[k].residual_of) < stages[sb].end && k >= stages[sa].first)
      return false;
  struct Need {
    int tile, lo, hi;
  };
  std::vector<Need> need;
  for (const Plan& t : stages[sb].tiles) {
    const Plan* src = plan_on(stages[sa], t.tile);
    if (!src || src->rounds > 1) return false;
    const LayerPlan &a = t.layers[i], &x = src->layers[j];
    if (x.cin != a.cin || x.wp != a.wp || x.extra != a.extra || x.slide != 0 || x.full ||
        a.oa < x.top || a.ob > x.top + x.hp)
      return false;
    const int lo = x.in_base + (a.oa - x.top) * x.wp * x.cin,
              hi = x.in_base + (a.ob - x.top) * x.wp * x.cin;
    if (plan_overlaps(*src, lo, hi, false)) return false;
    need.push_back({t.tile, lo, hi});
  }
  const std::vector<Stage> saved(stages.begin() + static_cast<std::ptrdiff_t>(sa),
                                 stages.begin() + static_cast<std::ptrdiff_t>(sb) + 1);
  auto restore = [&] {
    std::copy(saved.begin(), saved.end(), stages.begin() + static_cast<std::ptrdiff_t>(sa));
    return false;
  };
  for (size_t c = sa + 1; c <= sb; ++c) {
    int top = 0;
    bool hit = false;
    for (const Need& n : need)
      if (const Plan* p = plan_on(stages[c], n.tile)) {
        hit = hit || plan_overlaps(*p, n.lo, n.hi, true);
        top = std::max(top, n.hi);
      }
    if (!hit) continue;
    int low = kNarrowBytes;
    for (const Plan& p : stages[c].tiles)
      for (size_t k = p.first; k < p.end; ++k) low = std::min(low, p.layers[k].in_base);
    if (stages[c].tiles.front().rounds > 1 || stages[c].tiles.front().into_base >= 0 ||
        stages[c].halo_in)
      return restore();
    shift_stage(stages[c], round_up(std::max(0, top - low), 64));
    for (const Need& n : need)
      if (const Plan* p = plan_on(stages[c], n.tile); p && plan_overlaps(*p, n.lo, n.hi, true))
        return restore();
    if (!stage_fits(stages[c], &stages[c - 1]) ||
        (c + 1 < stages.size() && !stage_fits(stages[c + 1], &stages[c])))
      return restore();
  }
  for (Plan& t : stages[sb].tiles) {
    LayerPlan x = plan_on(stages[sa], t.tile)->layers[j];
    x.kept = x.in_place = true;
    t.layers[j] = x;
  }
  return true;
}

}  // namespace

bool operand_in_place(const ConvChain& chain, std::vector<Stage>& stages, size_t i) {
  auto stage_index = [&](size_t k) {
    size_t s = 0;
    while (s + 1 < stages.size() && k >= stages[s].end) ++s;
    return s;
  };
  const size_t sa = stage_index(static_cast<size_t>(chain.layers[i].residual_of)),
               sb = stage_index(i);
  return sa != sb && stages[sa].first == static_cast<size_t>(chain.layers[i].residual_of) &&
         keep_in_place(chain, stages, i, sa, sb);
}

bool keep_operands(const ConvChain& chain, std::vector<Stage>& stages) {
  auto stage_index = [&](size_t i) {
    size_t k = 0;
    while (k + 1 < stages.size() && i >= stages[k].end) ++k;
    return k;
  };
  for (size_t i = 0; i < chain.layers.size(); ++i) {
    if (!chain.layers[i].residual()) continue;
    const auto j = static_cast<size_t>(chain.layers[i].residual_of);
    const size_t sa = stage_index(j), sb = stage_index(i);
    if (sa == sb) continue;
    if (sa == 0 || stages[sa].first != j || !stage_allowed(chain, stages[sa].first, stages[sa].end))
      return false;
    for (Plan& t : stages[sb].tiles) {
      const LayerPlan& a = t.layers[i];
      // Free narrow memory on this tile from the hand-over into stage sa to the ADD: above the
      // images of stages sa..sb, below the outputs of stages sa - 1..sb waiting at the top.
      int lo = t.out_at_top ? t.regions_end : t.narrow_end,
          hi = t.out_at_top ? t.out_base : kNarrowBytes;
      for (size_t c = sa - 1; c < sb; ++c)
        for (const Plan& o : stages[c].tiles) {
          if (o.tile != t.tile) continue;
          if (c >= sa) lo = std::max(lo, o.regions_end);
          hi = std::min(hi, o.out_at_top ? o.out_base : kNarrowBytes);
          if (!o.out_at_top) lo = std::max(lo, o.narrow_end);
        }
      LayerPlan x = a;
      x.kept = true;
      x.full = false;
      x.top = x.need_top = a.oa;
      x.hp = x.need_rows = a.ob - a.oa;
      x.in_base = round_up(lo, 64);
      if (x.in_base + round_up(x.in_bytes(), 64) > hi) return false;
      if (!t.out_at_top) t.narrow_end = std::max(t.narrow_end, x.in_base + x.in_bytes());
      t.layers[j] = x;
    }
  }
  return true;
}

bool nests(const Stage& from, const Stage& to) {
  for (const Plan& t : to.tiles) {
    if (t.layers[to.first].cin == t.layers[to.first].l->cin) continue;
    for (const Plan& src : from.tiles)
      if (src.g1 == 0 || (src.g0 < t.g1 && t.g0 < src.g1 && (src.g0 < t.g0 || src.g1 > t.g1)))
        return false;
  }
  return true;
}

// Whether a stage fits narrow memory on each of its tiles, next to the output of the stage before
// (which waits at the top of narrow memory for the hand-over).
bool stage_fits(const Stage& s, const Stage* before) {
  for (const Plan& t : s.tiles) {
    if (t.narrow_end > kNarrowBytes || t.regions_end > t.out_base) return false;
    // (A stage in rounds fills its round images after the hand-over, when the output of the
    // stage before is read: only its first image must stay below that output.)
    const int below =
        t.rounds > 1 ? t.layers[t.first].in_base + t.layers[t.first].in_bytes() : t.regions_end;
    if (before)
      for (const Plan& b : before->tiles)
        if (b.tile == t.tile && b.into_base < 0 && below > b.out_base) return false;
  }
  return true;
}

}  // namespace tinycoral::compiler::conv
