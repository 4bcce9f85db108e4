// The in-process transport to a VirtualStick: control transfers go straight to the stick, bulk
// transfers are queued per endpoint and completed in submission order as the stick has data - the
// same semantics as URBs on a real bus, without a bus. Because the stick is deterministic, a wait
// that cannot be satisfied returns at once instead of sleeping until the deadline, which keeps
// fault-injection tests fast; the caller sees the same "timed out" outcome.
#pragma once

#include <deque>
#include <map>

#include "usb/transport.h"
#include "usb/virtual_stick.h"

namespace tinycoral::usb {

class VirtualTransport final : public Transport {
 public:
  explicit VirtualTransport(VirtualStick& stick) : stick_(stick) {}
  ~VirtualTransport() override;

  bool wait_any(Clock::time_point deadline) override;
  void cancel(Transfer& transfer) override;
  void cancel_all(Millis timeout) override;
  LinkSpeed speed() const override { return LinkSpeed::kSuper; }
  std::string describe() const override { return "virtual stick"; }

  VirtualStick& stick() { return stick_; }

 protected:
  ControlResult do_control(const Setup& setup, std::span<uint8_t> data, Millis timeout) override;
  void do_submit(Transfer& transfer) override;

 private:
  void pump();
  void finish(Transfer& transfer, TransferStatus status, size_t actual);

  VirtualStick& stick_;
  std::map<uint8_t, std::deque<Transfer*>> pending_;  // per endpoint, in submission order
  uint64_t finished_ = 0, reported_ = 0;
};

}  // namespace tinycoral::usb
