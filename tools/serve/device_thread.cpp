#include "device_thread.h"

#include <utility>

namespace tinycoral::serve {

DeviceThread::DeviceThread() : thread_([this] { loop(); }) {}

DeviceThread::~DeviceThread() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void DeviceThread::run(const std::function<void()>& job) {
  std::lock_guard caller(callers_);
  std::unique_lock lock(mutex_);
  job_ = &job;
  done_ = false;
  error_ = nullptr;
  changed_.notify_all();
  changed_.wait(lock, [this] { return done_; });
  job_ = nullptr;
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void DeviceThread::loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [this] { return stopping_ || (job_ && !done_); });
    if (stopping_) return;
    const std::function<void()>* job = job_;
    lock.unlock();
    std::exception_ptr error;
    try {
      (*job)();
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    error_ = error;
    done_ = true;
    changed_.notify_all();
  }
}

}  // namespace tinycoral::serve
