// A HostPort decorator that measures the time spent inside the (simulated) chip, so that the host's
// own share of an inference - runtime plus transport - can be reported without the simulation.
#pragma once

#include <chrono>
#include <cstdint>

#include "chip/host_port.h"

namespace tinycoral::runtime {

class TimedHostPort final : public chip::HostPort {
 public:
  explicit TimedHostPort(chip::HostPort& inner) : inner_(inner) {}
  void reset() override {
    timed([&] { inner_.reset(); });
  }
  void receive(chip::DmaTag tag, std::span<const uint8_t> payload) override {
    timed([&] { inner_.receive(tag, payload); });
  }
  chip::RunState advance() override {
    chip::RunState state{};
    timed([&] { state = inner_.advance(); });
    return state;
  }
  std::optional<std::vector<uint8_t>> take_output() override { return inner_.take_output(); }
  std::optional<chip::HostEvent> take_event() override { return inner_.take_event(); }
  std::string fault() const override { return inner_.fault(); }

  uint64_t chip_ns() const { return chip_ns_; }

 private:
  template <typename F>
  void timed(F&& f) {
    const auto start = std::chrono::steady_clock::now();
    f();
    chip_ns_ += static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                          std::chrono::steady_clock::now() - start)
                                          .count());
  }
  chip::HostPort& inner_;
  uint64_t chip_ns_ = 0;
};

}  // namespace tinycoral::runtime
