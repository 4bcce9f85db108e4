#include "llm/thread_pool.h"

#include <algorithm>

namespace tinycoral::llm {

namespace {

// Slice t of [0, n) among `parts`, with boundaries rounded to multiples of align.
std::pair<int, int> slice(int n, int align, int parts, int t) {
  const int units = (n + align - 1) / align;
  const int begin = static_cast<int>(int64_t(units) * t / parts) * align;
  const int end = static_cast<int>(int64_t(units) * (t + 1) / parts) * align;
  return {std::min(begin, n), std::min(end, n)};
}

}  // namespace

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  stop_ = true;
  generation_.fetch_add(1);
  generation_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::worker(int index) {
  uint64_t seen = 0;
  for (;;) {
    // Spin briefly (the next matmul usually follows within microseconds), then sleep.
    for (int spin = 0; spin < 2000 && generation_.load(std::memory_order_acquire) == seen; ++spin)
      std::this_thread::yield();
    generation_.wait(seen, std::memory_order_acquire);
    seen = generation_.load(std::memory_order_acquire);
    if (stop_) return;
    const auto [begin, end] = slice(n_, align_, threads(), index);
    if (begin < end) (*body_)(begin, end);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
  }
}

void ThreadPool::parallel_for(int n, int align, const std::function<void(int, int)>& body) {
  if (workers_.empty() || n <= align) {
    if (n > 0) body(0, n);
    return;
  }
  body_ = &body;
  n_ = n;
  align_ = align;
  pending_.store(static_cast<int>(workers_.size()), std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  const auto [begin, end] = slice(n, align, threads(), 0);
  if (begin < end) body(begin, end);
  for (int left = pending_.load(std::memory_order_acquire); left != 0;
       left = pending_.load(std::memory_order_acquire))
    pending_.wait(left, std::memory_order_acquire);
}

}  // namespace tinycoral::llm
