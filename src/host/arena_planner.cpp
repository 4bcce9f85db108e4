// Greedy liveness-based arena planning (arena_planner.h).
#include "host/arena_planner.h"

#include <algorithm>
#include <numeric>

namespace tinycoral::host {

int ArenaPlanner::add(size_t bytes, int first, int last) {
  items_.push_back({bytes, first, last, 0});
  return static_cast<int>(items_.size() - 1);
}

size_t ArenaPlanner::plan() {
  auto round_up = [](size_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; };
  std::vector<size_t> order(items_.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return items_[a].bytes > items_[b].bytes; });
  std::vector<size_t> placed;
  size_t total = 0;
  for (size_t idx : order) {
    Item& it = items_[idx];
    const size_t need = round_up(std::max<size_t>(it.bytes, 1));
    // Occupied ranges of placed items alive at the same time, sorted by offset.
    std::vector<std::pair<size_t, size_t>> busy;
    for (size_t p : placed) {
      const Item& o = items_[p];
      if (o.last < it.first || it.last < o.first) continue;
      busy.emplace_back(o.offset, o.offset + round_up(std::max<size_t>(o.bytes, 1)));
    }
    std::sort(busy.begin(), busy.end());
    size_t candidate = 0;
    for (const auto& [lo, hi] : busy) {
      if (candidate + need <= lo) break;
      candidate = std::max(candidate, hi);
    }
    it.offset = candidate;
    total = std::max(total, candidate + need);
    placed.push_back(idx);
  }
  return total;
}

}  // namespace tinycoral::host
