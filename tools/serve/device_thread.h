// The one thread that does the device work of `tinycoral serve`: every story and classification
// runs on it, while the HTTP worker that took the request waits. Requests hold the device one at a
// time anyway (DeviceLine); running their work on one thread keeps the memory that work touches -
// the deep stack of the simulator and interpreter, the thread's malloc caches - in one place,
// instead of growing in each of the 64 HTTP workers as each first serves a request (20 clients
// classifying for 15 s: resident memory 49.7 -> 58.5 MiB with the work on the workers, of which
// stacks 1.3 -> 2.3 MiB; 50.4 -> 51.7 MiB on this thread).
#pragma once

#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace tinycoral::serve {

class DeviceThread {
 public:
  DeviceThread();
  ~DeviceThread();  // finishes the job it runs, then joins
  DeviceThread(const DeviceThread&) = delete;
  DeviceThread& operator=(const DeviceThread&) = delete;

  // Runs `job` on the device thread and returns when it is done; an exception it throws is
  // rethrown here. Callers from several threads run one after another.
  void run(const std::function<void()>& job);

 private:
  void loop();
  std::mutex mutex_;
  std::condition_variable changed_;
  const std::function<void()>* job_ = nullptr;  // the job to run, null when there is none
  std::exception_ptr error_;
  bool done_ = false, stopping_ = false;
  std::mutex callers_;  // one caller at a time
  std::thread thread_;
};

}  // namespace tinycoral::serve
