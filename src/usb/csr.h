// Register (CSR) access over vendor control transfers: 32-bit for the 0x1xxxx block, 64-bit for the
// 0x4xxxx block (docs/driver.md "Register access"). Transient USB errors are retried; a timeout or
// a vanished stick is not (retrying a wedged firmware only multiplies the wait).
#pragma once

#include <cstdint>

#include "usb/transport.h"

namespace tinycoral::usb {

class Csr {
 public:
  explicit Csr(Transport& transport, Millis timeout = Millis(6000))
      : transport_(transport), timeout_(timeout) {}

  uint32_t read32(uint32_t address);
  void write32(uint32_t address, uint32_t value);
  uint64_t read64(uint32_t address);
  void write64(uint32_t address, uint64_t value);
  // Read-modify-write of the bits in `mask`.
  void modify32(uint32_t address, uint32_t mask, uint32_t value);
  // Reads until (value & mask) == expected, at most `max_reads` times; throws Error naming the
  // register and what it last read otherwise (a poll must never spin forever).
  void poll32(uint32_t address, uint32_t mask, uint32_t expected, int max_reads = 100);
  void poll64(uint32_t address, uint64_t mask, uint64_t expected, int max_reads = 100);

  Transport& transport() { return transport_; }
  void set_timeout(Millis timeout) { timeout_ = timeout; }
  Millis timeout() const { return timeout_; }

 private:
  uint64_t read(uint8_t request, uint32_t address, size_t bytes);
  void write(uint8_t request, uint32_t address, uint64_t value, size_t bytes);

  Transport& transport_;
  Millis timeout_;
};

}  // namespace tinycoral::usb
