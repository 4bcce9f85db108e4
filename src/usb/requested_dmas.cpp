// Programs whose DMA hints stop short (docs/driver.md "Device-requested DMAs"): with descr_ep 0xFF
// the device reports a descriptor for every host DMA it issues. Each is matched, in order, against
// the hinted transfers still unmatched (the first with another tag ends the search: the device
// reports in program order, the hints follow it); a descriptor that matches none is a request of
// the device's own. Requests are served strictly in order - an OUT only once every earlier output
// arrived, as the single bulk-OUT endpoint requires - so a program that writes a host scratch
// buffer and later asks for it back gets the bytes it wrote.
#include <algorithm>
#include <cstring>
#include <deque>

#include "common/error.h"
#include "usb/dma_engine.h"

namespace tinycoral::usb {
namespace {

struct Request {
  uint8_t tag = 0;
  uint64_t address = 0;
  std::span<uint8_t> bytes;
  bool hinted = false;
  bool matched = false;  // a hinted transfer whose descriptor arrived (device requests: always)
};

}  // namespace

void DmaEngine::run_requested(const RequestedProgram& program, Millis timeout) {
  const auto deadline = Clock::now() + timeout;
  std::deque<Request> requests;
  for (const RequestedProgram::Hinted& h : program.hinted)
    requests.push_back({h.tag, h.address, h.bytes, true, h.tag == 0});  // no descriptor for code

  // Output bytes arrive as one stream: each read fills the current output request, and whatever
  // runs past it waits for the next one.
  std::vector<uint8_t> spill;
  std::span<uint8_t> filling;
  size_t filled = 0;
  const std::function<void(size_t)> on_output = [&](size_t n) {
    spill.insert(spill.end(), staging_.begin(), staging_.begin() + static_cast<std::ptrdiff_t>(n));
  };
  auto take_spill = [&] {
    const size_t take = std::min(spill.size(), filling.size() - filled);
    if (take == 0) return;  // (an empty vector's data() may be null)
    std::memcpy(filling.data() + filled, spill.data(), take);
    spill.erase(spill.begin(), spill.begin() + static_cast<std::ptrdiff_t>(take));
    filled += take;
  };

  auto digest = [&](const DeviceDescriptor& d) {
    for (Request& r : requests) {
      if (!r.hinted || r.matched) continue;
      if (r.tag != d.tag) break;
      if (d.tag < 4 && (r.address != d.address || r.bytes.size() != d.length)) continue;
      r.matched = true;
      return;
    }
    if (d.tag == 0 || d.tag > 7)
      throw UsbError(TransferStatus::kError, cat("the device reported a descriptor with tag ",
                                                 int(d.tag), " (1-7 exist for it)"));
    const std::span<uint8_t> bytes = d.tag < 4 ? program.resolve(d) : std::span<uint8_t>();
    if (bytes.size() != (d.tag < 4 ? d.length : 0))
      fail("the host buffer for a device descriptor (tag ", int(d.tag), ", ", d.length,
           " bytes) has ", bytes.size());
    requests.push_back({d.tag, d.address, bytes, false, true});
  };
  auto step_or_fail = [&](const char* waiting_for) {
    if (!step(deadline, on_output))
      throw UsbError(TransferStatus::kTimedOut,
                     cat("the program did not ", waiting_for, " within ", timeout.count(), " ms"));
    while (!events_seen_.empty()) {
      const DeviceDescriptor d = events_seen_.front();
      events_seen_.pop_front();
      digest(d);
    }
  };

  events_seen_.clear();  // what earlier programs left is not this program's
  try {
    arm_listeners();
    bool completed = false;
    for (size_t next = 0;; ++next) {
      while (next == requests.size() ||
             (requests[next].hinted && !requests[next].matched && requests[next].tag >= 3)) {
        if (next == requests.size() && completed &&
            std::all_of(requests.begin(), requests.end(),
                        [](const Request& r) { return r.matched; }))
          return;
        step_or_fail(next == requests.size() ? "finish" : "report a hinted transfer");
      }
      Request& r = requests[next];
      if (r.tag <= 2) {
        send({static_cast<Tag>(r.tag), r.bytes}, deadline, timeout, on_output);
      } else if (r.tag == 3) {
        filling = r.bytes;
        filled = 0;
        take_spill();
        while (filled < filling.size()) {
          if (output_transfer_.status != TransferStatus::kPending)
            post_output_read(filling.size() - filled);
          step_or_fail("send the output it announced");
          take_spill();
        }
      } else if (r.tag == 4) {
        completed = true;
      }
    }
  } catch (...) {
    abort_in_flight();
    throw;
  }
}

}  // namespace tinycoral::usb
