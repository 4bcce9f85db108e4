// An open Edge TPU behind a transport (a real stick or the virtual stick): the open and close
// sequences, parameter caching (the caching program runs once per token and its weights stay
// resident), inferences, and recovery (docs/driver.md "Recovery"): a stalled program is detected by
// timeout, everything in flight is cancelled, both IN pipes drained, the chip re-opened and a
// canary - the first inference this device ran, replayed - must come back bit-exact before the
// device is used again. A stick whose firmware no longer answers gets an error that says to replug.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/chip_control.h"
#include "runtime/device_lock.h"
#include "runtime/program.h"
#include "runtime/stick_time.h"
#include "usb/csr.h"
#include "usb/dma_engine.h"
#include "usb/transport.h"

namespace tinycoral::runtime {

class TimedHostPort;

struct EdgeTpuOptions {
  ClockLevel clock = ClockLevel::kHigh;
  usb::Millis timeout{6000};       // per segment of a program
  usb::Millis alive_timeout{500};  // "does the firmware answer" probe during recovery
  bool recover = true;             // recover and retry once after a stall
  // The virtual Edge TPU (--device sim): it runs each program to its end inside the transfer that
  // starts it and its transport never waits on a clock, so a "timeout" means the program itself
  // stopped short. Such a failure is the program's: no recovery and retry (which would only run it
  // again) and no advice to replug a stick that does not exist.
  bool simulated = false;
};

class EdgeTpu {
 public:
  // `keep_alive` owns whatever the transport talks to (the virtual stick and chip); `lock` is the
  // stick's lock (null for the virtual stick). The chip is opened here.
  EdgeTpu(std::unique_ptr<usb::Transport> transport, std::shared_ptr<void> keep_alive,
          std::unique_ptr<DeviceLock> lock, EdgeTpuOptions options = {});
  ~EdgeTpu();  // closes the chip (errors are swallowed: a dying stick must not abort the exit)
  EdgeTpu(const EdgeTpu&) = delete;
  EdgeTpu& operator=(const EdgeTpu&) = delete;

  // Runs one inference: `caching` (may be null) first when it has not run under the resident token
  // (a new token evicts every model's weights), then
  // `inference`, whose inputs were set with Program::set_input. Throws Error when the device fails
  // and recovery does not bring it back.
  void run(const std::shared_ptr<Program>& caching, const std::shared_ptr<Program>& inference);

  std::string description() const { return transport_->describe(); }
  bool is_virtual() const { return lock_ == nullptr; }
  const usb::TransferCounters& counters() const { return transport_->counters(); }
  void reset_counters() { transport_->reset_counters(); }
  int recoveries() const { return recoveries_; }
  const ChipInfo& chip_info() const { return chip_info_; }
  usb::Transport& transport() { return *transport_; }
  usb::Csr& csr() { return csr_; }
  // Time spent inside a simulated chip so far (0 for a real stick): the host's share of an
  // inference is its wall time minus this.
  void set_chip_timer(const TimedHostPort* timer) { chip_timer_ = timer; }
  uint64_t simulated_chip_ns() const;
  // The virtual chip's clock (modeled cycles so far); unset for a real stick.
  void set_clock_source(std::function<chip::ClockStats()> source) {
    clock_source_ = std::move(source);
  }
  // What the last run() did, per program (the caching program only when it ran): modeled cycles
  // (virtual chip only) and the bytes each way, for stick_time().
  struct LastRun {
    ProgramRun caching, inference;
  };
  const LastRun& last_run() const { return last_run_; }
  // Extra words for a failure's message (the virtual stick says why its chip faulted).
  void set_diagnosis(std::function<std::string()> diagnose) { diagnose_ = std::move(diagnose); }

 private:
  void open();
  void run_checked(const std::shared_ptr<Program>& caching,
                   const std::shared_ptr<Program>& inference);
  void run_once(const std::shared_ptr<Program>& caching, const std::shared_ptr<Program>& inference);
  void run_program(Program& program, ProgramRun& record);
  void recover(const std::string& why);
  void run_canary();

  std::unique_ptr<usb::Transport> transport_;
  std::shared_ptr<void> keep_alive_;
  std::unique_ptr<DeviceLock> lock_;
  EdgeTpuOptions options_;
  usb::Csr csr_;
  usb::DmaEngine engine_;
  ChipInfo chip_info_;
  uint64_t resident_token_ = 0;  // parameter-caching token whose weights are on the chip
  // The caching programs that ran under resident_token_: co-compiled models (the SSD pipeline's
  // four segments) share one token and keep their weights in disjoint on-chip memory, so each
  // loads its own once; a new token invalidates them all (libedgetpu's currently_cached_refs_).
  std::vector<std::weak_ptr<const Program>> resident_caching_;
  bool open_ = false;
  bool descriptors_from_device_ = false;  // descr_ep 0xFF (device-requested DMAs) is set
  int recoveries_ = 0;
  const TimedHostPort* chip_timer_ = nullptr;
  std::function<std::string()> diagnose_;
  std::function<chip::ClockStats()> clock_source_;
  LastRun last_run_;

  // The canary: the first inference that succeeded, its padded inputs and raw device outputs.
  struct Canary {
    std::shared_ptr<Program> caching, inference;
    std::vector<std::vector<uint8_t>> inputs, outputs;
  };
  std::unique_ptr<Canary> canary_;
};

}  // namespace tinycoral::runtime
