// CSR reads and writes as vendor control transfers, with bounded retries and bounded polls.
#include "usb/csr.h"

#include <array>

#include "common/error.h"
#include "usb/protocol.h"

namespace tinycoral::usb {
namespace {

constexpr int kControlAttempts = 3;

bool worth_retrying(TransferStatus status) {
  return status == TransferStatus::kError || status == TransferStatus::kStalled;
}

Setup csr_setup(uint8_t type, uint8_t request, uint32_t address) {
  return Setup{type, request, static_cast<uint16_t>(address & 0xFFFF),
               static_cast<uint16_t>(address >> 16)};
}

}  // namespace

uint64_t Csr::read(uint8_t request, uint32_t address, size_t bytes) {
  std::array<uint8_t, 8> buffer{};
  for (int attempt = 1;; ++attempt) {
    try {
      const size_t got = transport_.control_in(csr_setup(kVendorIn, request, address),
                                               std::span(buffer.data(), bytes), timeout_);
      if (got != bytes)
        fail("CSR 0x", std::hex, address, ": read returned ", std::dec, got, " bytes, expected ",
             bytes);
      uint64_t value = 0;
      for (size_t i = 0; i < bytes; ++i) value |= uint64_t{buffer[i]} << (8 * i);
      return value;
    } catch (const UsbError& e) {
      if (attempt >= kControlAttempts || !worth_retrying(e.status())) throw;
    }
  }
}

void Csr::write(uint8_t request, uint32_t address, uint64_t value, size_t bytes) {
  std::array<uint8_t, 8> buffer{};
  for (size_t i = 0; i < bytes; ++i) buffer[i] = static_cast<uint8_t>(value >> (8 * i));
  for (int attempt = 1;; ++attempt) {
    try {
      transport_.control_out(csr_setup(kVendorOut, request, address),
                             std::span<const uint8_t>(buffer.data(), bytes), timeout_);
      return;
    } catch (const UsbError& e) {
      if (attempt >= kControlAttempts || !worth_retrying(e.status())) throw;
    }
  }
}

uint32_t Csr::read32(uint32_t address) { return static_cast<uint32_t>(read(kCsr32, address, 4)); }
void Csr::write32(uint32_t address, uint32_t value) { write(kCsr32, address, value, 4); }
uint64_t Csr::read64(uint32_t address) { return read(kCsr64, address, 8); }
void Csr::write64(uint32_t address, uint64_t value) { write(kCsr64, address, value, 8); }

void Csr::modify32(uint32_t address, uint32_t mask, uint32_t value) {
  const uint32_t old = read32(address);
  write32(address, (old & ~mask) | (value & mask));
}

void Csr::poll32(uint32_t address, uint32_t mask, uint32_t expected, int max_reads) {
  uint32_t last = 0;
  for (int i = 0; i < max_reads; ++i) {
    last = read32(address);
    if ((last & mask) == expected) return;
  }
  fail("CSR 0x", std::hex, address, " never reached 0x", expected, " under mask 0x", mask,
       " (last read 0x", last, ") after ", std::dec, max_reads, " reads");
}

void Csr::poll64(uint32_t address, uint64_t mask, uint64_t expected, int max_reads) {
  uint64_t last = 0;
  for (int i = 0; i < max_reads; ++i) {
    last = read64(address);
    if ((last & mask) == expected) return;
  }
  fail("CSR 0x", std::hex, address, " never reached 0x", expected, " under mask 0x", mask,
       " (last read 0x", last, ") after ", std::dec, max_reads, " reads");
}

}  // namespace tinycoral::usb
