#include "device_line.h"

#include <algorithm>
#include <iterator>

namespace tinycoral::serve {

DeviceLine::Turn::~Turn() {
  if (line_) line_->leave(id_);
}

DeviceLine::Turn DeviceLine::wait(const std::function<bool(size_t place)>& waiting,
                                  std::chrono::milliseconds interval) {
  std::unique_lock lock(mutex_);
  const uint64_t id = next_id_++;
  line_.push_back(id);
  while (line_.front() != id) {
    const auto at = std::find(line_.begin(), line_.end(), id);
    const size_t place = static_cast<size_t>(std::distance(line_.begin(), at));
    lock.unlock();  // the callback writes to a socket: never under the lock
    const bool stay = waiting(place);
    lock.lock();
    if (!stay) {
      line_.erase(std::find(line_.begin(), line_.end(), id));
      changed_.notify_all();
      return Turn(nullptr, id);
    }
    if (line_.front() != id) changed_.wait_for(lock, interval);
  }
  return Turn(this, id);
}

size_t DeviceLine::length() const {
  std::lock_guard lock(mutex_);
  return line_.size();
}

void DeviceLine::leave(uint64_t id) {
  std::lock_guard lock(mutex_);
  line_.erase(std::find(line_.begin(), line_.end(), id));
  changed_.notify_all();
}

}  // namespace tinycoral::serve
