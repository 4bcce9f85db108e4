// A tiny executable the virtual Edge TPU runs exactly: kCopyBytes of input go host -> avDataPop
// -> infeed -> ringConsumer0 -> wideToNarrow -> narrowToWide -> ringProducer -> outfeed -> host and
// come back unchanged, followed by scalar-core interrupt 0 (tests/chip/round_trip_program.h);
// wrapped in DMA hints the way a compiled model's inference program is (instructions, input,
// output, interrupt).
#pragma once

#include "chip/round_trip_program.h"
#include "container/executable.h"
#include "usb/test_programs.h"

namespace tinycoral::testing {

inline constexpr uint32_t kCopyBytes = 32;

inline std::vector<uint8_t> copy_bitstream() {
  return chip::testing::round_trip_program(/*narrow_word=*/100, kCopyBytes);
}

inline container::Executable copy_executable() {
  container::Executable e;
  e.name = "copy";
  e.type = container::ExecutableType::kExecutionOnly;
  e.dma_hints.fully_deterministic = true;
  container::Bitstream b;
  b.data = copy_bitstream();
  e.bitstreams.push_back(b);
  e.input_layers.push_back(make_layer("input", kCopyBytes, false));
  e.output_layers.push_back(make_layer("output", kCopyBytes, true));
  e.dma_hints.hints.push_back(instruction(0));
  e.dma_hints.hints.push_back(
      dma(container::Direction::kInfeed, container::BufferKind::kInput, "input", 0, kCopyBytes));
  e.dma_hints.hints.push_back(
      dma(container::Direction::kOutfeed, container::BufferKind::kOutput, "output", 0, kCopyBytes));
  e.dma_hints.hints.push_back(interrupt0());
  return e;
}

}  // namespace tinycoral::testing
