// The one device session of `tinycoral serve` serves one request at a time, in arrival order. A
// request joins the line, learns its place while it waits (so that the page can say "busy, place
// N" instead of hanging) and holds the device until its Turn ends. A waiter whose client went away
// leaves the line without ever taking the device.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <mutex>

namespace tinycoral::serve {

class DeviceLine {
 public:
  // Holds the device while it lives (its destructor lets the next request in).
  class Turn {
   public:
    Turn(Turn&& other) noexcept : line_(other.line_), id_(other.id_) { other.line_ = nullptr; }
    Turn(const Turn&) = delete;
    Turn& operator=(const Turn&) = delete;
    Turn& operator=(Turn&&) = delete;
    ~Turn();
    explicit operator bool() const { return line_ != nullptr; }

   private:
    friend class DeviceLine;
    Turn(DeviceLine* line, uint64_t id) : line_(line), id_(id) {}
    DeviceLine* line_;
    uint64_t id_;
  };

  // Waits for the device. While waiting, `waiting(place)` is called at once and then every
  // `interval` (place 1 = next in line); when it returns false the request leaves the line and an
  // empty Turn comes back.
  Turn wait(const std::function<bool(size_t place)>& waiting,
            std::chrono::milliseconds interval = std::chrono::milliseconds(500));

  // Requests in line, the one holding the device included.
  size_t length() const;

 private:
  void leave(uint64_t id);
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::list<uint64_t> line_;  // front: the request holding the device
  uint64_t next_id_ = 0;
};

}  // namespace tinycoral::serve
