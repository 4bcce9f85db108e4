// The placement search (conv_placement.h): candidate stages by shortest paths over the cut points,
// parameters spread over or sharing tiles, and the choice by modeled cycles.
#include "compiler/conv_placement.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <iterator>
#include <map>
#include <optional>
#include <tuple>
#include <utility>

#include "compiler/conv_fifo.h"
#include "compiler/conv_hand_over.h"
#include "compiler/conv_row_split.h"

namespace tinycoral::compiler::conv {

namespace {

// Whether the chain has no residual ADD: there layers of six or nine groups may also split into
// slices of three (splittable's `three`), and widen_with_fifos retries a widening that finds no
// room with more layers through FIFOs. MobileNet v2 ran slower with either: 3.541 -> 3.558 ms
// with the slices, 3.928 with the retry.
bool three_group_slices(const ConvChain& chain) {
  return std::none_of(chain.layers.begin(), chain.layers.end(),
                      [](const ConvLayer& l) { return l.residual(); });
}

// How much longer a stage computes than its MACs spread evenly over its tiles would take: the
// busiest tile's rows of each layer (halos included) against the layer's rows over the tiles,
// weighted by the layer's MACs per output row.
double stage_overhead(const ConvChain& chain, const Stage& s) {
  double busiest = 0, even = 0;
  for (size_t i = s.first; i < s.end; ++i) {
    const ConvLayer& l = chain.layers[i];
    const double per_row =
        double(l.ow) * l.kh * l.kw * (l.depthwise ? l.cout : double(l.cin) * l.cout);
    int rows = 0;
    for (const Plan& t : s.tiles) rows = std::max(rows, t.layers[i].ob - t.layers[i].oa);
    busiest += rows * per_row;
    even += double(l.oh) * per_row / static_cast<double>(s.tiles.size());
  }
  return even > 0 ? busiest / even : 1;
}

// The stages: the whole chain on the tiles of its last layer's rows when that fits (a chain ending
// in a small map runs on few tiles); otherwise, from the first layer on, each stage as long as it
// still fits - and, with `capped`, as long as its tiles recompute at most kMaxStageOverhead times
// the even share (bands a row or two high recompute their halos through every layer before
// them) - then the next.
constexpr double kMaxStageOverhead = 1.5;

// Whether a stage ending before layer `e` would cut a residual block (its ADD after the cut, the
// image it keeps before).
bool cuts_a_residual(const ConvChain& chain, size_t e) {
  for (size_t i = e; i < chain.layers.size(); ++i)
    if (chain.layers[i].residual() && static_cast<size_t>(chain.layers[i].residual_of) < e)
      return true;
  return false;
}

std::vector<Stage> placement(const ConvChain& chain, const Shapes& shapes, bool capped) {
  const size_t n = chain.layers.size();
  std::vector<Stage> stages{stage_of(chain, shapes, 0, n)};
  if (stage_fits(stages.front(), nullptr)) return stages;
  stages.clear();
  for (size_t first = 0; first < n;) {
    const Stage* before = stages.empty() ? nullptr : &stages.back();
    size_t end = 0, fitting = first + 1;
    for (size_t e = n; e > first + 1 && end == 0; --e) {
      if (e < n && cuts_a_residual(chain, e)) continue;
      const Stage s = stage_of(chain, shapes, first, e);
      if (!stage_fits(s, before)) continue;
      if (fitting == first + 1) fitting = e;
      if (!capped || stage_overhead(chain, s) <= kMaxStageOverhead) end = e;
    }
    if (end == 0) end = fitting;
    stages.push_back(stage_of(chain, shapes, first, end));
    first = end;
  }
  return stages;
}

// Parameters resident across tiles: when the stages fit the 16 tiles side by side, each stage
// gets tiles of its own and keeps its layers' parameters there (cached once); a one-tile stage
// whose parameters exceed one wide memory is cut into one-tile stages at layer boundaries while
// tiles remain, each handing over to the next (a pipeline over the tiles). Otherwise every tile
// of the chain holds every segment in turn. Returns whether the stages have tiles of their own.
bool spread_over_tiles(const ConvChain& chain, const Shapes& shapes, std::vector<Stage>& stages) {
  int used = 0;
  for (const Stage& s : stages) used += static_cast<int>(s.tiles.size());
  if (used > kTiles) return false;
  std::vector<std::pair<size_t, size_t>> cuts;  // [first, end) of each stage, one-tile ones cut
  std::vector<int> counts;
  for (const Stage& s : stages) {
    if (s.tiles.size() != 1) {
      cuts.push_back({s.first, s.end});
      counts.push_back(static_cast<int>(s.tiles.size()));
      continue;
    }
    for (size_t a = s.first; a < s.end;) {
      size_t b = a + 1;
      int rows = shapes.layers[a].rows();
      while (b < s.end &&
             (rows + shapes.layers[b].rows() <= kSegmentRows || cuts_a_residual(chain, b)))
        rows += shapes.layers[b++].rows();
      if (b < s.end && used >= kTiles) b = s.end;  // no tile left: the rest streams here
      if (b < s.end) ++used;
      cuts.push_back({a, b});
      counts.push_back(1);
      a = b;
    }
  }
  std::vector<Stage> spread;
  int tile0 = 0;
  for (size_t k = 0; k < cuts.size(); ++k) {
    spread.push_back(stage_of(chain, shapes, cuts[k].first, cuts[k].second, tile0, counts[k]));
    if (static_cast<int>(spread.back().tiles.size()) != counts[k] ||
        !stage_fits(spread.back(), k > 0 ? &spread[k - 1] : nullptr))
      return false;
    tile0 += counts[k];
  }
  stages = std::move(spread);
  return true;
}

// Every stage's parameters resident at once, stages sharing tiles where they must: one-tile
// stages whose parameters exceed one wide memory are first cut at layer boundaries into one-tile
// stages (a pipeline), and a last layer of one output pixel (a classifier) that still exceeds one
// is split by output groups over as many tiles as it needs (each computes its groups with its own
// rows, the host reads their outputs one after another); then each stage, largest parameters
// first, takes the run of tiles whose wide memory is least used and keeps its rows above what is
// there (`bases`: per stage, its first wide row, one per tile when split). Stages run one after
// another, so a tile's narrow memory serves every stage it is in. Returns false (and leaves
// `stages` alone) when some stage's parameters cannot stay.
bool share_tiles(const ConvChain& chain, const Shapes& shapes, std::vector<Stage>& stages,
                 std::vector<std::vector<int>>& bases,
                 std::vector<std::vector<int>>* tops = nullptr, bool gaps = false) {
  const bool stream = tops != nullptr;
  std::vector<std::pair<size_t, size_t>> cuts;  // [first, end) of each stage, one-tile ones cut
  std::vector<int> counts, splits;
  std::vector<int> given;    // per cut: the tiles of a stage split by output groups, else 0
  std::vector<bool> pixels;  // per cut: a stage in pixel bands (Plan::pa, pb)
  auto rows_of = [&](size_t a, size_t b) {
    int n = 0;
    for (size_t i = a; i < b; ++i) n += shapes.layers[i].rows();
    return n;
  };
  for (const Stage& s : stages) {
    if (s.tiles.front().g1 > 0) {  // (each slice's bands on a run of tiles)
      cuts.push_back({s.first, s.end});
      counts.push_back(static_cast<int>(s.tiles.size()) / slices_of(s));
      given.push_back(slices_of(s));
      pixels.push_back(s.tiles.front().pixel_band());
      continue;
    }
    if (s.tiles.size() != 1) {
      cuts.push_back({s.first, s.end});
      counts.push_back(static_cast<int>(s.tiles.size()));
      given.push_back(0);
      pixels.push_back(s.tiles.front().pixel_band());
      continue;
    }
    for (size_t a = s.first; a < s.end;) {
      size_t b = a + 1;
      while (b < s.end && (rows_of(a, b + 1) <= kSegmentRows || cuts_a_residual(chain, b))) ++b;
      cuts.push_back({a, b});
      counts.push_back(1);
      given.push_back(0);
      pixels.push_back(false);
      a = b;
    }
  }
  // Allocation items: a stage's run of tiles, or one tile of a split layer with its groups.
  // (`follows`: the depthwise layer's slice of a split stage of two layers, split_stage - its
  // rows on the tiles of the convolution's slice, item `follows`, wherever they are free there.)
  struct Item {
    size_t cut = 0;
    int count = 0, rows = 0, tile0 = 0, base = 0;
    int follows = -1;
  };
  std::vector<Item> items;
  std::vector<std::vector<size_t>> following;  // per item: the items that follow it
  // (`wider`: a classifier split over that many times the tiles it needs, when its slices of
  // almost a whole wide memory find no tiles that empty beside the other stages.)
  bool classifier = false;
  // (pack_in's order of each pair of runs_first and spans_first, sorted once: it reads only the
  // items' cuts, counts and rows, `splits` (all made by make_items, which forgets the orders) and
  // which cuts keep a reserve (`streaming`, compared on each use); packing moves only tile0 and
  // base.)
  std::array<std::vector<size_t>, 4> orders;
  std::array<std::vector<bool>, 4> orders_streaming;
  std::vector<uint32_t> pack_taken;
  auto make_items = [&](int wider) {
    items.clear();
    splits.clear();
    for (std::vector<size_t>& order : orders) order.clear();
    for (size_t k = 0; k < cuts.size(); ++k) {
      const auto [a, b] = cuts[k];
      const LayerPlan& lp = shapes.layers[a];
      const ConvLayer& l = *lp.l;
      int split = given[k] > 0 ? given[k] : 1;
      if (given[k] == 0 && rows_of(a, b) > kSegmentRows && b == a + 1 && b == chain.layers.size() &&
          !l.depthwise && !l.residual() && l.heads.empty() && l.oh == 1 && l.ow == 1 &&
          lp.block == 1 && lp.groups > 1) {
        while (split < std::min(lp.groups, kTiles) &&
               lp.rows_of((lp.groups + split - 1) / split) > kSegmentRows)
          ++split;
        split = std::min({split * wider, lp.groups, kTiles});
        classifier = true;
      }
      splits.push_back(split);
      // (Each tile of a split layer takes the rows of the largest part: its tiles get their
      // groups in tile order below, not in the order they were packed.)
      for (int t = 0; t < split; ++t)
        items.push_back({k, counts[k],
                         split > 1 ? lp.rows_of((lp.groups + split - 1) / split) : rows_of(a, b)});
      // (A split stage of a convolution and its depthwise layer: each slice's depthwise rows
      // follow its convolution's slice.)
      const size_t leaders = items.size() - static_cast<size_t>(split);
      for (size_t i = a + 1; i < b && split > 1; ++i)
        for (int t = 0; t < split; ++t)
          items.push_back({k, counts[k],
                           shapes.layers[i].rows_of((shapes.layers[i].groups + split - 1) / split),
                           0, 0, static_cast<int>(leaders) + t});
    }
    following.assign(items.size(), {});
    for (size_t m = 0; m < items.size(); ++m)
      if (items[m].follows >= 0) following[static_cast<size_t>(items[m].follows)].push_back(m);
  };
  make_items(1);
  // Places the items, largest first, each on the run of tiles whose wide memory is least used.
  // A stage with a `reserve` (`stream`) goes first and keeps only that many rows of its tiles'
  // wide memory: its parameters take turns there, at least one 64-channel group at a time
  // (assign_segments; those past the first segment are streamed with every inference).
  auto group_rows = [&](size_t cut) {
    int rows = 0;
    for (size_t i = cuts[cut].first; i < cuts[cut].second; ++i)
      rows = std::max(rows, shapes.layers[i].rows_of(1));
    return rows;
  };
  std::vector<int> reserve(cuts.size(), -1);  // per cut; -1: keeps all its rows
  // (`runs_first`: items over several tiles before the others, largest first - the order that
  // packs when row bands over many tiles need the same free rows on all of them. `spans_first`:
  // items by the distinct tiles their cut needs - a layer split over 15 tiles finds no 15 tiles
  // left once large one-tile stages filled some. `best_fit`: each item on the fullest run it
  // still fits, leaving empty tiles for a classifier's slices of almost a whole wide memory.)
  // (`aligned`: the slices of a layer split by output groups all at one base row, on the runs
  // of tiles whose wide memory is least used, so that their bias loads and ops are the same
  // instructions and go out once for all of them.)
  auto pack_in = [&](bool runs_first, bool spans_first, bool best_fit, bool aligned) {
    const size_t which = (runs_first ? 2 : 0) + (spans_first ? 1 : 0);
    std::vector<size_t>& order = orders[which];
    std::vector<bool>& streaming = orders_streaming[which];
    bool same = order.size() == items.size() && streaming.size() == cuts.size();
    for (size_t k = 0; k < cuts.size() && same; ++k) same = streaming[k] == (reserve[k] >= 0);
    if (!same) {
      streaming.resize(cuts.size());
      for (size_t k = 0; k < cuts.size(); ++k) streaming[k] = reserve[k] >= 0;
      order.resize(items.size());
      for (size_t k = 0; k < order.size(); ++k) order[k] = k;
      auto span = [&](const Item& it) { return it.count * splits[it.cut]; };
      std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
        const bool fx = streaming[items[x].cut], fy = streaming[items[y].cut];
        if (fx != fy) return fx;
        if (runs_first && items[x].count != items[y].count) return items[x].count > items[y].count;
        if (spans_first && span(items[x]) != span(items[y])) return span(items[x]) > span(items[y]);
        return items[x].rows > items[y].rows;
      });
    }
    std::array<int, kTiles> used{};
    // (Tiles of a split layer's slices so far; reused, as the search packs by the thousand.)
    std::vector<uint32_t>& taken = pack_taken;
    taken.assign(cuts.size(), 0);
    auto rows_kept = [&](const Item& it) {
      return reserve[it.cut] >= 0 ? std::min(reserve[it.cut], it.rows) : it.rows;
    };
    // (The items that follow item `leader`, on top of its tiles.)
    auto followers = [&](size_t leader) {
      for (const size_t m : following[leader]) {
        Item& f = items[m];
        const Item& l = items[leader];
        const int top = *std::max_element(used.begin() + l.tile0, used.begin() + l.tile0 + l.count);
        if (top + rows_kept(f) > kSegmentRows) return false;
        f.tile0 = l.tile0;
        f.base = top;
        for (int t = l.tile0; t < l.tile0 + l.count; ++t)
          used[static_cast<size_t>(t)] = top + rows_kept(f);
      }
      return true;
    };
    for (size_t k : order) {
      Item& it = items[k];
      if (it.follows >= 0) continue;
      // (Room for its followers too, stacked on it.)
      int rows = rows_kept(it), trail = 0;
      for (const size_t m : following[k]) trail += rows_kept(items[m]);
      if (aligned && splits[it.cut] > 1 && reserve[it.cut] < 0) {
        if (taken[it.cut] != 0) continue;  // (placed with its first slice)
        std::vector<size_t> slices;
        for (size_t m = 0; m < items.size(); ++m)
          if (items[m].cut == it.cut && items[m].follows < 0) slices.push_back(m);
        std::vector<std::pair<int, int>> runs;  // top, first tile
        for (int t = 0; t + it.count <= kTiles; ++t)
          runs.push_back({*std::max_element(used.begin() + t, used.begin() + t + it.count), t});
        std::stable_sort(runs.begin(), runs.end());
        uint32_t chosen = 0;
        std::vector<int> at;
        int base = 0;
        for (const auto& [top, t] : runs) {
          const uint32_t run = ((1u << it.count) - 1) << t;
          if (chosen & run) continue;
          chosen |= run;
          at.push_back(t);
          base = std::max(base, top);
          if (at.size() == slices.size()) break;
        }
        if (at.size() < slices.size() || base + rows + trail > kSegmentRows) return false;
        std::sort(at.begin(), at.end());
        for (size_t q = 0; q < slices.size(); ++q) {
          items[slices[q]].tile0 = at[q];
          items[slices[q]].base = base;
          for (int t = at[q]; t < at[q] + it.count; ++t) used[static_cast<size_t>(t)] = base + rows;
        }
        for (size_t q : slices)
          if (!followers(q)) return false;
        taken[it.cut] = chosen;
        continue;
      }
      int best = -1, best_used = 0;
      for (int t = 0; t + it.count <= kTiles; ++t) {
        const uint32_t run = ((1u << it.count) - 1) << t;
        if (taken[it.cut] & run) continue;
        const int top = *std::max_element(used.begin() + t, used.begin() + t + it.count);
        const bool fits = top + rows + trail <= kSegmentRows,
                   best_fits = best_used + rows + trail <= kSegmentRows;
        const bool better = best_fit ? fits && (!best_fits || top > best_used) : top < best_used;
        if (best < 0 || better) best = t, best_used = top;
      }
      if (best < 0 || best_used + rows + trail > kSegmentRows) return false;
      it.tile0 = best;
      it.base = best_used;
      taken[it.cut] |= ((1u << it.count) - 1) << best;
      for (int t = best; t < best + it.count; ++t) used[static_cast<size_t>(t)] = best_used + rows;
      if (!followers(k)) return false;
    }
    return true;
  };
  // (`pack_gaps`: each item at the lowest rows free on every tile of a run, below other items
  // too - the runs above stack each item on the highest of its tiles' tops, and the rows under
  // it on the lower tiles stay unused; with the wide memories nearly full, as MobileNet v2's,
  // those rows decide whether a stage's leaner form and another's wider one pack.)
  // (`defer`: the items that follow others in their own turn; else each right after its leader.)
  auto pack_gaps = [&](bool spans_first, bool aligned, bool defer) {
    std::vector<size_t> order(items.size());
    for (size_t k = 0; k < order.size(); ++k) order[k] = k;
    auto span = [&](const Item& it) { return it.count * splits[it.cut]; };
    std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
      if (spans_first && span(items[x]) != span(items[y])) return span(items[x]) > span(items[y]);
      return items[x].rows > items[y].rows;
    });
    std::vector<std::vector<std::pair<int, int>>> busy(kTiles);  // per tile: [first, end) rows
    auto free_at = [&](int t, int count, int base, int rows) {
      if (base + rows > kSegmentRows) return false;
      for (int u = t; u < t + count; ++u)
        for (const auto& [lo, hi] : busy[static_cast<size_t>(u)])
          if (lo < base + rows && base < hi) return false;
      return true;
    };
    // Where an item may start: 0 or above another. (Into `at`, reused by the caller: the search
    // asks for every run of tiles, and a new vector each time was most of its allocations.)
    auto bases_into = [&](std::vector<int>& at, int t, int count) -> std::vector<int>& {
      at.assign(1, 0);
      for (int u = t; u < t + count; ++u)
        for (const auto& [lo, hi] : busy[static_cast<size_t>(u)]) at.push_back(hi);
      std::sort(at.begin(), at.end());
      at.erase(std::unique(at.begin(), at.end()), at.end());
      return at;
    };
    auto place = [&](Item& it, int t, int base) {
      it.tile0 = t;
      it.base = base;
      for (int u = t; u < t + it.count; ++u)
        busy[static_cast<size_t>(u)].push_back({base, base + it.rows});
    };
    // (Whether item `leader` at rows [base, base + its rows) of tiles [t, t + its count) leaves
    // room there for each item that follows it.)
    std::vector<int> follower_bases, run_bases;
    auto room_for_followers = [&](size_t leader, int t, int base) {
      if (following[leader].empty()) return true;
      const Item& l = items[leader];
      std::vector<std::pair<int, int>> taken_rows{{base, base + l.rows}};
      for (const size_t m : following[leader]) {
        const Item& f = items[m];
        std::vector<int>& at = bases_into(follower_bases, t, l.count);
        for (const auto& [lo, hi] : taken_rows) at.push_back(hi);
        std::sort(at.begin(), at.end());
        bool found = false;
        for (const int b : at) {
          bool clear = free_at(t, l.count, b, f.rows);
          for (const auto& [lo, hi] : taken_rows) clear = clear && (b + f.rows <= lo || hi <= b);
          if (!clear) continue;
          taken_rows.push_back({b, b + f.rows});
          found = true;
          break;
        }
        if (!found) return false;
      }
      return true;
    };
    // (The items that follow item `leader` and whose turn has come, each at the lowest rows free
    // on its tiles: in their own turn, as the other items, so that they fill the gaps the items
    // of their size would.)
    std::vector<bool> due(items.size(), !defer), placed_item(items.size(), false);
    auto followers = [&](size_t leader) {
      placed_item[leader] = true;
      for (const size_t m : following[leader]) {
        Item& f = items[m];
        if (!due[m] || placed_item[m]) continue;
        const Item& l = items[leader];
        for (const int base : bases_into(follower_bases, l.tile0, l.count))
          if (free_at(l.tile0, l.count, base, f.rows)) {
            place(f, l.tile0, base);
            placed_item[m] = true;
            break;
          }
        if (!placed_item[m]) return false;
      }
      return true;
    };
    std::vector<uint32_t> taken(cuts.size(), 0);
    for (size_t k : order) {
      Item& it = items[k];
      if (it.follows >= 0) {
        due[k] = true;
        if (placed_item[static_cast<size_t>(it.follows)] &&
            !followers(static_cast<size_t>(it.follows)))
          return false;
        continue;
      }
      const uint32_t ones = (1u << it.count) - 1;
      if (aligned && splits[it.cut] > 1) {
        if (taken[it.cut] != 0) continue;  // (placed with its first slice)
        std::vector<size_t> slices;
        for (size_t m = 0; m < items.size(); ++m)
          if (items[m].cut == it.cut && items[m].follows < 0) slices.push_back(m);
        std::vector<int> slice_bases;
        for (const int base : bases_into(slice_bases, 0, kTiles)) {
          std::vector<int> at;
          uint32_t chosen = 0;
          for (int t = 0; t + it.count <= kTiles && at.size() < slices.size(); ++t)
            if (!(chosen & (ones << t)) && free_at(t, it.count, base, it.rows) &&
                room_for_followers(slices[at.size()], t, base)) {
              chosen |= ones << t;
              at.push_back(t);
            }
          if (at.size() < slices.size()) continue;
          for (size_t q = 0; q < slices.size(); ++q) place(items[slices[q]], at[q], base);
          taken[it.cut] = chosen;
          for (size_t q : slices)
            if (!followers(q)) return false;
          break;
        }
        if (taken[it.cut] == 0) return false;
        continue;
      }
      int best = -1, best_base = kSegmentRows;
      for (int t = 0; t + it.count <= kTiles; ++t) {
        if (taken[it.cut] & (ones << t)) continue;
        for (const int base : bases_into(run_bases, t, it.count)) {
          if (base >= best_base) break;
          if (free_at(t, it.count, base, it.rows) && room_for_followers(k, t, base))
            best = t, best_base = base;
        }
      }
      if (best < 0) return false;
      place(it, best, best_base);
      taken[it.cut] |= ones << best;
      if (!followers(k)) return false;
    }
    return true;
  };
  auto pack = [&]() {
    for (const bool aligned : {true, false}) {
      if (aligned && stream) continue;
      if (pack_in(false, false, false, aligned) || pack_in(true, false, false, aligned) ||
          pack_in(false, true, false, aligned) || pack_in(false, false, true, aligned) ||
          pack_in(false, true, true, aligned))
        return true;
    }
    const bool following =
        std::any_of(items.begin(), items.end(), [](const Item& it) { return it.follows >= 0; });
    for (const bool defer : {true, false}) {
      if (!defer && !following) continue;
      for (const bool aligned : {true, false})
        if (gaps && !stream &&
            (pack_gaps(false, aligned, defer) || pack_gaps(true, aligned, defer)))
          return true;
    }
    return false;
  };
  bool packed = pack();
  for (int wider = 2; !packed && classifier && wider <= kTiles; wider *= 2) {
    make_items(wider);
    packed = pack();
  }
  if (!packed) make_items(1);
  if (!packed && stream) {
    // The stages to stream: those that free the most wide rows per row streamed first (a stage
    // in row bands holds its rows on each of its tiles, but streams them once, to all of them; a
    // layer split by groups streams each tile's groups through its own rows), as few as make
    // room; then each keeps as many rows as still leave room for the others, those that free the
    // fewest first.
    std::vector<size_t> streamers;
    for (size_t k = 0; k < cuts.size(); ++k) streamers.push_back(k);
    auto footprint = [&](size_t k) { return counts[k] * rows_of(cuts[k].first, cuts[k].second); };
    // (Wide rows freed per row streamed, when it keeps one group's rows on each of its tiles.)
    auto freed = [&](size_t k) {
      const double rows = rows_of(cuts[k].first, cuts[k].second);
      return (footprint(k) - double(counts[k]) * splits[k] * group_rows(k)) / std::max(rows, 1.0);
    };
    std::stable_sort(streamers.begin(), streamers.end(),
                     [&](size_t x, size_t y) { return freed(x) > freed(y); });
    std::vector<size_t> chosen;
    for (size_t k : streamers) {
      if (group_rows(k) > kSegmentRows) continue;
      reserve[k] = group_rows(k);
      chosen.push_back(k);
      if ((packed = pack())) break;
    }
    if (!packed) return false;
    // (Those that free the fewest rows per row streamed keep theirs first.)
    std::stable_sort(chosen.begin(), chosen.end(),
                     [&](size_t x, size_t y) { return freed(x) < freed(y); });
    for (size_t k : chosen) {
      int lo = reserve[k], hi = 0;
      for (const Item& it : items)
        if (it.cut == k) hi = std::max(hi, it.rows);
      while (lo < hi) {  // the largest reserve that packs
        reserve[k] = (lo + hi + 1) / 2;
        if (pack())
          lo = reserve[k];
        else
          hi = reserve[k] - 1;
      }
      reserve[k] = lo;
    }
    packed = pack();
  }
  if (!packed) return false;
  std::vector<Stage> shared;
  std::vector<std::vector<int>> base(cuts.size());
  for (size_t k = 0, at = 0; k < cuts.size();
       at +=
       static_cast<size_t>(splits[k]) *
       (cuts[k].second - cuts[k].first > 1 && splits[k] > 1 ? cuts[k].second - cuts[k].first : 1),
              ++k) {
    if (splits[k] == 1) {
      shared.push_back(stage_of(chain, shapes, cuts[k].first, cuts[k].second, items[at].tile0,
                                counts[k], pixels[k]));
      base[k] = {items[at].base};
    } else {
      // The split layer's tiles in tile order hold its groups in order (the output's order).
      std::vector<std::pair<int, int>> tiles;         // tile, base
      std::vector<std::tuple<int, int, int>> paired;  // tile, base, the depthwise layer's base
      for (int t = 0; t < splits[k]; ++t) {
        const Item& it = items[at + static_cast<size_t>(t)];
        tiles.push_back({it.tile0, it.base});
        const size_t f = at + static_cast<size_t>(splits[k] + t);
        if (f < items.size() && items[f].follows == static_cast<int>(at) + t)
          paired.push_back({it.tile0, it.base, items[f].base});
      }
      std::sort(tiles.begin(), tiles.end());
      std::sort(paired.begin(), paired.end());
      if (given[k] > 0) {
        // (Slice t's band b on the t-th run's tile b; one base per slice.)
        Stage s = split_stage(chain, shapes, cuts[k].first, splits[k], 0, counts[k], cuts[k].second,
                              pixels[k]);
        for (size_t t = 0; t < s.tiles.size(); ++t) {
          const size_t slice = t / static_cast<size_t>(counts[k]);
          s.tiles[t].tile = tiles[slice].first + static_cast<int>(t) % counts[k];
        }
        // (A split stage of two layers: the convolution's bases, then the depthwise layer's.)
        for (const auto& [tile, at] : tiles) base[k].push_back(at);
        for (const auto& [tile, at, follower] : paired) base[k].push_back(follower);
        shared.push_back(std::move(s));
      } else {
        Stage s = stage_of(chain, shapes, cuts[k].first, cuts[k].second, 0, 1);
        const Plan one = s.tiles.front();
        const LayerPlan& lp = one.layers[cuts[k].first];
        s.tiles.clear();
        for (int t = 0; t < splits[k]; ++t) {
          Plan p = one;
          p.tile = tiles[static_cast<size_t>(t)].first;
          slice_plan(p, lp.groups * t / splits[k], lp.groups * (t + 1) / splits[k]);
          s.tiles.push_back(std::move(p));
          base[k].push_back(tiles[static_cast<size_t>(t)].second);
        }
        shared.push_back(std::move(s));
      }
    }
    if (static_cast<int>(shared.back().tiles.size()) != counts[k] * splits[k] ||
        !stage_fits(shared.back(), k > 0 ? &shared[k - 1] : nullptr) ||
        (k > 0 && !nests(shared[k - 1], shared.back())))
      return false;
  }
  if (!keep_operands(chain, shared)) return false;
  stages = std::move(shared);
  if (stream) {
    // Each tile's parameters of a streaming stage stay below its reserve's top.
    tops->assign(cuts.size(), {});
    for (size_t k = 0; k < cuts.size(); ++k)
      for (const int b : base[k])
        (*tops)[k].push_back(reserve[k] >= 0 ? b + reserve[k] : kSegmentRows);
  }
  bases = std::move(base);
  return true;
}

