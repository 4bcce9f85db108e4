// What the host side sees of an Edge TPU: the seam between the virtual chip and whatever carries
// its traffic (the virtual stick's wire protocol, or a direct in-process call in tests). Mirrors
// the single-endpoint USB data path (docs/driver.md): host-to-device DMAs tagged 0 instructions, 1
// inputs/scratch, 2 parameters; device-to-host output DMAs (EP 0x81) and 16-byte events (EP 0x82).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace tinycoral::chip {

enum class DmaTag : uint8_t { kInstructions = 0, kInput = 1, kParameters = 2, kOutput = 3 };

// A host DMA descriptor the scalar core issued, as an EP 0x82 event record: tags 1/2 ask for host
// bytes, 3 announces output bytes, 4..7 are scalar-core interrupts 0..3. The USB side forwards the
// tags its descr_ep register enables.
struct HostEvent {
  uint64_t address = 0;
  uint32_t length = 0;
  uint8_t tag = 0;
};

enum class RunState : uint8_t {
  kIdle,     // no program running
  kWaiting,  // a program runs and waits for host data (a pending infeed) or for its outputs to be
             // read
  kFaulted,  // the program stopped on an error; fault() says why
};

class HostPort {
 public:
  virtual ~HostPort() = default;

  // Chip reset: clears all tile and scalar state, including resident parameters.
  virtual void reset() = 0;
  // One complete host-to-device DMA, as delimited by a bulk-OUT header.
  virtual void receive(DmaTag tag, std::span<const uint8_t> payload) = 0;
  // Runs every unit until none can make progress; returns what the chip is doing then.
  virtual RunState advance() = 0;
  // The next device-to-host output DMA, if one was produced (each ends with a short packet on USB).
  virtual std::optional<std::vector<uint8_t>> take_output() = 0;
  virtual std::optional<HostEvent> take_event() = 0;
  // Why the chip faulted (word offset, opcode, what went wrong); empty when it has not.
  virtual std::string fault() const = 0;
};

}  // namespace tinycoral::chip
