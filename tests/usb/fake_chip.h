// A small stand-in for the virtual Edge TPU behind chip::HostPort, for the driver's and runtime's
// tests and benchmarks (the real virtual chip is tested on its own). Its "program" is the first 16
// bytes of the instruction DMA: u32 infeed bytes expected (inputs + parameters, in any DMAs),
// u32 output count, u32 bytes per output, u32 salt. Parameters (tag 2) of a program without outputs
// (a caching program) stay resident until reset() like cached weights. Once every infeed byte
// arrived it emits the outputs - output k, byte j = infeed[(k * size + j) % infeed size] + resident
// parameter sum + salt + k - then one tag-4 event.
#pragma once

#include <cstring>
#include <deque>

#include "chip/host_port.h"

namespace tinycoral::testing {

class FakeChip final : public chip::HostPort {
 public:
  void reset() override {
    resident_sum_ = 0;
    running_ = false;
    infeed_.clear();
    outputs_.clear();
    events_.clear();
    ++resets;
  }
  void receive(chip::DmaTag tag, std::span<const uint8_t> payload) override {
    if (tag == chip::DmaTag::kInstructions) {
      if (payload.size() < 16) return;
      std::memcpy(&expected_, payload.data(), 4);
      std::memcpy(&output_count_, payload.data() + 4, 4);
      std::memcpy(&output_size_, payload.data() + 8, 4);
      std::memcpy(&salt_, payload.data() + 12, 4);
      infeed_.clear();
      if (output_count_ == 0) resident_sum_ = 0;  // a caching program replaces the weights
      running_ = true;
      ++programs;
      return;
    }
    if (!running_) return;
    if (tag == chip::DmaTag::kParameters && output_count_ == 0)  // a caching program
      for (uint8_t b : payload) resident_sum_ += b;
    infeed_.insert(infeed_.end(), payload.begin(), payload.end());
  }
  chip::RunState advance() override {
    if (!running_) return chip::RunState::kIdle;
    if (infeed_.size() < expected_) return chip::RunState::kWaiting;
    for (uint32_t k = 0; k < output_count_; ++k) {
      std::vector<uint8_t> out(output_size_);
      for (uint32_t j = 0; j < output_size_; ++j) {
        const uint8_t in =
            infeed_.empty() ? 0 : infeed_[(size_t(k) * output_size_ + j) % infeed_.size()];
        out[j] = static_cast<uint8_t>(in + resident_sum_ + salt_ + k);
      }
      outputs_.push_back(std::move(out));
    }
    events_.push_back(chip::HostEvent{0, 0, 4});
    running_ = false;
    return chip::RunState::kIdle;
  }
  std::optional<std::vector<uint8_t>> take_output() override {
    if (outputs_.empty()) return std::nullopt;
    auto o = std::move(outputs_.front());
    outputs_.pop_front();
    return o;
  }
  std::optional<chip::HostEvent> take_event() override {
    if (events_.empty()) return std::nullopt;
    auto e = events_.front();
    events_.pop_front();
    return e;
  }
  std::string fault() const override { return {}; }

  // The program header the fake chip understands.
  static std::vector<uint8_t> program(uint32_t infeed_bytes, uint32_t outputs, uint32_t output_size,
                                      uint32_t salt = 0) {
    std::vector<uint8_t> bits(16, 0);
    std::memcpy(bits.data(), &infeed_bytes, 4);
    std::memcpy(bits.data() + 4, &outputs, 4);
    std::memcpy(bits.data() + 8, &output_size, 4);
    std::memcpy(bits.data() + 12, &salt, 4);
    return bits;
  }

  int programs = 0;
  int resets = 0;
  uint32_t resident_sum_ = 0;

 private:
  bool running_ = false;
  uint32_t expected_ = 0, output_count_ = 0, output_size_ = 0, salt_ = 0;
  std::vector<uint8_t> infeed_;
  std::deque<std::vector<uint8_t>> outputs_;
  std::deque<chip::HostEvent> events_;
};

}  // namespace tinycoral::testing