// Modeled cycles of the layers' ops (op_cycles, and 32 to start an op): per stage its busiest
// tile, the stages one after another. With the parameter parts known (`shapes`), the tiles of a
// split layer whose parts stream run one after another.
double compute_cycles(const std::vector<Stage>& stages, const Shapes* shapes = nullptr) {
  double total = 0;
  for (const Stage& s : stages) {
    double busiest = 0, all = 0;
    bool in_turn = false;
    if (shapes && s.tiles.front().g1 > 0)
      for (const Part& part : shapes->layers[s.first].parts)
        in_turn = in_turn || !shapes->segments[static_cast<size_t>(part.segment)].first_of_group;
    for (const Plan& t : s.tiles) {
      double cycles = 0;
      for (size_t i = s.first; i < s.end; ++i) {
        const LayerPlan& lp = t.layers[i];
        const ConvLayer& l = *lp.l;
        const double positions = positions_of(t, lp);
        double steps = 0, macs = 0;
        if (l.residual()) {
          steps = positions * l.cin / 4;
        } else if (l.depthwise) {
          // (A tile of a split layer: its groups' words.)
          const int words =
              t.g1 > 0 ? std::min((t.g1 - t.g0) * lp.dw_words, l.cin / 4 - t.g0 * lp.dw_words)
                       : l.cin / 4;
          steps = positions * l.kh * l.kw * words;
          macs = steps * 16;
        } else {
          steps = positions * lp.kwords * (t.g1 > 0 ? t.g1 - t.g0 : lp.groups);
          macs = steps * lp.group_ch * 4;
        }
        // (A FIFO layer's op ends no sooner than its weight rows arrive: 4 cycles a row on the
        // ring.)
        const double ring = shapes && shapes->layers[i].fifo
                                ? 8.0 + 4.0 * lp.kwords * (t.g1 > 0 ? t.g1 - t.g0 : lp.groups)
                                : 0.0;
        cycles +=
            std::max(op_cycles(macs, steps), ring) + 32.0 * double(t.g1 > 0 ? 1 : lp.planned_parts);
      }
      busiest = std::max(busiest, cycles);
      all += cycles;
    }
    total += in_turn ? all : busiest;
  }
  return total;
}

