// libFuzzer target: arbitrary bytes as a bitstream (plus host input and parameter streams) must
// make the virtual Edge TPU stop with an Error or finish, never crash, hang or touch memory out of
// bounds.
#include <cstddef>
#include <cstdint>
#include <span>

#include "chip/virtual_edge_tpu.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tinycoral::chip;
  if (size < 2) return 0;
  // First byte: how many 16-byte words of program; the rest goes to the input streams.
  const size_t words = 1 + data[0] % 64;
  const size_t program = std::min(size - 1, words * 16);
  std::span<const uint8_t> rest(data + 1 + program, size - 1 - program);
  ChipOptions options;
  // Close to the real budgets (limits.h), so that what the limits let through is fuzzed too.
  options.instruction_budget = 10'000'000;
  options.max_work_items = 1'000'000;
  options.max_buffered_bytes = 1 << 22;
  VirtualEdgeTpu chip(options);
  chip.receive(DmaTag::kInstructions, std::span<const uint8_t>(data + 1, program - program % 16));
  chip.receive(DmaTag::kInput, rest.first(rest.size() / 2));
  chip.receive(DmaTag::kParameters, rest.subspan(rest.size() / 2));
  for (int round = 0; round < 4; ++round) {
    const RunState state = chip.advance();
    while (chip.take_output()) {
    }
    while (chip.take_event()) {
    }
    if (state != RunState::kWaiting) break;
  }
  return 0;
}
