// Memory planning for the interpreter: items (tensors, scratch) with a size and a live interval of
// operator indices [first, last] share one arena; two items may overlap in memory only when their
// intervals are disjoint. Greedy by size (largest first, lowest fitting offset), as TFLite's arena
// planner does; offsets are 64-byte aligned for SIMD loads.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <new>
#include <vector>

namespace tinycoral::host {

class ArenaPlanner {
 public:
  static constexpr size_t kAlignment = 64;
  // Returns the item's handle.
  int add(size_t bytes, int first, int last);
  // Computes offsets; returns the arena size.
  size_t plan();
  size_t offset(int item) const { return items_[static_cast<size_t>(item)].offset; }

 private:
  struct Item {
    size_t bytes = 0;
    int first = 0, last = 0;
    size_t offset = 0;
  };
  std::vector<Item> items_;
};

// std::allocator with 64-byte alignment, for the arena.
template <typename T>
struct AlignedAllocator {
  using value_type = T;
  AlignedAllocator() = default;
  template <typename U>
  AlignedAllocator(const AlignedAllocator<U>&) {}
  T* allocate(size_t n) {
    return static_cast<T*>(
        ::operator new (n * sizeof(T), std::align_val_t{ArenaPlanner::kAlignment}));
  }
  void deallocate(T* p, size_t) {
    ::operator delete (p, std::align_val_t{ArenaPlanner::kAlignment});
  }
  template <typename U>
  bool operator==(const AlignedAllocator<U>&) const {
    return true;
  }
};

}  // namespace tinycoral::host