// A candidate stage for the shortest paths: layers [a, b) on `tiles` tiles, its costs.
struct StageOption {
  size_t a = 0;
  int tiles = 0;
  double cycles = 0, instructions = 0, rows = 0;
  bool split = false;
  bool sliced = false;  // a split depthwise layer: the stage before must be split likewise
  int bands = 1;        // a split layer's row bands per slice (its tiles: tiles x bands)
  // Instructions that bring its input when every run of rows for the same tiles goes in one
  // transfer (about two runs per band: its own rows and the halo it shares).
  double transfers = 0;
};

// The candidate stages ending at each cut point (index b: stages [a, b)).
std::vector<std::vector<StageOption>> stage_options(const ConvChain& chain, const Shapes& shapes) {
  using Option = StageOption;
  const size_t n = chain.layers.size();
  constexpr int kCounts[] = {1, 2, 4, 8, 16};
  std::vector<std::vector<Option>> into(n + 1);  // the stages ending at each cut
  for (size_t b = 1; b <= n; ++b) {
    for (size_t a = 0; a < b; ++a) {
      if (!stage_allowed(chain, a, b)) continue;
      int rows = 0;
      for (size_t i = a; i < b; ++i) rows += shapes.layers[i].rows();
      int last = 0;
      for (const int count : kCounts) {
        const Stage s = stage_of(chain, shapes, a, b, 0, count);
        const int tiles = static_cast<int>(s.tiles.size());
        if (tiles == last) break;
        last = tiles;
        if (!stage_fits(s, nullptr)) continue;
        const ConvLayer& l = chain.layers[a];
        const double pieces =
            std::ceil(double(l.w) * l.cin / (a == 0 ? kPiece : kHandOverPackets * kPiece));
        double received = 0;
        for (const Plan& t : s.tiles) received += t.layers[a].need_rows;
        into[b].push_back(
            {a, tiles, compute_cycles({s}), pieces * (received + 3.0 * l.h), double(rows) * tiles});
        into[b].back().transfers = 8.0 * tiles;
      }
      const LayerPlan& lp = shapes.layers[a];
      // (The last layer only when it is a pool to one pixel, MobileNet v1's: split like the layer
      // before it, each tile pools its own channels and sends them to the host.)
      const ConvLayer& la = chain.layers[a];
      const bool pool = la.depthwise && la.oh == 1 && la.ow == 1;
      if (b != a + 1 || (b == n && !pool) || a == 0) continue;
      // (Each slice also in row bands over 2, 4 or 8 tiles: 2-D blocks, each band's tiles keeping
      // their slice's rows.)
      for (int count = 2; count <= kTiles; ++count) {
        if (!splittable(lp, count, three_group_slices(chain))) continue;
        for (int bands = 1; count * bands <= kTiles; bands *= 2) {
          const Stage s = split_stage(chain, shapes, a, count, 0, bands);
          const int per_slice = static_cast<int>(s.tiles.size()) / count;
          if (per_slice != bands) break;
          if (!stage_fits(s, nullptr)) continue;
          const ConvLayer& l = chain.layers[a];
          const double pieces = std::ceil(double(l.w) * l.cin / (kHandOverPackets * kPiece));
          // (One band per slice: every tile receives the whole image, counted as l.h rows.)
          double received = bands == 1 ? double(count) * l.h : 0;
          if (bands > 1)
            for (const Plan& t : s.tiles) received += t.layers[a].need_rows;
          into[b].push_back({a, count * bands, compute_cycles({s}), pieces * (received + 3.0 * l.h),
                             double(lp.rows_of(lp.groups / count)) * count * bands, true,
                             l.depthwise, bands});
          into[b].back().transfers = 4.0 + count * bands;
        }
      }
    }
  }
  return into;
}

// Stages chosen for the least modeled time (shortest paths over the cut points), each in row bands
// over 1, 2, 4, 8 or 16 tiles: a stage costs its busiest tile's compute, `per_instruction` cycles
// (an instruction's bytes over USB, about 70) per instruction that brings its input rows - one per
// row piece and receiving tile, three more per piece - and `per_row` cycles per wide row of
// parameters it keeps on each of its tiles (the wide memory all stages share: the larger, the
// fewer tiles a stage with many parameters takes). With `splits`, a layer inside the chain may
// also be a stage of its own split by output groups over 2 to 16 tiles (split_stage: each
// tile keeps only its groups' rows, and every tile receives the whole input). One list of stages
// per pair of weights; the stage before a split depthwise layer must be split likewise or finer.
std::vector<std::vector<Stage>> fastest_stages(
    const ConvChain& chain, const Shapes& shapes, const std::vector<std::vector<StageOption>>& into,
    const std::vector<std::pair<double, double>>& weights, bool splits, bool by_transfers,
    bool blocks = false) {
  using Option = StageOption;
  const size_t n = chain.layers.size();
  constexpr double kInf = 1e300;
  // The state at a cut: how many tiles the stage ending there is split over (0: not split).
  constexpr size_t kK = kTiles + 1;
  auto state_of = [&](const Option& o) { return o.split ? o.tiles / o.bands : 0; };
  std::vector<std::vector<Stage>> lists;
  // The weights' paths share most of their stages: each is planned once.
  std::map<std::tuple<bool, size_t, size_t, int, int>, Stage> planned;
  for (const auto& [per_instruction, per_row] : weights) {
    std::vector<std::array<double, kK>> best(n + 1);
    for (auto& row : best) row.fill(kInf);
    std::vector<std::array<std::pair<Option, size_t>, kK>> via(n + 1);  // option, state before
    best[0][0] = 0;
    for (size_t b = 1; b <= n; ++b)
      for (const Option& o : into[b])
        for (size_t k = 0; k < kK; ++k) {
          if (best[o.a][k] >= kInf || (o.split && !splits) || (o.bands > 1 && !blocks)) continue;
          if (o.sliced && (k == 0 || k % static_cast<size_t>(state_of(o)) != 0)) continue;
          const double cost = best[o.a][k] + o.cycles +
                              per_instruction * (by_transfers ? o.transfers : o.instructions) +
                              per_row * o.rows;
          const auto to = static_cast<size_t>(state_of(o));
          if (cost < best[b][to]) best[b][to] = cost, via[b][to] = {o, k};
        }
    const size_t end =
        static_cast<size_t>(std::min_element(best[n].begin(), best[n].end()) - best[n].begin());
    if (best[n][end] >= kInf) continue;
    std::vector<Stage> stages;
    for (size_t b = n, k = end; b > 0;) {
      const auto [o, before] = via[b][k];
      auto [at, fresh] = planned.try_emplace({o.split, o.a, b, o.tiles, o.bands});
      if (fresh)
        at->second = o.split ? split_stage(chain, shapes, o.a, o.tiles / o.bands, 0, o.bands)
                             : stage_of(chain, shapes, o.a, b, 0, o.tiles);
      stages.insert(stages.begin(), at->second);
      b = o.a;
      k = before;
    }
    lists.push_back(std::move(stages));
  }
  return lists;
}

// The stages' parameter groups: one per stage at `bases` when the stages keep their parameters
// (`own_tiles`), else one for the whole chain on every tile it uses, its segments in turn.
void group_parameters(const ConvChain& chain, Layout& out, bool own_tiles,
                      const std::vector<std::vector<int>>& bases,
                      const std::vector<std::vector<int>>& stage_tops = {}) {
  std::vector<int> tops;
  std::vector<int> group_of(chain.layers.size(), 0), splits(chain.layers.size(), 1);
  std::vector<uint32_t> masks{all_tiles(out.stages)};
  std::vector<int> group_bases{0};
  if (own_tiles) {
    masks.clear();
    group_bases.clear();
    for (size_t k = 0; k < out.stages.size(); ++k) {
      const Stage& s = out.stages[k];
      for (size_t i = s.first; i < s.end; ++i) group_of[i] = static_cast<int>(masks.size());
      if (s.tiles.front().g1 > 0) {
        // A layer split by output groups: a group of parameters per slice, on its bands' tiles.
        const size_t slices = static_cast<size_t>(slices_of(s)), bands = s.tiles.size() / slices;
        // (A split stage of two layers, split_stage: each layer's groups of its own.)
        for (size_t i = s.first; i < s.end; ++i) {
          splits[i] = static_cast<int>(slices);
          group_of[i] = static_cast<int>(masks.size());
          for (size_t t = 0; t < slices; ++t) {
            uint32_t mask = 0;
            for (size_t b = 0; b < bands; ++b) mask |= tile_bit(s.tiles[t * bands + b].tile);
            const size_t at = (i - s.first) * slices + t;
            masks.push_back(mask);
            group_bases.push_back(bases.at(k).at(at));
            tops.push_back(stage_tops.empty() ? kSegmentRows : stage_tops[k].at(at));
          }
        }
        continue;
      }
      masks.push_back(tile_mask(s.tiles));
      group_bases.push_back(bases.empty() ? 0 : bases[k].front());
      tops.push_back(stage_tops.empty() ? kSegmentRows : stage_tops[k].front());
    }
  }
  assign_segments(out.shapes, group_of, masks, group_bases, splits,
                  own_tiles ? tops : std::vector<int>{});
}

// Modeled cycles of one inference of a layout: the ops' compute, and its instructions and
// streamed parameters over USB (330 MB/s at 250 MHz: 0.76 cycles a byte).
double modeled_cycles(const Layout& layout, const ProgramBytes& program_bytes) {
  return compute_cycles(layout.stages, &layout.shapes) + program_bytes(layout) * 250.0 / 330.0;
}

// The stages' first images back in bands (LayerPlan::full off): each tile keeps only the rows its
// band reads, in the same place, so its image region stays large enough.
void in_bands(Stage& s) {
  for (Plan& p : s.tiles) {
    if (!std::as_const(p.layers)[s.first].full)
      continue;  // a read shares the layers, a write copies
    LayerPlan& lp = p.layers[s.first];
    lp.full = false;
    lp.top = lp.need_top;
    lp.hp = lp.need_rows;
  }
}

