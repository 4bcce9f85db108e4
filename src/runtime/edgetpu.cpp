// Running programs on an open Edge TPU, with parameter caching and recovery.
#include "runtime/edgetpu.h"

#include <algorithm>

#include "common/error.h"
#include "runtime/timed_host_port.h"
#include "usb/protocol.h"

namespace tinycoral::runtime {

EdgeTpu::EdgeTpu(std::unique_ptr<usb::Transport> transport, std::shared_ptr<void> keep_alive,
                 std::unique_ptr<DeviceLock> lock, EdgeTpuOptions options)
    : transport_(std::move(transport)),
      keep_alive_(std::move(keep_alive)),
      lock_(std::move(lock)),
      options_(options),
      csr_(*transport_),
      engine_(*transport_, csr_) {
  open();
}

EdgeTpu::~EdgeTpu() {
  try {
    engine_.cancel_all();
    if (open_) close_chip(csr_);
  } catch (...) {
    // The stick may be gone or wedged, or memory exhausted (the close sequence may allocate); the
    // process must still exit cleanly.
  }
}

uint64_t EdgeTpu::simulated_chip_ns() const { return chip_timer_ ? chip_timer_->chip_ns() : 0; }

void EdgeTpu::open() {
  try {
    chip_info_ = open_chip(csr_, transport_->speed(), options_.clock);
  } catch (const usb::UsbError& e) {
    if (e.status() == usb::TransferStatus::kNoDevice)
      fail("the stick (", description(), ") left the bus while opening: plug it in again");
    fail("the stick (", description(), ") does not answer (", e.what(), "): unplug and replug it");
  }
  open_ = true;
  descriptors_from_device_ = false;  // open_chip set descr_ep to the interrupts only
  resident_token_ = 0;
  resident_caching_.clear();
}

void EdgeTpu::run_program(Program& program, ProgramRun& record) {
  const usb::TransferCounters before = transport_->counters();
  const chip::ClockStats clock_before = clock_source_ ? clock_source_() : chip::ClockStats{};
  // The device reports its own DMA requests (descr_ep 0xFF) only for programs that need them:
  // every other program runs on its hints with the interrupts alone reported, as before.
  const bool requested = program.requested().has_value();
  if (requested != descriptors_from_device_) {
    csr_.write64(usb::reg::kDescrEp, requested ? 0xFF : 0xF0);
    descriptors_from_device_ = requested;
  }
  if (requested)
    engine_.run_requested(*program.requested(), options_.timeout);
  else
    for (const usb::Segment& segment : program.segments()) engine_.run(segment, options_.timeout);
  const usb::TransferCounters& after = transport_->counters();
  record.ran = true;
  record.bytes_to_device = after.bulk_out_bytes - before.bulk_out_bytes;
  record.bytes_from_device = after.bulk_in_bytes - before.bulk_in_bytes;
  if (clock_source_) {
    const chip::ClockStats clock = clock_source_();
    record.cycles = clock.cycles - clock_before.cycles;
    for (size_t u = 0; u < record.busy_cycles.size(); ++u)
      record.busy_cycles[u] = clock.busy_cycles[u] - clock_before.busy_cycles[u];
  }
}

void EdgeTpu::run_once(const std::shared_ptr<Program>& caching,
                       const std::shared_ptr<Program>& inference) {
  last_run_ = {};
  const uint64_t token = inference->executable().parameter_caching_token;
  if (token == 0 || token != resident_token_) {
    resident_token_ = 0;
    resident_caching_.clear();
  }
  const auto is_resident = [&] {
    if (resident_token_ == 0 || caching->executable().parameter_caching_token != resident_token_)
      return false;
    for (const auto& loaded : resident_caching_)
      if (loaded.lock() == caching) return true;
    return false;
  };
  if (caching && !is_resident()) {
    const uint64_t caching_token = caching->executable().parameter_caching_token;
    if (caching_token != resident_token_) resident_caching_.clear();
    run_program(*caching, last_run_.caching);
    resident_token_ = caching_token;
    std::erase_if(resident_caching_, [](const auto& loaded) { return loaded.expired(); });
    resident_caching_.push_back(caching);
  }
  run_program(*inference, last_run_.inference);
}

void EdgeTpu::run(const std::shared_ptr<Program>& caching,
                  const std::shared_ptr<Program>& inference) {
  try {
    run_checked(caching, inference);
  } catch (const Error& e) {
    if (options_.simulated) throw;  // run_checked named the chip's fault already
    const std::string more = diagnose_ ? diagnose_() : "";
    if (more.empty()) throw;
    throw Error(std::string(e.what()) + " [" + more + "]");
  }
}

void EdgeTpu::run_checked(const std::shared_ptr<Program>& caching,
                          const std::shared_ptr<Program>& inference) {
  try {
    run_once(caching, inference);
  } catch (const usb::UsbError& e) {
    if (options_.simulated) {
      const std::string what =
          e.status() == usb::TransferStatus::kTimedOut
              ? "the virtual Edge TPU stopped before the program signalled completion (it ended "
                "without its completion interrupt, or waits for data the host never sends)"
              : cat("the virtual Edge TPU failed the program (", e.what(), ")");
      std::string more = diagnose_ ? diagnose_() : "";
      std::replace(more.begin(), more.end(), '\n', ' ');  // one line (a deadlock report has many)
      try {  // a fresh chip for the next inference; the error is this one's
        engine_.drain(usb::Millis(0));
        open();
      } catch (...) {
      }
      // The chip's own account ("virtual Edge TPU: program 1 exceeded ...") says it best.
      fail(more.empty() ? what : more);
    }
    if (e.status() == usb::TransferStatus::kNoDevice)
      fail("the stick (", description(), ") left the bus (", e.what(), "): plug it in again");
    if (!options_.recover) throw;
    const std::string why = e.what();
    recover(why);
    try {
      run_once(caching, inference);
    } catch (const usb::UsbError& again) {
      fail("the inference failed again after recovering the stick (first: ", why,
           "; then: ", again.what(), "): unplug and replug the stick");
    }
  }
  if (!canary_) {
    canary_ = std::make_unique<Canary>();
    canary_->caching = caching;
    canary_->inference = inference;
    canary_->inputs = inference->input_buffers();
    canary_->outputs = inference->output_buffers();
  }
}

void EdgeTpu::recover(const std::string& why) {
  ++recoveries_;
  engine_.cancel_all();
  // Is the firmware itself alive? A wedged one never answers; only a replug helps (a port reset
  // would make it vanish), so say so instead of touching it further.
  const usb::Millis saved = csr_.timeout();
  csr_.set_timeout(options_.alive_timeout);
  try {
    csr_.read32(usb::reg::kScuCtrl0);
  } catch (const Error& e) {
    csr_.set_timeout(saved);
    // The close sequence could only wait out a control timeout per request on this stick.
    open_ = false;
    fail("the stick (", description(), ") stopped answering after a failed transfer (", why,
         "); its firmware is wedged: unplug and replug the stick");
  }
  csr_.set_timeout(saved);
  try {
    engine_.drain(usb::Millis(50));
    open();
    run_canary();
  } catch (const Error& e) {
    fail("recovering the stick (", description(), ") after \"", why, "\" failed: ", e.what(),
         "; unplug and replug the stick");
  }
}

namespace {
// Copies byte for byte into the existing buffers: the program's segments point into them.
void copy_into(std::vector<std::vector<uint8_t>>& to,
               const std::vector<std::vector<uint8_t>>& from) {
  for (size_t i = 0; i < to.size() && i < from.size(); ++i)
    std::copy(from[i].begin(),
              from[i].begin() + static_cast<long>(std::min(from[i].size(), to[i].size())),
              to[i].begin());
}
}  // namespace

void EdgeTpu::run_canary() {
  if (!canary_) return;  // nothing ran successfully yet: the retried inference is the first
  Program& program = *canary_->inference;
  const std::vector<std::vector<uint8_t>> saved = program.input_buffers();
  copy_into(program.input_buffers(), canary_->inputs);
  try {
    run_once(canary_->caching, canary_->inference);
  } catch (...) {
    copy_into(program.input_buffers(), saved);
    throw;
  }
  const bool same = program.output_buffers() == canary_->outputs;
  copy_into(program.input_buffers(), saved);
  if (!same) fail("the canary inference did not come back bit-exact after recovery");
}

}  // namespace tinycoral::runtime
