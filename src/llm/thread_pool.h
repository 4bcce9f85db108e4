// A small fork-join pool for the per-token matmuls: parallel_for splits [0, n) into one contiguous
// slice per thread (the caller runs the first), so every output is computed by exactly one thread
// in the same order whatever the thread count, and the results do not depend on it.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace tinycoral::llm {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);  // threads >= 1 (1: everything on the caller's thread)
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }
  // body(begin, end) over slices of [0, n) whose starts are multiples of `align`.
  void parallel_for(int n, int align, const std::function<void(int, int)>& body);

 private:
  void worker(int index);
  std::vector<std::thread> workers_;
  const std::function<void(int, int)>* body_ = nullptr;
  int n_ = 0, align_ = 1;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace tinycoral::llm