void in_bands(std::vector<Stage>& stages) {
  for (Stage& s : stages) in_bands(s);
}

// Stages of `out` that keep whole first images, each tried in bands instead (LayerPlan::full
// is chosen for the whole layout, but pays per stage: whole images let a sender's rows reach all
// its receivers in one transfer, bands let tiles of one band height share one op), the stages on
// most tiles first; kept when the modeled cycles (`best`, out's) drop.
void bands_per_stage(Layout& out, double& best, const ProgramBytes& program_bytes) {
  // (Each try models a program: bounds the compile time.)
  constexpr int kMaxTries = 10;
  std::vector<std::pair<size_t, size_t>> order;  // tiles, stage
  for (size_t k = 0; k < out.stages.size(); ++k) {
    const Stage& s = out.stages[k];
    if (s.tiles.size() > 1 && s.tiles.front().layers[s.first].full)
      order.push_back({s.tiles.size(), k});
  }
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  if (order.size() > kMaxTries) order.resize(kMaxTries);
  for (const auto& [tiles, k] : order) {
    Layout candidate = out;
    in_bands(candidate.stages[k]);
    const double modeled = modeled_cycles(candidate, program_bytes);
    if (modeled >= best) continue;
    best = modeled;
    out = std::move(candidate);
  }
}

// A split layer's stage `s` re-cut into more tiles when twice its bands do not fit the 16: the
// slice count and bands per slice over more tiles than now (at most 16) whose busiest tile
// computes least (PoseNet's 23 x 31 x 384 pointwise layers, 6 slices of 2 bands on 12 tiles:
// 3 slices of 5 bands on 15 compute 2 groups of 5 rows each instead of one of 12). False when
// none computes less. (Not the chain's first or last layer: stage_options splits neither, a last
// layer of one pixel is split by share_tiles. Slices of three groups where the chain allows them:
// three_group_slices.)
bool resliced(const ConvChain& chain, const Shapes& shapes, Stage& s) {
  if (s.first == 0 || s.end == chain.layers.size()) return false;
  const bool three = three_group_slices(chain);
  const int tiles = static_cast<int>(s.tiles.size());
  const LayerPlan& lp = shapes.layers[s.first];
  double least = compute_cycles({s});
  Stage best;
  for (int n = 2; n <= kTiles; ++n) {
    if (!splittable(lp, n, three)) continue;
    for (int bands = 1; n * bands <= kTiles; ++bands) {
      if (n * bands <= tiles) continue;
      Stage wide = split_stage(chain, shapes, s.first, n, 0, bands, s.end);
      if (static_cast<int>(wide.tiles.size()) != n * bands) break;  // (fewer rows than bands)
      if (!stage_fits(wide, nullptr)) continue;
      const double cycles = compute_cycles({wide});
      if (cycles < least) least = cycles, best = std::move(wide);
    }
  }
  if (best.tiles.empty()) return false;
  s = std::move(best);
  return true;
}

// Stage `s` in row bands on the fewest tiles that compute it no slower (its busiest band no
// higher): PoseNet's last layer, 23 rows on 16 tiles, computes 2 rows a tile on 12 as well, and
// the 4 tiles' parameter rows are free for other stages. `s` itself when none is fewer (a split
// layer, the chain's first stage: the host's rows may need one tile).
Stage trimmed(const ConvChain& chain, const Shapes& shapes, const Stage& s) {
  const int tiles = static_cast<int>(s.tiles.size());
  if (s.first == 0 || tiles < 2 || s.tiles.front().g1 > 0) return s;
  const int oh = chain.layers[s.end - 1].oh;
  const double cycles = compute_cycles({s});
  // (No fewer than the last layer's rows allow: ceil(oh / m) must stay the busiest band's.)
  const int per_tile = (oh + tiles - 1) / tiles;
  for (int m = (oh + per_tile - 1) / per_tile; m < tiles; ++m) {
    Stage t = stage_of(chain, shapes, s.first, s.end, 0, m);
    if (static_cast<int>(t.tiles.size()) != m || !stage_fits(t, nullptr)) continue;
    if (compute_cycles({t}) <= cycles) return t;
  }
  return s;
}

// Stage `s` over twice its tiles: a split layer with twice the row bands per slice (or re-cut,
// resliced, when that is more than 16 tiles), else twice the row bands; false when the map has
// too few rows or the tiles run out.
bool widened(const ConvChain& chain, const Shapes& shapes, Stage& s) {
  const int tiles = static_cast<int>(s.tiles.size());
  const bool split = s.tiles.front().g1 > 0;
  if (2 * tiles > kTiles) return split && resliced(chain, shapes, s);
  Stage wide;
  if (split) {
    const int slices = slices_of(s);
    wide = split_stage(chain, shapes, s.first, slices, 0, 2 * tiles / slices, s.end);
  } else {
    wide = stage_of(chain, shapes, s.first, s.end, 0, 2 * tiles);
  }
  if (static_cast<int>(wide.tiles.size()) != 2 * tiles || !stage_fits(wide, nullptr)) return false;
  s = std::move(wide);
  return true;
}

// Whether a layout's stages keep their first images whole on every tile (LayerPlan::full) rather
// than in bands: the form every candidate made from it keeps.
bool first_images_whole(const Layout& layout) {
  for (const Stage& s : layout.stages)
    for (const Plan& p : s.tiles)
      if (p.layers[s.first].full) return true;
  return false;
}

// `candidate`'s parameters grouped at `bases`, its first images in `whole`'s form; its modeled
// cycles.
double placed_and_modeled(const ConvChain& chain, Layout& candidate,
                          const std::vector<std::vector<int>>& bases, bool whole,
                          const ProgramBytes& program_bytes) {
  group_parameters(chain, candidate, true, bases);
  if (!whole) in_bands(candidate.stages);
  return modeled_cycles(candidate, program_bytes);
}

// A try of the searches below: `stages` (built over shapes_of(chain), whose parameters they
// share) packed over the tiles (share_tiles; `gaps`: items may sit in rows under others) and
// modeled whole in the first images' form `whole`: the layout and its modeled cycles, or nothing
// when the parameters do not pack.
std::optional<std::pair<Layout, double>> packed_and_modeled(const ConvChain& chain,
                                                            std::vector<Stage> stages, bool whole,
                                                            const ProgramBytes& program_bytes,
                                                            bool gaps = false) {
  Layout candidate;
  candidate.shapes = shapes_of(chain);
  candidate.stages = std::move(stages);
  std::vector<std::vector<int>> bases;
  if (!share_tiles(chain, candidate.shapes, candidate.stages, bases, nullptr, gaps))
    return std::nullopt;
  const double modeled = placed_and_modeled(chain, candidate, bases, whole, program_bytes);
  return std::pair<Layout, double>{std::move(candidate), modeled};
}

// Wide rows a stage keeps, summed over its tiles (a split layer's tiles their slices' rows).
double kept_rows(const Shapes& plain, const Stage& s) {
  double rows = 0;
  for (const Plan& p : s.tiles)
    for (size_t i = s.first; i < s.end; ++i)
      rows += p.g1 > 0 ? plain.layers[i].rows_of(p.g1 - p.g0) : plain.layers[i].rows();
  return rows;
}

// Narrower forms of stage `s` that keep fewer wide rows: row bands on fewer tiles (each band
// height once), a pointwise layer of its own split by output groups over fewer tiles' rows (its
// bands repeat all its rows, a slice's bands only the slice's), a split layer in fewer bands per
// slice. Not the chain's first or last stage (the host's rows, a classifier split by
// share_tiles).
std::vector<Stage> narrowed(const ConvChain& chain, const Shapes& plain, const Stage& s) {
  std::vector<Stage> forms;
  const int tiles = static_cast<int>(s.tiles.size());
  if (s.first == 0 || s.end == chain.layers.size() || tiles < 2) return forms;
  const double rows = kept_rows(plain, s);
  auto keep = [&](Stage t, int count) {
    if (static_cast<int>(t.tiles.size()) == count && stage_fits(t, nullptr) &&
        kept_rows(plain, t) < rows)
      forms.push_back(std::move(t));
  };
  const int oh = chain.layers[s.end - 1].oh;
  if (s.tiles.front().g1 > 0) {
    const int slices = slices_of(s);
    for (int bands = 1; bands < tiles / slices; ++bands)
      if (bands == 1 || (oh + bands - 1) / bands != (oh + bands - 2) / (bands - 1))
        keep(split_stage(chain, plain, s.first, slices, 0, bands, s.end), slices * bands);
    return forms;
  }
  for (int m = 1; m < tiles; ++m)
    if (m == 1 || (oh + m - 1) / m != (oh + m - 2) / (m - 1))
      keep(stage_of(chain, plain, s.first, s.end, 0, m), m);
  const ConvLayer& l = chain.layers[s.first];
  if (s.end != s.first + 1 || l.depthwise || l.residual() || l.kh != 1 || l.kw != 1) return forms;
  const LayerPlan& lp = plain.layers[s.first];
  for (int slices = 2; slices <= tiles; ++slices) {
    if (!splittable(lp, slices, three_group_slices(chain))) continue;
    for (int bands = 1; slices * bands <= kTiles && bands <= oh; ++bands)
      if (bands == 1 || (oh + bands - 1) / bands != (oh + bands - 2) / (bands - 1))
        keep(split_stage(chain, plain, s.first, slices, 0, bands), slices * bands);
  }
  return forms;
}

// Widens stages of `out` (widened) while every parameter stays resident and the modeled cycles
// (`best`, out's) drop: each round tries the stages longest computing first and keeps the first
// that pays; a stage that cannot widen, whose parameters find no room or that does not pay is
// not tried again until another stage widens.
void widen_stages(const ConvChain& chain, Layout& out, double& best,
                  const ProgramBytes& program_bytes) {
  // (Each try that packs models a program: bounds the compile time.)
  constexpr int kMaxTries = 8;
  std::vector<bool> tried(chain.layers.size(), false);
  const bool whole = first_images_whole(out);
  // First many at once: every stage whose widening saves at least kBulkSaving cycles of compute
  // and still packs, the whole modeled as one program (one at a time, a chain of many stages -
  // MobileNet v2's 49 - runs out of tries long before its stages on 2 to 4 tiles are widened).
  constexpr double kBulkSaving = 2000;
  const Shapes plain = shapes_of(chain);
  // (Two orders: the stages longest computing first, or those that save the most cycles per wide
  // row they add first - when the wide memories are nearly full, as v2's and PoseNet's are, the
  // second fits more of the widenings that pay; each round keeps the faster of the two.)
  for (int round = 0; round < 4; ++round) {
    std::optional<Layout> faster;
    for (const int order : {0, 1, 2}) {
      const bool per_row = order > 0;
      std::vector<Stage> stages = out.stages;
      std::vector<std::vector<int>> bases;
      if (order == 2) {
        // (First every stage in row bands on the fewest tiles that compute it as fast: the rows
        // that frees go to the widenings.)
        bool fewer = false;
        for (Stage& s : stages) {
          Stage t = trimmed(chain, plain, s);
          fewer = fewer || t.tiles.size() < s.tiles.size();
          s = std::move(t);
        }
        if (!fewer || !share_tiles(chain, plain, stages, bases)) continue;
      }
      // (Per stage: its order key, its first layer and its widened form.)
      std::vector<std::tuple<double, size_t, Stage>> firsts;
      for (const Stage& s : stages) {
        Stage wide = s;
        if (!widened(chain, plain, wide)) continue;
        const double saved = compute_cycles({s}) - compute_cycles({wide});
        if (saved < kBulkSaving) continue;
        const double key = per_row
                               ? saved / std::max(1.0, kept_rows(plain, wide) - kept_rows(plain, s))
                               : compute_cycles({s});
        firsts.emplace_back(key, s.first, std::move(wide));
      }
      std::stable_sort(firsts.begin(), firsts.end(), [](const auto& a, const auto& b) {
        return std::get<0>(a) > std::get<0>(b);
      });
      for (auto& [key, first, wide] : firsts) {
        size_t k = 0;
        while (k < stages.size() && stages[k].first != first) ++k;
        if (k == stages.size()) continue;
        std::vector<Stage> trial = stages;
        trial[k] = wide;
        std::vector<std::vector<int>> placed;
        if (!share_tiles(chain, plain, trial, placed)) continue;
        stages = std::move(trial);
        bases = std::move(placed);
      }
      if (bases.empty()) continue;
      Layout candidate;
      candidate.shapes = shapes_of(chain);
      candidate.stages = std::move(stages);
      const double modeled = placed_and_modeled(chain, candidate, bases, whole, program_bytes);
      if (modeled >= best) continue;
      best = modeled;
      faster = std::move(candidate);
    }
    if (!faster) break;
    out = std::move(*faster);
  }
  for (int tries = 0; tries < kMaxTries;) {
    std::vector<size_t> order(out.stages.size());
    for (size_t k = 0; k < order.size(); ++k) order[k] = k;
    std::vector<double> cycles;
    for (const Stage& s : out.stages) cycles.push_back(compute_cycles({s}, &out.shapes));
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t x, size_t y) { return cycles[x] > cycles[y]; });
    bool better = false;
    for (size_t k : order) {
      if (tried[out.stages[k].first] || tries >= kMaxTries) continue;
      tried[out.stages[k].first] = true;
      std::vector<Stage> stages = out.stages;
      if (!widened(chain, plain, stages[k])) continue;
      // (In the form of the layout's first images: whole, or in bands.)
      auto tried_layout = packed_and_modeled(chain, std::move(stages), whole, program_bytes);
      if (!tried_layout) continue;
      ++tries;
      if (tried_layout->second < best) {
        best = tried_layout->second;
        out = std::move(tried_layout->first);
        better = true;
      }
      if (better) {
        std::fill(tried.begin(), tried.end(), false);  // (the others may pay now)
        break;
      }
    }
    if (!better) return;
  }
}

