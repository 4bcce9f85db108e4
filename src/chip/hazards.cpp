// The dependencies of a new work inside its fence region (docs/chip.md "Scheduling"): program-order
// hazards between footprints, except that a read waiting on a sync counter that counts a later
// writer's writes waits for that writer (a forward read), and the scalar-memory rule for infeeds.
// Regions close at tile fences (0x1a) and, for scalar memory, at tokwait fences.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "chip/machine.h"

namespace tinycoral::chip {

namespace {
using Runs = std::vector<std::pair<int64_t, int64_t>>;
using RunSpan = std::span<const std::pair<int64_t, int64_t>>;
// The runs of an access without copying them: its list, or `box` set to its bounding box.
RunSpan runs_of(const Access& a, std::pair<int64_t, int64_t>& box) {
  if (a.runs) return *a.runs;
  box = {a.lo, a.hi};
  return RunSpan(&box, 1);
}
// a minus b; both sorted and merged.
Runs subtract(RunSpan a, RunSpan b) {
  Runs out;
  size_t j = 0;
  for (auto [lo, hi] : a) {
    while (j < b.size() && b[j].second <= lo) ++j;
    for (size_t k = j; k < b.size() && b[k].first < hi; ++k) {
      if (b[k].first > lo) out.emplace_back(lo, b[k].first);
      lo = std::max(lo, b[k].second);
    }
    if (lo < hi) out.emplace_back(lo, hi);
  }
  return out;
}
void set_runs(Access& a, Runs runs) {
  a.lo = runs.front().first;
  a.hi = runs.back().second;
  a.runs = std::make_shared<const Runs>(std::move(runs));
}

bool has_forward_read(const Work& w) {
  return std::any_of(w.accesses.begin(), w.accesses.end(),
                     [](const Access& a) { return a.forward; });
}
}  // namespace

void VirtualEdgeTpu::Impl::add_hazards(const std::vector<uint32_t>& region, Work& n, uint32_t id) {
  // Per read: the byte runs an earlier instruction of the region writes. The rest of the read is a
  // forward read, even when earlier writers cover part of it (MobileNet's horizontal halo moves
  // read rows -1 and 16, which only the vertical moves issued after them write: the corners).
  std::vector<Runs> written;  // sized on the first RAW overlap (most works have none)
  // Per space, the bounding box of n's accesses: an earlier work none of whose accesses meets it
  // shares no bytes with n, so nothing below applies to it (most of a region).
  constexpr size_t kSpaces = 5;
  std::array<std::pair<int64_t, int64_t>, kSpaces> box;
  box.fill({INT64_MAX, INT64_MIN});
  for (const Access& a : n.accesses) {
    auto& [lo, hi] = box[static_cast<size_t>(a.space)];
    lo = std::min(lo, a.lo);
    hi = std::max(hi, a.hi);
  }
  auto meets_box = [&](const Work& e) {
    for (const Access& b : e.accesses) {
      const auto [lo, hi] = box[static_cast<size_t>(b.space)];
      if (b.lo < hi && lo < b.hi) return true;
    }
    return false;
  };
  for (uint32_t eid : region) {
    Work& e = works[eid];
    if (!meets_box(e)) continue;
    bool depend = false;
    bool e_forward_changed = false;
    // When n writes what e reads forward, e consumes n's output: n does not wait for e's other
    // reads of the same bytes (split_concat / MobileNet: an infeed from scalar memory issued
    // before the outfeed that rewrites the region it read last time).
    // But when n must follow e anyway (it reads or overwrites what e writes), e cannot wait for
    // n: e's forward read then takes the bytes as they are (MobileNet v2 word 411 reads an input
    // block whose first bytes the halo move at word 432, writing into e's output, reuses).
    bool follows_e = false;
    for (const Access& a : n.accesses)
      for (const Access& b : e.accesses)
        if (b.write && overlaps(a, b)) follows_e = true;
    const uint32_t n_unit = 1u << static_cast<uint32_t>(n.unit);
    bool feeds_e = false;
    if (e.unit != n.unit && !e.done && !follows_e)
      for (const Access& a : n.accesses)
        for (const Access& b : e.accesses)
          if (a.write && b.forward && (b.waits_for & n_unit) && overlaps(a, b)) feeds_e = true;
    for (size_t i = 0; i < n.accesses.size(); ++i) {
      const Access& a = n.accesses[i];
      for (Access& b : e.accesses) {
        if (!overlaps(a, b) || (!a.write && !b.write)) continue;
        if (b.write) {  // RAW or WAW: program order
          depend = true;
          if (!a.write) {
            if (written.empty()) written.resize(n.accesses.size());
            if (b.runs)
              written[i].insert(written[i].end(), b.runs->begin(), b.runs->end());
            else
              written[i].emplace_back(b.lo, b.hi);
          }
        } else if (b.forward && (b.waits_for & n_unit) && e.unit != n.unit && !e.done &&
                   !follows_e) {
          // e reads what a later instruction on another unit produces: this one. What this one
          // does not write stays a forward read.
          e.deps.push_back(id);
          e_forward_changed = true;
          std::pair<int64_t, int64_t> box_a, box_b;
          Runs rest = subtract(runs_of(b, box_b), runs_of(a, box_a));
          if (rest.empty())
            b.forward = false;
          else
            set_runs(b, std::move(rest));
        } else if (feeds_e) {
          continue;
        } else if (!b.forward) {
          depend = true;  // WAR
        } else {
          b.forward = false;
          e_forward_changed = true;
          depend = true;  // WAR
        }
      }
    }
    if (depend && !e.done) n.deps.push_back(eid);
    if (depend && e.done) clock_depends(n, eid);  // clock: finished, but maybe later in cycles
    if (e_forward_changed) e.forward_reads = has_forward_read(e);
  }
  const size_t count = n.accesses.size();
  for (size_t i = 0; i < count; ++i) {
    // A read that waits on no counter counting a writer of its space takes the bytes in program
    // order: what earlier regions left, or earlier writers of its region (below).
    if (n.accesses[i].write || n.accesses[i].waits_for == 0) continue;
    if (written.empty() || written[i].empty()) {
      n.accesses[i].forward = true;
      continue;
    }
    Runs& w = written[i];
    std::sort(w.begin(), w.end());
    Runs merged;
    for (auto r : w) {
      if (!merged.empty() && r.first <= merged.back().second)
        merged.back().second = std::max(merged.back().second, r.second);
      else
        merged.push_back(r);
    }
    std::pair<int64_t, int64_t> box;
    Runs rest = subtract(runs_of(n.accesses[i], box), merged);
    if (rest.empty()) continue;
    // The covered part orders after its writers; the rest waits for a later writer (keeping it in
    // the covered access too would make that writer wait for this read: a cycle).
    Access forward = n.accesses[i];
    forward.forward = true;
    set_runs(n.accesses[i], subtract(runs_of(n.accesses[i], box), rest));
    set_runs(forward, std::move(rest));
    n.accesses.push_back(std::move(forward));
  }
  n.forward_reads = has_forward_read(n);
}

void VirtualEdgeTpu::Impl::add_scalar_hazards(Work& n, uint32_t id) {
  // Reuse the tile logic over the scalar region (a scratch copy: the erase below).
  std::vector<uint32_t> region = scalar_region;
  // An infeed from scalar memory reads what the next outfeed into scalar memory writes, even when
  // an earlier outfeed of the region wrote the same bytes (compiled programs issue it before that
  // outfeed; its pop_wait counts the words outfed before: MobileNet v1 0.25 word 727 takes the
  // weights of outfeed 731, not those of 618).
  if (n.unit == UnitId::kInfeed)
    std::erase_if(region, [&](uint32_t e) {
      return std::any_of(works[e].accesses.begin(), works[e].accesses.end(),
                         [](const Access& a) { return a.write; });
    });
  add_hazards(region, n, id);
  scalar_region.push_back(id);
}

void VirtualEdgeTpu::Impl::close_region(TileState& ts) {
  for (uint32_t id : ts.region) works[id].region_open = false;
  ts.region.clear();
}

}  // namespace tinycoral::chip
