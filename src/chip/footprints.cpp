// Memory footprints for the scheduler (docs/chip.md "Scheduling"): the exact byte runs a TTU walk
// touches (bounding boxes were not enough: strided halo columns made independent mesh moves
// depend on each other), whether two footprints meet, and which tile sync counter counts which
// unit's writes into which memory (the table in docs/chip.md).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "chip/machine.h"

namespace tinycoral::chip {

Access access_of(Space space, bool write, const OpTtu& ttu, int64_t scale, int64_t base,
                 int64_t element) {
  Access a;
  a.space = space;
  a.write = write;
  a.lo = base + scale * ttu.min_address();
  a.hi = base + scale * ttu.max_address() + element;
  if (ttu.steps() > (1u << 20)) return a;
  std::vector<std::pair<int64_t, int64_t>> runs;
  TtuWalker w(ttu);
  do {
    const int64_t lo = base + scale * w.address();
    if (!runs.empty() && lo >= runs.back().first && lo <= runs.back().second)
      runs.back().second = std::max(runs.back().second, lo + element);
    else
      runs.push_back({lo, lo + element});
  } while (w.next());
  // Most walks climb: their runs come out in order, and sorting them cost more than the walk.
  if (!std::is_sorted(runs.begin(), runs.end())) std::sort(runs.begin(), runs.end());
  std::vector<std::pair<int64_t, int64_t>> merged;
  for (const auto& r : runs) {
    if (!merged.empty() && r.first <= merged.back().second)
      merged.back().second = std::max(merged.back().second, r.second);
    else
      merged.push_back(r);
  }
  if (merged.size() > 1)  // else the bounding box says it all
    a.runs = std::make_shared<const std::vector<std::pair<int64_t, int64_t>>>(std::move(merged));
  return a;
}

Access access_of_offsets(Space space, bool write, const std::vector<int64_t>& offsets,
                         int64_t scale, int64_t base, int64_t element) {
  Access a;
  a.space = space;
  a.write = write;
  if (offsets.empty()) return a;
  std::vector<std::pair<int64_t, int64_t>> runs;
  runs.reserve(offsets.size());
  for (int64_t off : offsets) runs.push_back({base + scale * off, base + scale * off + element});
  if (!std::is_sorted(runs.begin(), runs.end())) std::sort(runs.begin(), runs.end());
  std::vector<std::pair<int64_t, int64_t>> merged;
  for (const auto& r : runs) {
    if (!merged.empty() && r.first <= merged.back().second)
      merged.back().second = std::max(merged.back().second, r.second);
    else
      merged.push_back(r);
  }
  a.lo = merged.front().first;
  a.hi = merged.back().second;
  if (merged.size() > 1)
    a.runs = std::make_shared<const std::vector<std::pair<int64_t, int64_t>>>(std::move(merged));
  return a;
}

bool overlaps(const Access& a, const Access& b) {
  if (a.space != b.space || a.hi <= b.lo || b.hi <= a.lo) return false;
  if (!a.runs && !b.runs) return true;
  // Runs of each (the bounding box alone when it has none), without copying them.
  const std::pair<int64_t, int64_t> box_a{a.lo, a.hi}, box_b{b.lo, b.hi};
  const std::span<const std::pair<int64_t, int64_t>> ra =
      a.runs ? std::span(*a.runs) : std::span(&box_a, 1);
  const std::span<const std::pair<int64_t, int64_t>> rb =
      b.runs ? std::span(*b.runs) : std::span(&box_b, 1);
  size_t i = 0, j = 0;
  while (i < ra.size() && j < rb.size()) {
    if (ra[i].second <= rb[j].first)
      ++i;
    else if (rb[j].second <= ra[i].first)
      ++j;
    else
      return true;
  }
  return false;
}

uint32_t writers_counted_by(uint32_t counters, Space space) {
  // Counter k (isa.md 2.12) -> the unit whose writes it counts and the space they go to. The
  // other counters count no write: credits returned by readers (MESH_*_OUT, RING_WRITE, the
  // PARAMETERS credit a narrowToWide or ring consumer waits for), producer ordinals (17, 18).
  struct Counted {
    int counter;
    UnitId unit;
    Space space;
  };
  static constexpr Counted kCounted[] = {
      {0, UnitId::kOp, Space::kNarrow},             // AVDATA: op results
      {1, UnitId::kNarrowToWide, Space::kWide},     // PARAMETERS: an op's weight FIFO feed
      {1, UnitId::kRingConsumer1, Space::kWide},    //   (MUL feed / ring parameter consumer)
      {3, UnitId::kMeshSouth, Space::kNarrow},      // MESH_NORTH_IN: words from the north
      {4, UnitId::kMeshWest, Space::kNarrow},       // MESH_EAST_IN
      {5, UnitId::kMeshNorth, Space::kNarrow},      // MESH_SOUTH_IN
      {6, UnitId::kMeshEast, Space::kNarrow},       // MESH_WEST_IN
      {11, UnitId::kWideToNarrow, Space::kNarrow},  // WIDE_TO_NARROW
      {12, UnitId::kWideToNarrow, Space::kBias},    // WIDE_TO_SCALING
      {13, UnitId::kNarrowToWide, Space::kWide},    // NARROW_TO_WIDE
      {14, UnitId::kRingConsumer0, Space::kWide},   // RING_READ_A
      {15, UnitId::kRingConsumer1, Space::kWide}};  // RING_READ_B
  uint32_t units = 0;
  for (const Counted& c : kCounted)
    if ((counters >> c.counter & 1) && c.space == space) units |= 1u << static_cast<int>(c.unit);
  return units;
}

}  // namespace tinycoral::chip