// Stages of `out` widened with wide rows taken from others (the widening only adds rows, and on
// MobileNet v2 every wide memory is full: its 7x7 960 -> 320 projection, 5 slices of one band,
// 42 k cycles, would take 1,215 more rows in 2 bands). Per stage that widens (widened), the
// narrowings of the other stages (narrowed) that lose the fewest cycles per row they free are
// taken until the whole packs, as long as they lose fewer cycles than the widening saves; the
// stages saving most first, each try that packs modeled whole and kept when the modeled cycles
// (`best`, out's) drop, then again from the new layout.
void trade_rows(const ConvChain& chain, Layout& out, double& best,
                const ProgramBytes& program_bytes, bool as_is = false) {
  // (Each try that packs models a program: bounds the compile time.)
  constexpr int kMaxTries = 4;
  constexpr double kMinSaving = 2000;
  const Shapes plain = shapes_of(chain);
  const bool whole = first_images_whole(out);
  int tries = 0;
  for (bool better = true; better && tries < kMaxTries;) {
    better = false;
    const std::vector<Stage>& stages = out.stages;
    // (Per narrowing: cycles lost per row freed, its stage, its form, cycles lost.)
    std::vector<std::tuple<double, size_t, Stage, double>> narrowings;
    std::vector<std::tuple<double, size_t, Stage>> widenings;  // cycles saved, stage, form
    for (size_t k = 0; k < stages.size(); ++k) {
      const double cycles = compute_cycles({stages[k]}), rows = kept_rows(plain, stages[k]);
      for (Stage& t : narrowed(chain, plain, stages[k])) {
        const double lost = std::max(0.0, compute_cycles({t}) - cycles);
        narrowings.emplace_back(lost / (rows - kept_rows(plain, t)), k, std::move(t), lost);
      }
      Stage wide = stages[k];
      if (!widened(chain, plain, wide)) continue;
      const double saved = cycles - compute_cycles({wide});
      if (saved >= kMinSaving) widenings.emplace_back(saved, k, std::move(wide));
    }
    std::stable_sort(narrowings.begin(), narrowings.end(),
                     [](const auto& a, const auto& b) { return std::get<0>(a) < std::get<0>(b); });
    std::stable_sort(widenings.begin(), widenings.end(),
                     [](const auto& a, const auto& b) { return std::get<0>(a) > std::get<0>(b); });
    std::optional<Layout> faster;
    for (auto& [saved, kw, wide] : widenings) {
      if (tries >= kMaxTries) break;
      const double need = kept_rows(plain, wide) - kept_rows(plain, stages[kw]);
      std::vector<Stage> trial = stages;
      trial[kw] = wide;
      std::vector<bool> changed(stages.size(), false);
      changed[kw] = true;
      double lost = 0, freed = 0;
      std::vector<std::vector<int>> bases;
      // (`as_is`: first without narrowing any, with the gaps under other items - the rows
      // split_heads frees.)
      bool packed = as_is && share_tiles(chain, plain, trial, bases, nullptr, true);
      for (const auto& [ratio, kn, narrow, cycles] : narrowings) {
        if (packed) break;
        if (changed[kn] || lost + cycles >= saved) continue;
        changed[kn] = true;
        trial[kn] = narrow;
        lost += cycles;
        freed += kept_rows(plain, stages[kn]) - kept_rows(plain, narrow);
        if (freed >= need && (packed = share_tiles(chain, plain, trial, bases, nullptr, true)))
          break;
      }
      if (!packed) continue;
      ++tries;
      Layout candidate;
      candidate.shapes = shapes_of(chain);
      candidate.stages = std::move(trial);
      const double modeled = placed_and_modeled(chain, candidate, bases, whole, program_bytes);
      if (modeled >= best) continue;
      best = modeled;
      faster = std::move(candidate);
      break;
    }
    if (faster) {
      out = std::move(*faster);
      better = true;
    }
  }
}

// The splits of the heads' layer (the chain's last, `lp` of shapes `plain`) that split_heads
// tries: every slice count whose cuts fall between heads, each band count of a distinct band
// height, that fit narrow memory.
std::vector<Stage> head_splits(const ConvChain& chain, const Shapes& plain) {
  std::vector<Stage> splits;
  const size_t last = chain.layers.size() - 1;
  const ConvLayer& l = chain.layers[last];
  const LayerPlan& lp = plain.layers[last];
  for (int slices = 2; slices <= lp.groups && slices <= kTiles; ++slices) {
    if (!splittable(lp, slices, three_group_slices(chain))) continue;
    bool between = true;  // (every cut between two heads' groups)
    for (int t = 1; t < slices; ++t)
      for (const auto& [g0, g1] : l.head_spans())
        between = between && !(g0 < lp.groups * t / slices && lp.groups * t / slices < g1);
    if (!between) continue;
    for (int bands = 1; slices * bands <= kTiles && bands <= l.oh; ++bands) {
      if (bands > 1 && (l.oh + bands - 1) / bands == (l.oh + bands - 2) / (bands - 1)) continue;
      Stage split = split_stage(chain, plain, last, slices, 0, bands);
      if (static_cast<int>(split.tiles.size()) == slices * bands && stage_fits(split, nullptr))
        splits.push_back(std::move(split));
    }
  }
  return splits;
}

// Fan-out heads (the chain's last stage, not joined) split by output groups over tiles, each
// slice whole heads in row bands: a slice's tiles keep its groups' rows only (PoseNet's heads,
// the heatmaps and offsets sharing one group and the displacements the other, keep 99 rows a tile
// instead of 198), and the rows that frees on the tiles of the stages before let the trade widen
// one of them (trade_rows, `as_is`). Each split that packs (every slice count whose cuts fall
// between heads, each band count of a distinct band height), the kMaxTries of least compute, is
// modeled whole and then traded; kept when the modeled cycles (`best`, out's) drop.
void split_heads(const ConvChain& chain, Layout& out, double& best,
                 const ProgramBytes& program_bytes) {
  constexpr size_t kMaxTries = 2;
  const size_t last = chain.layers.size() - 1;
  const ConvLayer& l = chain.layers[last];
  if (l.heads.empty() || joined(l) || out.stages.size() < 2) return;
  const Stage& s = out.stages.back();
  if (s.first != last || s.tiles.front().g1 > 0) return;
  const Shapes plain = shapes_of(chain);
  const LayerPlan& lp = plain.layers[last];
  if (lp.block > 1) return;
  const bool whole = first_images_whole(out);
  std::vector<std::tuple<double, std::vector<Stage>, std::vector<std::vector<int>>>> tries;
  for (Stage& split : head_splits(chain, plain)) {
    std::vector<Stage> stages = out.stages;
    stages.back() = std::move(split);
    std::vector<std::vector<int>> bases;
    if (!share_tiles(chain, plain, stages, bases, nullptr, true)) continue;
    const double compute = compute_cycles(stages);
    tries.emplace_back(compute, std::move(stages), std::move(bases));
  }
  std::stable_sort(tries.begin(), tries.end(),
                   [](const auto& x, const auto& y) { return std::get<0>(x) < std::get<0>(y); });
  if (tries.size() > kMaxTries) tries.resize(kMaxTries);
  for (auto& [compute, stages, bases] : tries) {
    Layout candidate;
    candidate.shapes = shapes_of(chain);
    candidate.stages = std::move(stages);
    double modeled = placed_and_modeled(chain, candidate, bases, whole, program_bytes);
    trade_rows(chain, candidate, modeled, program_bytes, true);
    if (modeled >= best) continue;
    best = modeled;
    out = std::move(candidate);
  }
}

// Pointwise layers in row bands re-cut by output groups (MobileNet v2's 14x14 576 -> 96
// projections with their ADD: 7 bands of 2 rows, each tile keeping all 293 parameter rows, 29 k
// cycles; as 2 slices in 7 or 8 bands each tile keeps one slice's 147 rows and computes 14 k, the
// ADD a stage of its own after it). The shortest paths price such a stage by its rows and
// transfers and the widening only doubles bands, so neither finds it when the wide memories are
// full. Each row-band stage of one pointwise layer (and its ADD) inside the chain is tried as a
// split stage, every slice count the hand-overs allow, each band count of a distinct band height,
// the ADD in bands over 1, 2, 4, 8 or 16 tiles or the split's bands; of those that still pack, the
// kMaxTries of least compute are modeled whole and the fastest is kept when the modeled cycles
// (`best`, out's) drop. With `adds_only`, only the stages with an ADD (on v2 the split of the
// 384 -> 96 projection before them takes rows the widening then misses).
void split_pointwise(const ConvChain& chain, Layout& out, double& best,
                     const ProgramBytes& program_bytes, bool adds_only) {
  constexpr size_t kMaxTries = 2;
  const Shapes plain = shapes_of(chain);
  const size_t n = chain.layers.size();
  const bool whole = first_images_whole(out);
  for (size_t k = 0; k < out.stages.size(); ++k) {
    const Stage& s = out.stages[k];
    if (s.first == 0 || s.end == n || s.tiles.front().g1 > 0) continue;
    const ConvLayer& l = chain.layers[s.first];
    if (l.depthwise || l.residual() || l.kh != 1 || l.kw != 1) continue;
    const bool with_add = s.end == s.first + 2 && chain.layers[s.first + 1].residual();
    if (s.end != s.first + 1 && !with_add) continue;
    if (adds_only && !with_add) continue;
    const LayerPlan& lp = plain.layers[s.first];
    const int oh = l.oh;
    // (Per candidate: its compute, its tiles and its stages with their parameters' base rows.)
    std::vector<std::tuple<double, size_t, std::vector<Stage>, std::vector<std::vector<int>>>>
        tries;
    for (int slices = 2; slices <= kTiles; ++slices) {
      if (!splittable(lp, slices, three_group_slices(chain))) continue;
      for (int bands = 1; slices * bands <= kTiles && bands <= oh; ++bands) {
        // (The fewest bands of each band height.)
        if (bands > 1 && (oh + bands - 1) / bands == (oh + bands - 2) / (bands - 1)) continue;
        Stage split = split_stage(chain, plain, s.first, slices, 0, bands);
        if (static_cast<int>(split.tiles.size()) != slices * bands || !stage_fits(split, nullptr))
          continue;
        for (const int add_tiles : {1, 2, 4, 8, 16, bands}) {
          if (!with_add && add_tiles > 1) break;
          if (add_tiles == bands && (bands & (bands - 1)) == 0) continue;
          std::vector<Stage> stages = out.stages;
          stages[k] = split;
          if (with_add) {
            Stage add = stage_of(chain, plain, s.first + 1, s.end, 0, add_tiles);
            if (static_cast<int>(add.tiles.size()) != add_tiles) continue;
            stages.insert(stages.begin() + static_cast<std::ptrdiff_t>(k) + 1, std::move(add));
          }
          std::vector<std::vector<int>> bases;
          if (!share_tiles(chain, plain, stages, bases)) continue;
          const size_t tiles = stages[k].tiles.size();
          tries.emplace_back(compute_cycles(stages), tiles, std::move(stages), std::move(bases));
        }
      }
    }
    std::stable_sort(tries.begin(), tries.end(), [](const auto& x, const auto& y) {
      return std::tie(std::get<0>(x), std::get<1>(x)) < std::tie(std::get<0>(y), std::get<1>(y));
    });
    if (tries.size() > kMaxTries) tries.resize(kMaxTries);
    std::optional<Layout> faster;
    for (auto& [compute, tiles, stages, bases] : tries) {
      Layout candidate;
      candidate.shapes = shapes_of(chain);
      candidate.stages = std::move(stages);
      const double modeled = placed_and_modeled(chain, candidate, bases, whole, program_bytes);
      if (modeled >= best) continue;
      best = modeled;
      faster = std::move(candidate);
    }
    if (faster) out = std::move(*faster);
  }
}

// Stage boundaries moved by one layer where the image handed over is much smaller there. A
// hand-over moves its image over the ring at 64 bytes a cycle (src/chip/clock.h) while no op
// runs: MobileNet v2's first stage ended after its 16 -> 96 expansion, 112x112x96 (1.2 MB, 19 k
// cycles of the simulator's clock), where the expansion's input is six times smaller. The modeled
// cycles count no ring time, so a boundary moved (the stage before giving its last layer to the
// stage after, or taking the first layer of it, both on their tiles) is kept when they rise by
// less than the ring cycles it saves; `best` is then the moved layout's.
void shift_cuts(const ConvChain& chain, Layout& out, double& best,
                const ProgramBytes& program_bytes) {
  // (Each try that packs models a program: bounds the compile time.)
  constexpr int kMaxTries = 8;
  constexpr double kRingBytes = 64, kMinSaving = 2000;
  const Shapes plain = shapes_of(chain);
  const bool whole = first_images_whole(out);
  auto image_bytes = [&](size_t i) {  // layer i's output
    const ConvLayer& l = chain.layers[i];
    return double(l.oh) * l.ow * l.cout;
  };
  int tries = 0;
  for (size_t k = 0; k + 1 < out.stages.size() && tries < kMaxTries; ++k) {
    if (out.stages[k].tiles.front().g1 > 0 || out.stages[k + 1].tiles.front().g1 > 0) continue;
    std::optional<Layout> faster;
    double lowest = best, faster_modeled = 0;
    for (const bool left : {true, false}) {
      const Stage& a = out.stages[k];
      const Stage& b = out.stages[k + 1];
      const size_t cut = left ? a.end - 1 : b.first + 1;
      if (cut <= a.first || cut >= b.end || tries >= kMaxTries) continue;
      const double saved = (image_bytes(a.end - 1) - image_bytes(cut - 1)) / kRingBytes;
      if (saved < kMinSaving || cuts_a_residual(chain, cut) ||
          !stage_allowed(chain, a.first, cut) || !stage_allowed(chain, cut, b.end))
        continue;
      const int ta = static_cast<int>(a.tiles.size()), tb = static_cast<int>(b.tiles.size());
      Stage front = stage_of(chain, plain, a.first, cut, 0, ta);
      Stage back = stage_of(chain, plain, cut, b.end, 0, tb);
      if (static_cast<int>(front.tiles.size()) != ta || static_cast<int>(back.tiles.size()) != tb ||
          !stage_fits(front, nullptr) || !stage_fits(back, nullptr))
        continue;
      std::vector<Stage> stages = out.stages;
      stages[k] = std::move(front);
      stages[k + 1] = std::move(back);
      auto tried_layout = packed_and_modeled(chain, std::move(stages), whole, program_bytes);
      if (!tried_layout) continue;
      ++tries;
      const double modeled = tried_layout->second;
      if (modeled - saved >= lowest) continue;
      lowest = modeled - saved;
      faster = std::move(tried_layout->first);
      faster_modeled = modeled;
    }
    if (faster) {
      out = std::move(*faster);
      best = faster_modeled;
    }
  }
}

// Row-band stages of several layers of `out`, each tried as two stages cut at one of its layers
// (both on the stage's tiles), the stages computing longest first; kept when the modeled cycles
// (`best`, out's) drop, then tried again from the cut layout. A stage whose maps do not fit the
// narrow memory runs in rounds, and each round's share recomputes the halo rows of every layer
// before its last (PoseNet's 89 x 121 48 -> 96 pointwise layer before the 3x3 depthwise one
// computed 4 rows a round for 2), which the shortest paths' pricing of stages (their whole bands)
// does not see: one more hand-over can cost less than the halo rows.
void cut_stages(const ConvChain& chain, Layout& out, double& best,
                const ProgramBytes& program_bytes) {
  // (Each try that packs models a program: bounds the compile time.)
  constexpr int kMaxTries = 6;
  const Shapes plain = shapes_of(chain);
  const bool whole = first_images_whole(out);
  // (Only the stages found, each cut once: cutting a cut stage again the model prices below the
  // simulator's time - PoseNet's 89 x 121 stage in three, 0.07 ms slower than in two.)
  std::vector<std::pair<size_t, size_t>> found;
  for (const Stage& s : out.stages) found.push_back({s.first, s.end});
  int tries = 0;
  for (bool better = true; better && tries < kMaxTries;) {
    better = false;
    std::vector<std::pair<double, size_t>> order;  // compute, stage
    for (size_t k = 0; k < out.stages.size(); ++k) {
      const Stage& s = out.stages[k];
      if (std::find(found.begin(), found.end(), std::pair{s.first, s.end}) == found.end()) continue;
      if (s.end - s.first > 1 && s.tiles.front().g1 == 0)
        order.push_back({compute_cycles({s}, &out.shapes), k});
    }
    std::stable_sort(order.begin(), order.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
    std::optional<Layout> faster;
    for (const auto& [cycles, k] : order) {
      const Stage& s = out.stages[k];
      const int tiles = static_cast<int>(s.tiles.size());
      for (size_t c = s.first + 1; c < s.end && tries < kMaxTries; ++c) {
        if (cuts_a_residual(chain, c)) continue;
        std::vector<Stage> stages = out.stages;
        stages[k] = stage_of(chain, plain, s.first, c, 0, tiles);
        stages.insert(stages.begin() + static_cast<std::ptrdiff_t>(k) + 1,
                      stage_of(chain, plain, c, s.end, 0, tiles));
        auto tried_layout = packed_and_modeled(chain, std::move(stages), whole, program_bytes);
        if (!tried_layout) continue;
        ++tries;
        if (tried_layout->second >= best) continue;
        best = tried_layout->second;
        faster = std::move(tried_layout->first);
      }
      if (faster) break;
    }
    if (faster) {
      out = std::move(*faster);
      better = true;
    }
  }
}

// Pairs of split stages of `out` - a convolution split by output groups, then the depthwise layer
// after it split by the same groups - each tried as one split stage of both layers (split_stage
// with the depthwise layer's slices and bands): the convolution writes its slice straight into the
// depthwise layer's image on the slice's tiles, and the hand-over between them goes (MobileNet
// v2's expansions to 384, 576 and 960 channels before their 3x3 depthwise layers). In row bands
// the convolution then computes the depthwise layer's halo rows too. The modeled cycles count no
// ring time, so a pair is kept when they rise by less than the ring cycles of the image no longer
// handed over (as shift_cuts); `best` is then the paired layout's.
void pair_stages(const ConvChain& chain, Layout& out, double& best,
                 const ProgramBytes& program_bytes) {
  // (Each try that packs models a program: bounds the compile time.)
  constexpr int kMaxTries = 16;
  constexpr double kRingBytes = 64;
  // (A hand-over's ring producers and consumers, fences and waits with no op running: 1.5-4 k
  // cycles each on v2's, measured in the simulator's clock.)
  constexpr double kHandOverCycles = 1500;
  const Shapes plain = shapes_of(chain);
  const bool whole = first_images_whole(out);
  auto pairs_at = [&](const std::vector<Stage>& stages, size_t k) {
    const Stage& a = stages[k];
    const Stage& b = stages[k + 1];
    return a.end == a.first + 1 && b.end == b.first + 1 && a.tiles.front().g1 > 0 &&
           b.tiles.front().g1 > 0 && pairs_with_depthwise(chain, a.first);
  };
  auto saving = [&](const Stage& a) {
    const ConvLayer& l = chain.layers[a.first];
    return double(l.oh) * l.ow * l.cout / kRingBytes + kHandOverCycles;
  };
  // First every pair at once in the depthwise layer's form, each while the whole still packs,
  // modeled as one program (one at a time, v2's seven pairs modeled seven programs): kept when
  // the modeled cycles rise by less than all of them save.
  {
    std::vector<Stage> stages = out.stages;
    std::vector<std::vector<int>> bases;
    double saved = 0;
    for (size_t k = 0; k + 1 < stages.size(); ++k) {
      if (!pairs_at(stages, k)) continue;
      const Stage& b = stages[k + 1];
      const int slices = slices_of(b), bands = static_cast<int>(b.tiles.size()) / slices;
      Stage pair = split_stage(chain, plain, stages[k].first, slices, 0, bands, b.end);
      if (static_cast<int>(pair.tiles.size()) != slices * bands || !stage_fits(pair, nullptr))
        continue;
      std::vector<Stage> trial = stages;
      const double pair_saves = saving(trial[k]);
      trial[k] = std::move(pair);
      trial.erase(trial.begin() + static_cast<std::ptrdiff_t>(k) + 1);
      std::vector<std::vector<int>> placed;
      if (!share_tiles(chain, plain, trial, placed, nullptr, true)) continue;
      stages = std::move(trial);
      bases = std::move(placed);
      saved += pair_saves;
    }
    if (!bases.empty()) {
      Layout candidate;
      candidate.shapes = shapes_of(chain);
      candidate.stages = std::move(stages);
      const double modeled = placed_and_modeled(chain, candidate, bases, whole, program_bytes);
      if (modeled - saved < best) {
        best = modeled;
        out = std::move(candidate);
      }
    }
  }
  // Then each pair left on its own, in either form.
  int tries = 0;
  for (size_t k = 0; k + 1 < out.stages.size() && tries < kMaxTries; ++k) {
    if (!pairs_at(out.stages, k)) continue;
    const Stage& a = out.stages[k];
    const Stage& b = out.stages[k + 1];
    const double saved = saving(a);
    // (The depthwise layer's slices and bands, or the convolution's when they differ: a
    // convolution split finer than its depthwise layer computes more per tile in the other's.)
    std::vector<std::pair<int, int>> forms;  // slices, bands
    for (const Stage* s : {&b, &a}) {
      const int slices = slices_of(*s), bands = static_cast<int>(s->tiles.size()) / slices;
      if (std::find(forms.begin(), forms.end(), std::pair{slices, bands}) == forms.end() &&
          splittable(plain.layers[b.first], slices, three_group_slices(chain)))
        forms.push_back({slices, bands});
    }
    std::optional<Layout> faster;
    double lowest = best, faster_modeled = 0;
    for (const auto& [slices, bands] : forms) {
      if (tries >= kMaxTries) break;
      Stage pair = split_stage(chain, plain, a.first, slices, 0, bands, b.end);
      if (static_cast<int>(pair.tiles.size()) != slices * bands || !stage_fits(pair, nullptr))
        continue;
      std::vector<Stage> stages = out.stages;
      stages[k] = std::move(pair);
      stages.erase(stages.begin() + static_cast<std::ptrdiff_t>(k) + 1);
      auto tried_layout =
          packed_and_modeled(chain, std::move(stages), whole, program_bytes, /*gaps=*/true);
      if (!tried_layout) continue;
      ++tries;
      const double modeled = tried_layout->second;
      if (modeled - saved >= lowest) continue;
      lowest = modeled - saved;
      faster_modeled = modeled;
      faster = std::move(tried_layout->first);
    }
    if (faster) {
      out = std::move(*faster);
      best = faster_modeled;
    }
  }
}

// Adjacent row-band stages of `out`, each pair tried as one stage on the more tiles of the two
// (in rounds where its maps do not fit at once): the image between them then stays on its tiles
// instead of going over the ring (PoseNet's 89 x 121 x 96 maps: 1 MB, about 16 k cycles at 64
// bytes a cycle with no op running), which the modeled cycles do not count. Kept when they rise
// by less than the ring cycles saved and a hand-over's fixed cost (as pair_stages); `best` is then
// the merged layout's, and the merged stage is tried again with the one after it. Only stages
// whose layers after the first read no rows around their own (1x1): the bands and rounds of the
// others recompute halo rows, which the model prices below the simulator's clock (PoseNet's
// layers 0-3 in 3 rounds modeled 5.9 k cycles more and ran 30 k more with the hand-over's 17 k
// saved; the MobileNets' merges of that kind all modeled faster and ran slower).
void merge_stages(const ConvChain& chain, Layout& out, double& best,
                  const ProgramBytes& program_bytes) {
  // (Each try that packs models a program: bounds the compile time.)
  constexpr int kMaxTries = 8;
  constexpr double kRingBytes = 64, kHandOverCycles = 1500;
  const Shapes plain = shapes_of(chain);
  const bool whole = first_images_whole(out);
  int tries = 0;
  for (size_t k = 0; k + 1 < out.stages.size() && tries < kMaxTries;) {
    const Stage& a = out.stages[k];
    const Stage& b = out.stages[k + 1];
    const bool rows = a.tiles.front().g1 == 0 && b.tiles.front().g1 == 0;
    if (!rows || !stage_allowed(chain, a.first, b.end)) {
      ++k;
      continue;
    }
    const ConvLayer& l = chain.layers[a.end - 1];
    const double saved = double(l.oh) * l.ow * l.cout / kRingBytes + kHandOverCycles;
    const int tiles = static_cast<int>(std::max(a.tiles.size(), b.tiles.size()));
    Stage merged = stage_of(chain, plain, a.first, b.end, 0, tiles);
    bool halos = false;  // whether its bands or rounds would recompute halo rows
    for (size_t i = a.first + 1; i < b.end; ++i) halos = halos || chain.layers[i].kh > 1;
    if (halos || !stage_fits(merged, nullptr)) {
      ++k;
      continue;
    }
    std::vector<Stage> stages = out.stages;
    stages[k] = std::move(merged);
    stages.erase(stages.begin() + static_cast<std::ptrdiff_t>(k) + 1);
    auto tried_layout = packed_and_modeled(chain, std::move(stages), whole, program_bytes);
    if (tried_layout) ++tries;
    if (!tried_layout || tried_layout->second - saved >= best) {
      ++k;
      continue;
    }
    out = std::move(tried_layout->first);
    best = tried_layout->second;
  }
}

// Which layers of `layout` take their weights through FIFOs.
std::vector<bool> fifo_layers(const Layout& layout) {
  std::vector<bool> fifo;
  for (const LayerPlan& lp : layout.shapes.layers) fifo.push_back(lp.fifo);
  return fifo;
}

// `candidate` (its stages set) with the layers `fifo` names taking their weights through FIFOs,
// packed over `plain` (shapes_of(chain)), its first images in `whole`'s form: false when a
// parameter takes turns or a weight row finds no owner.
bool packed_with_fifos(const ConvChain& chain, const Shapes& plain, Layout& candidate,
                       const std::vector<bool>& fifo, bool whole) {
  candidate.shapes = plain;
  for (size_t i = 0; i < fifo.size(); ++i) candidate.shapes.layers[i].fifo = fifo[i];
  chunk_fifo_windows(candidate.shapes, candidate.stages);
  std::vector<std::vector<int>> bases;
  if (!share_tiles(chain, candidate.shapes, candidate.stages, bases)) return false;
  group_parameters(chain, candidate, true, bases);
  if (!std::all_of(candidate.shapes.segments.begin(), candidate.shapes.segments.end(),
                   [](const Segment& seg) { return seg.first_of_group; }) ||
      !own_fifo_weights(candidate.shapes))
    return false;
  if (!whole) in_bands(candidate.stages);
  return true;
}

// Stages of `out` widened (widened) with the weights of their capable layers (fifo_capable)
// through K-chunked FIFOs from owner tiles (docs/compiler.md "Widening stages with K-chunked
// FIFOs"): the widened stage keeps a few window and psum rows a tile where it kept all its weight
// rows, and its weights sit once on owner tiles. One stage after another, the stages longest
// computing first, each kept while every parameter packs without turns and every weight row finds
// an owner, whatever the model says of it alone (the first FIFO widening of MobileNet v2 models
// slower, the later ones faster); of the layouts on the way, the one of fewest modeled cycles
// replaces `out` when fewer than out's. Priced with the program's bytes as generated
// (`program_bytes`: the search's cheaper form of the hand-overs counts 4 times the bytes the
// widened stages' gathered hand-overs take, and ranked v2's later widenings slower than the clock
// runs them). Then a depthwise layer alone on one tile after a split stage split like it
// (docs/compiler.md "v2's pool split like the layer before").
void widen_with_fifos(const ConvChain& chain, Layout& out, const ProgramBytes& program_bytes) {
  // (Each try that packs models a program: bounds the compile time.)
  constexpr int kMaxTries = 16;
  for (const LayerPlan& lp : out.shapes.layers)
    if (lp.fifo) return;  // (a layout with FIFO layers of its own: not mixed with these)
  const Shapes plain = shapes_of(chain);
  const bool whole = first_images_whole(out);
  std::vector<bool> fifo(chain.layers.size(), false), tried(chain.layers.size(), false);
  Layout current = out;
  double best = modeled_cycles(out, program_bytes);
  for (int tries = 0; tries < kMaxTries;) {
    std::vector<size_t> order(current.stages.size());
    for (size_t k = 0; k < order.size(); ++k) order[k] = k;
    std::vector<double> cycles;
    for (const Stage& s : current.stages) cycles.push_back(compute_cycles({s}, &current.shapes));
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t x, size_t y) { return cycles[x] > cycles[y]; });
    bool widened_one = false;
    for (size_t k : order) {
      const Stage& s = current.stages[k];
      if (tried[s.first]) continue;
      tried[s.first] = true;
      std::vector<bool> with = fifo;
      bool any = false;
      for (size_t i = s.first; i < s.end; ++i)
        if (fifo_capable(plain.layers[i])) with[i] = any = true;
      if (!any) continue;
      Layout candidate;
      candidate.stages = current.stages;
      if (!widened(chain, plain, candidate.stages[k])) continue;
      const std::vector<Stage> widened_stages = candidate.stages;
      auto attempt = [&](const std::vector<bool>& w) {
        candidate.stages = widened_stages;
        return packed_with_fifos(chain, plain, candidate, w, whole);
      };
      if (!attempt(with)) {
        if (!three_group_slices(chain)) continue;
        // (No room: also every capable layer of the split stages on as many tiles or more
        // through FIFOs - a split layer resident on 16 tiles keeps its slice's weights on every
        // band, PoseNet's 384 -> 384 layers 294 rows a tile where a FIFO keeps 103.)
        bool more = false;
        for (const Stage& o : widened_stages)
          if (o.tiles.front().g1 > 0 && o.tiles.size() >= widened_stages[k].tiles.size())
            for (size_t i = o.first; i < o.end; ++i)
              if (fifo_capable(plain.layers[i]) && !with[i]) with[i] = more = true;
        if (!more || !attempt(with)) continue;
      }
      ++tries;
      const double modeled = modeled_cycles(candidate, program_bytes);
      current = std::move(candidate);
      fifo = std::move(with);
      if (modeled < best) {
        best = modeled;
        out = current;
      }
      widened_one = true;
      std::fill(tried.begin(), tried.end(), false);  // (the others may pack now)
      break;
    }
    if (!widened_one) break;
  }
  // Then a depthwise layer alone on one tile after a stage split by output groups, split like
  // it (v2's 7x7 pool: its 20 groups one op after another on one tile, 4,800 cycles; in the 5
  // slices of the 1x1 layer before, 4 groups a tile, about 1,000): each slice's channels stay on
  // their tiles' side of the hand-over, and a pool's rows (same_words) are few on every tile.
  for (size_t k = 1; k < out.stages.size(); ++k) {
    const Stage& s = out.stages[k];
    const Stage& before = out.stages[k - 1];
    if (s.end != s.first + 1 || !chain.layers[s.first].depthwise || s.tiles.size() != 1 ||
        before.tiles.front().g1 == 0)
      continue;
    const int n = slices_of(before);
    if (!splittable(plain.layers[s.first], n)) continue;
    Layout candidate;
    candidate.stages = out.stages;
    candidate.stages[k] = split_stage(chain, plain, s.first, n);
    if (!packed_with_fifos(chain, plain, candidate, fifo_layers(out), whole)) continue;
    const double modeled = modeled_cycles(candidate, program_bytes);
    if (modeled < best) {
      best = modeled;
      out = std::move(candidate);
    }
  }
}

// Residual ADD stages alone on fewer tiles than their rows, spread over min(rows, 16) tiles (one
// row a tile where rows allow; DeepLab's 33-row ADDs get 2 or 3): v2's 7 x 7 x 160 ADDs ran on
// one tile, 1,992 cycles each. The clock runs an ADD's op at 4
// loop steps a word and position (its loops (2)(2)), which compute_cycles prices at one; so
// priced, every search picks other layouts that the simulator runs slower (v2 3.374 -> 3.433
// ms), so the price stays and the three quarters it leaves out are added here.
void spread_adds(const ConvChain& chain, Layout& out, const ProgramBytes& program_bytes) {
  const Shapes plain = shapes_of(chain);
  const bool whole = first_images_whole(out);
  double best = modeled_cycles(out, program_bytes);
  for (size_t k = 1; k < out.stages.size(); ++k) {
    const Stage& s = out.stages[k];
    const ConvLayer& l = chain.layers[s.first];
    const int tiles = std::min(l.oh, kTiles);
    if (s.end != s.first + 1 || !l.residual() || static_cast<int>(s.tiles.size()) >= tiles)
      continue;
    Layout candidate;
    candidate.stages = out.stages;
    candidate.stages[k] = stage_of(chain, plain, s.first, s.end, 0, tiles);
    if (static_cast<int>(candidate.stages[k].tiles.size()) != tiles ||
        !stage_fits(candidate.stages[k], nullptr) ||
        !packed_with_fifos(chain, plain, candidate, fifo_layers(out), whole))
      continue;
    const double unpriced = 3 * (compute_cycles({s}) - compute_cycles({candidate.stages[k]}));
    const double modeled = modeled_cycles(candidate, program_bytes);
    if (modeled - unpriced < best) {
      best = modeled;
      out = std::move(candidate);
    }
  }
}

// Stages of 1x1 layers in row bands (pixel_stage; a split layer's bands per slice) tried in pixel
// bands (Plan::pa, pb): a 7 x 7 map's rows split over 3 tiles as 2, 2 and 3 rows (21 positions on
// the busiest tile), its 49 pixels as 16, 16 and 17; over 4 to 6 tiles rows give 14 positions at
// best, pixels 13, 10 and 9 (docs/compiler.md "Pixel bands"). Each such stage, the longest
// computing first, on as many bands as now and on each larger count (up to twice as many) whose
// busiest tile computes fewer positions, packed with the layout's FIFO layers as they are; kept
// when the modeled cycles drop.
void pixel_bands(const ConvChain& chain, Layout& out, const ProgramBytes& program_bytes) {
  constexpr int kMaxTries = 12;  // (each try models a program)
  // (A pixel band's first and last rows go in pieces of their own, more hand-over instructions:
  // every v2 candidate that saved fewer op cycles modeled slower.)
  constexpr double kLeastSaved = 2500;
  const Shapes plain = shapes_of(chain);
  const bool whole = first_images_whole(out);
  double best = -1;                              // (out's modeled cycles, once a try needs them)
  std::vector<std::pair<double, size_t>> order;  // compute, stage
  for (size_t k = 1; k < out.stages.size(); ++k) {
    const Stage& s = out.stages[k];
    if (!s.tiles.front().pixel_band() && s.tiles.front().rounds == 1 &&
        pixel_stage(chain, plain, s.first, s.end))
      order.push_back({compute_cycles({s}, &out.shapes), k});
  }
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  int tries = 0;
  for (const auto& [compute, k] : order) {
    const size_t first = out.stages[k].first, end = out.stages[k].end;
    const ConvLayer& l = chain.layers[end - 1];
    // (A layer split by output groups: its slices' bands, as many slices.)
    const int slices = slices_of(out.stages[k]);
    const int pixels = l.oh * l.ow, tiles = static_cast<int>(out.stages[k].tiles.size()) / slices;
    // (Only counts whose busiest tile computes fewer positions than its rows now.)
    int busiest = 0;
    for (const Plan& t : out.stages[k].tiles)
      busiest = std::max(busiest, positions_of(t, t.layers[end - 1]));
    for (int n = tiles; n <= std::min({2 * tiles, kTiles / slices, pixels}) && tries < kMaxTries;
         ++n) {
      const int per_tile = (pixels + n - 1) / n;
      if (per_tile >= busiest) continue;
      busiest = per_tile;
      Layout candidate;
      candidate.stages = out.stages;
      candidate.stages[k] = out.stages[k].tiles.front().g1 > 0
                                ? split_stage(chain, plain, first, slices, 0, n, end, true)
                                : stage_of(chain, plain, first, end, 0, n, true);
      if (static_cast<int>(candidate.stages[k].tiles.size()) != n * slices ||
          compute_cycles({out.stages[k]}) - compute_cycles({candidate.stages[k]}) < kLeastSaved ||
          !candidate.stages[k].tiles.front().pixel_band() ||
          !stage_fits(candidate.stages[k], nullptr) ||
          !packed_with_fifos(chain, plain, candidate, fifo_layers(out), whole))
        continue;
      ++tries;
      if (best < 0) best = modeled_cycles(out, program_bytes);
      const double modeled = modeled_cycles(candidate, program_bytes);
      if (modeled < best) {
        best = modeled;
        out = std::move(candidate);
      }
    }
  }
}

// Each residual ADD whose operand travels a second time to its tiles (keep_operands) tried
// reading it where those tiles already hold it (operand_in_place: v2's 7 x 7 blocks, whose split
// expansions all-gather the block's input to every tile); kept when the modeled cycles drop (the
// ADD's tiles then read the operand at different addresses: one op a tile instead of one for all).
// After the search: inside it (keep_operands) the moved images narrowed what fit, and v2's search
// chose another layout, 0.011 ms slower.
void operands_in_place(const ConvChain& chain, Layout& out, const ProgramBytes& program_bytes) {
  double best = -1;
  for (size_t i = 0; i < chain.layers.size(); ++i) {
    if (!chain.layers[i].residual()) continue;
    Layout candidate = out;
    if (!operand_in_place(chain, candidate.stages, i)) continue;
    if (best < 0) best = modeled_cycles(out, program_bytes);
    const double modeled = modeled_cycles(candidate, program_bytes);
    if (modeled < best) {
      best = modeled;
      out = std::move(candidate);
    }
  }
}

// PoseNet's heads split again once FIFOs have freed wide rows (split_heads runs before
// widen_with_fifos, when the wide memories are full): the heads' stage split as split_heads
// splits it, the layout's FIFO layers kept, the kMaxTries of least compute that pack and find
// owners modeled whole; kept when the modeled cycles drop.
void split_heads_with_fifos(const ConvChain& chain, Layout& out,
                            const ProgramBytes& program_bytes) {
  constexpr size_t kMaxTries = 2;
  if (std::none_of(out.shapes.layers.begin(), out.shapes.layers.end(),
                   [](const LayerPlan& lp) { return lp.fifo; }))
    return;
  const size_t last = chain.layers.size() - 1;
  const ConvLayer& l = chain.layers[last];
  if (l.heads.empty() || joined(l) || out.stages.size() < 2) return;
  const Stage& s = out.stages.back();
  if (s.first != last) return;
  const Shapes plain = shapes_of(chain);
  const LayerPlan& lp = plain.layers[last];
  if (lp.block > 1) return;
  const bool whole = first_images_whole(out);
  const double now = compute_cycles({s});
  std::vector<std::pair<double, Layout>> tries;
  for (Stage& split : head_splits(chain, plain)) {
    const double compute = compute_cycles({split});
    if (compute >= now) continue;
    Layout candidate;
    candidate.stages = out.stages;
    candidate.stages.back() = std::move(split);
    if (!packed_with_fifos(chain, plain, candidate, fifo_layers(out), whole)) continue;
    tries.emplace_back(compute, std::move(candidate));
  }
  std::stable_sort(tries.begin(), tries.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  if (tries.size() > kMaxTries) tries.resize(kMaxTries);
  double best = modeled_cycles(out, program_bytes);
  for (auto& [compute, candidate] : tries) {
    const double modeled = modeled_cycles(candidate, program_bytes);
    if (modeled >= best) continue;
    best = modeled;
    out = std::move(candidate);
  }
}

}  // namespace

// `layout` with its hand-overs written in place (write_in_place, which the searches above do
// not see), out of the first stage too where that models faster (v2: its first stage's
// 112 x 112 x 16 output stays on the tiles; v1 0.25: its first stage's ops then differ per
// tile and take 14 KB more instructions than the hand-over saves); its modeled cycles.
std::pair<Layout, double> in_place_layout(const ConvChain& chain, const Layout& layout,
                                          const ProgramBytes& program_bytes) {
  std::pair<Layout, double> best{layout, 0};
  write_in_place(chain, best.first.shapes, best.first.stages);
  best.second = modeled_cycles(best.first, program_bytes);
  if ((chain.repack_w > 0 && chain.repack_cin == 0) || layout.stages.size() < 2) return best;
  Layout first = layout;
  write_in_place(chain, first.shapes, first.stages, true);
  if (!first.stages[1].halo_in) return best;
  const double cycles = modeled_cycles(first, program_bytes);
  if (cycles < best.second) best = {std::move(first), cycles};
  return best;
}

// Row-band stages re-cut over the tiles of the row-band stage next to them, so that the
// hand-over between them is written in place (write_in_place: each tile's own rows stay, only
// the halo crosses the ring): the stage after (with the stages after it of its tiles, whose
// hand-overs were in place) over the tiles of the one before, or the stage before (with those
// before it of its tiles) over the tiles of the one after. A stride-2 first layer may then read
// bands of uneven heights (56 rows over 16 tiles: 3 and 4), each inside its tile's rows of the
// stage before and a halo. Each kept when the layout with its hand-overs in place
// (in_place_layout) models faster; the searches above price every hand-over whole. (v2: its
// first stage from 16 tiles of 7 rows to 14 of 8, as the 112 -> 56 stage after it.)
void match_bands(const ConvChain& chain, Layout& out, const ProgramBytes& program_bytes) {
  constexpr size_t kMaxRun = 4;  // (stages re-cut at once: each try models two programs)
  const Shapes plain = shapes_of(chain);
  const bool whole = first_images_whole(out);
  auto bands = [](const Stage& s) {
    const Plan& p = s.tiles.front();
    return s.tiles.size() > 1 && p.g1 == 0 && !p.pixel_band() && p.rounds == 1;
  };
  double now = in_place_layout(chain, out, program_bytes).second;
  for (size_t k = 0; k + 1 < out.stages.size(); ++k) {
    if (!bands(out.stages[k]) || !bands(out.stages[k + 1]) ||
        out.stages[k].tiles.size() == out.stages[k + 1].tiles.size())
      continue;
    for (const bool after : {true, false}) {
      const size_t from = after ? k + 1 : k;
      const int m = static_cast<int>(out.stages[after ? k : k + 1].tiles.size());
      const size_t count = out.stages[from].tiles.size();
      std::vector<Stage> trial = out.stages;
      bool made = false;
      for (size_t run = 0; run < kMaxRun && (after || run <= from); ++run) {
        const size_t j = after ? from + run : from - run;
        if (j >= out.stages.size() || !bands(out.stages[j]) || out.stages[j].tiles.size() != count)
          break;
        Stage cut = stage_of(chain, plain, out.stages[j].first, out.stages[j].end, 0, m);
        if (static_cast<int>(cut.tiles.size()) != m || !stage_fits(cut, nullptr)) break;
        trial[j] = std::move(cut);
        made = true;
      }
      if (!made) continue;
      Layout candidate;
      candidate.stages = std::move(trial);
      if (!packed_with_fifos(chain, plain, candidate, fifo_layers(out), whole)) continue;
      const double cycles = in_place_layout(chain, candidate, program_bytes).second;
      if (cycles >= now) continue;
      now = cycles;
      out = std::move(candidate);
      break;
    }
  }
}

Layout make_layout(const ConvChain& chain, const ProgramBytes& program_bytes,
                   const ProgramBytes& exact_bytes) {
  // (The candidates' hand-overs counted once each: most lie between stages a candidate keeps.)
  const HandOverCounts counts;
  Layout out;
  out.shapes = shapes_of(chain);
  // The longest stages first: fewer stages keep the parameters resident more often. When they
  // cannot, shorter stages that recompute less (the parameters stream either way).
  out.stages = placement(chain, out.shapes, false);
  bool spread = spread_over_tiles(chain, out.shapes, out.stages);
  if (!spread && out.stages.size() > 1) {
    out.stages = placement(chain, out.shapes, true);
    spread = spread_over_tiles(chain, out.shapes, out.stages);
  }
  group_parameters(chain, out, spread, {});
  // (Placements that keep every parameter are sought only when they fit all wide memories and
  // every layer over one wide memory can be split by output groups.)
  bool fit = true;
  int total_rows = 0;
  for (size_t i = 0; i < chain.layers.size(); ++i) {
    const LayerPlan& lp = out.shapes.layers[i];
    total_rows += lp.rows();
    const ConvLayer& l = *lp.l;
    const bool last = i + 1 == chain.layers.size();
    bool can_split = last && l.oh == 1 && l.ow == 1 && !l.depthwise;
    for (int count = 2; count <= kTiles && !last && i > 0; ++count)
      can_split = can_split || (splittable(lp, count, three_group_slices(chain)) &&
                                lp.rows_of(lp.groups / count) <= kSegmentRows);
    fit = fit && (lp.rows() <= kSegmentRows || can_split);
  }
  fit = fit && total_rows <= kTiles * kSegmentRows;
  // Placements that keep every parameter resident with stages sharing tiles - among them stages
  // in row bands over many tiles where the maps are large, even when the whole chain would fit
  // one tile - replace it when the model of their time says they are faster.
  // Candidates: the fastest stages for a range of weights on parameter rows, and the placements
  // above with every parameter resident; the three of least compute are modeled whole (their
  // instructions generated) and replace the layout above when faster.
  // Then the same with layers split by output groups over tiles (the first of them only when
  // they differ): their least-compute candidates join the others.
  std::vector<std::pair<double, double>> weights;
  for (const double per_instruction : {60.0, 140.0})
    for (const double per_row : {0.0, 1.0, 4.0, 16.0, 64.0, 256.0})
      weights.push_back({per_instruction, per_row});
  auto resident = [&](std::vector<std::vector<Stage>> lists, size_t keep, bool stream) {
    std::vector<std::pair<double, Layout>> kept;
    for (std::vector<Stage>& stages : lists) {
      Layout candidate;
      candidate.shapes = shapes_of(chain);
      candidate.stages = std::move(stages);
      std::vector<std::vector<int>> bases;
      std::vector<std::vector<int>> tops;
      if (candidate.stages.empty() ||
          !share_tiles(chain, candidate.shapes, candidate.stages, bases, stream ? &tops : nullptr))
        continue;
      group_parameters(chain, candidate, true, bases, tops);
      // (Streamed rows, and about as many restored, cost their bytes over USB.)
      double streamed = 0;
      for (const Segment& seg : candidate.shapes.segments)
        if (!seg.first_of_group) streamed += 2.0 * seg.rows * kRowBytes * 250.0 / 330.0;
      kept.push_back(
          {compute_cycles(candidate.stages, &candidate.shapes) + streamed, std::move(candidate)});
    }
    std::stable_sort(kept.begin(), kept.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    if (kept.size() > keep) kept.resize(keep);
    return kept;
  };
  const std::vector<std::vector<StageOption>> options = stage_options(chain, out.shapes);
  std::vector<std::vector<Stage>> lists =
      fastest_stages(chain, out.shapes, options, weights, false, false);
  for (const bool capped : {false, true}) lists.push_back(placement(chain, out.shapes, capped));
  // (Copied once for the streaming candidates: every list's stages hold a plan per layer.)
  std::vector<std::vector<Stage>> stream_lists = lists;
  std::vector<std::pair<double, Layout>> candidates;
  if (fit) candidates = resident(std::move(lists), 6, false);
  // The same paths with each run of input rows costing one transfer (stream_input, hand_over):
  // the three of least compute join the candidates (added, so that no model loses a layout).
  std::vector<std::vector<Stage>> run_lists =
      fastest_stages(chain, out.shapes, options, weights, false, true);
  std::vector<std::vector<Stage>> run_stream_lists;
  if (!fit) run_stream_lists = run_lists;
  std::vector<std::pair<double, Layout>> run_candidates;
  if (fit) run_candidates = resident(std::move(run_lists), 3, false);
  // (Heavier weights on parameter rows too: a chain whose parameters nearly fill the 16 wide
  // memories - MobileNet v1 1.0 - must keep its row bands on few tiles.)
  for (const double per_instruction : {60.0, 140.0})
    for (const double per_row : {1024.0, 4096.0}) weights.push_back({per_instruction, per_row});
  // (Once with one band per slice of a split layer, once with 2-D blocks too - each finds
  // layouts the other misses, v1 0.5's best without blocks, 1.0's with them; placements that
  // stream search without blocks only.)
  for (const bool blocks : {false, true}) {
    if (blocks && !fit) break;
    std::vector<std::vector<Stage>> split_lists;
    for (std::vector<Stage>& stages :
         fastest_stages(chain, out.shapes, options, weights, true, false, blocks)) {
      bool split = false;
      for (const Stage& st : stages) split = split || st.tiles.front().g1 > 0;
      if (split) split_lists.push_back(stages);
      stream_lists.push_back(std::move(stages));
    }
    if (fit)
      for (auto& candidate : resident(std::move(split_lists), 4, false))
        candidates.push_back(std::move(candidate));
    std::vector<std::vector<Stage>> run_split_lists;
    for (std::vector<Stage>& stages :
         fastest_stages(chain, out.shapes, options, weights, true, true, blocks)) {
      bool split = false;
      for (const Stage& st : stages) split = split || st.tiles.front().g1 > 0;
      if (split && fit)
        run_split_lists.push_back(std::move(stages));
      else if (!fit)
        run_stream_lists.push_back(std::move(stages));
    }
    if (fit)
      for (auto& candidate : resident(std::move(run_split_lists), 2, false))
        run_candidates.push_back(std::move(candidate));
  }
  // None keeps every parameter (MobileNet v1 1.0: the row bands of its large maps repeat their
  // parameters on several tiles; v2: more rows than all wide memories): placements that keep
  // all but one stage's parameters and stream the rest of that one instead.
  bool streaming = false;
  if (candidates.empty()) {
    candidates = resident(std::move(stream_lists), 6, true);
    run_candidates = resident(std::move(run_stream_lists), 3, true);
    streaming = true;
  }
  for (auto& candidate : run_candidates) candidates.push_back(std::move(candidate));
  double best = candidates.empty() ? 0 : modeled_cycles(out, program_bytes);
  // (The two fastest that differ from the first layout, for widen_stages.)
  std::vector<std::pair<double, Layout>> fastest;
  for (auto& [compute, candidate] : candidates) {
    // Each also with its stages' first images in bands: whole images share halo rows in fewer
    // transfers, but give every tile an op of its own for the stage's first layer.
    Layout banded = candidate;
    in_bands(banded.stages);
    // (Streaming candidates: whole first images only, six of them for the time of three pairs.)
    for (Layout* layout : {&candidate, &banded}) {
      if (streaming && layout == &banded) continue;
      const double cycles = modeled_cycles(*layout, program_bytes);
      if (cycles >= best) continue;
      fastest.insert(fastest.begin(), {cycles, std::move(*layout)});
      if (fastest.size() > 2) fastest.pop_back();
      best = cycles;
    }
  }
  // The fastest two, each with its stages widened one at a time, the longest computing first: a
  // stage on few tiles (a layer split by output groups on one band per slice, or row bands on few
  // tiles) over twice as many, when every parameter still stays and the model says the whole is
  // faster (the searches above price parameter rows per stage, so they leave tiles idle where the
  // wide memories still have room; the second fastest widens better at times: v1 0.5).
  if (!fastest.empty()) best = fastest.back().first + 1;
  // (Each also with its pointwise stages split by output groups, split_pointwise, widened on its
  // own: the widening is greedy, and from the split layout it may end slower than from the other.)
  // (Of the fastest only: each widening models up to a dozen programs.)
  std::vector<std::pair<double, Layout>> split;
  if (!streaming && !fastest.empty())
    for (const bool adds_only : {false, true}) {
      const auto& [cycles, layout] = fastest.front();
      split.emplace_back(cycles, layout);
      split_pointwise(chain, split.back().second, split.back().first, program_bytes, adds_only);
      if (split.back().first >= cycles) split.pop_back();
    }
  for (auto& candidate : split) fastest.push_back(std::move(candidate));
  for (auto& [cycles, layout] : fastest) {
    if (!streaming) widen_stages(chain, layout, cycles, program_bytes);
    if (cycles < best) {
      best = cycles;
      out = std::move(layout);
    }
  }
  // (The fastest only: each try models a program.)
  if (!fastest.empty()) {
    cut_stages(chain, out, best, program_bytes);
    shift_cuts(chain, out, best, program_bytes);
    trade_rows(chain, out, best, program_bytes);
    split_heads(chain, out, best, program_bytes);
    pair_stages(chain, out, best, program_bytes);
    merge_stages(chain, out, best, program_bytes);
    bands_per_stage(out, best, program_bytes);
    if (!streaming) {
      widen_with_fifos(chain, out, exact_bytes);
      split_heads_with_fifos(chain, out, exact_bytes);
      spread_adds(chain, out, exact_bytes);
      pixel_bands(chain, out, exact_bytes);
      match_bands(chain, out, exact_bytes);
    }
  }
  // Turns from owner tiles over the ring rather than from the host: 4 cycles a row on the ring
  // against about 194 over USB.
  // Where segments still take turns, FIFOs from owner tiles instead (no parts, nothing loaded
  // twice); the turns that remain from owner tiles.
  fifo_instead_of_turns(out);
  own_turns(out.shapes);
  if (!streaming) operands_in_place(chain, out, exact_bytes);
  // (Ops as before, fewer bytes over the ring: always when it fits; out of the first stage
  // where that models faster.)
  out = in_place_layout(chain, out, exact_bytes).first;
  // (Every segment and owner placed: the ADDs' weight rows where they find room.)
  cache_add_rows(out.shapes, out.stages);
  // (And the split depthwise layers' taps, each layer's on one holder, where a tile has room.)
  hold_dense_taps(out.shapes, out.stages);
  // (And the FIFO layers' runs where their ops then wait for no more rows and start together; not
  // where halo rows go first, whose form takes parts of one run.)
  std::vector<bool> keep(out.shapes.layers.size(), false);
  for (size_t si = 0; si < out.stages.size(); ++si)
    for (size_t i = out.stages[si].first; i < out.stages[si].end; ++i)
      keep[i] = !halo_first(chain, out.stages, si, i).empty();
  refit_fifo_runs(out.shapes, keep);
  return out;
}

}  // namespace tinycoral::compiler::conv
