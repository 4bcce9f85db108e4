// A tiny executable the virtual Edge TPU runs exactly: kCopyBytes of input go host -> avDataPop
// -> infeed -> ringConsumer0 -> wideToNarrow -> narrowToWide -> ringProducer -> outfeed -> host and
// come back unchanged, followed by scalar-core interrupt 0. Same field recipe as the chip's own
// data-path test (tests/chip/virtual_edge_tpu_test.cpp); wrapped in DMA hints the way a compiled
// model's inference program is (instructions, input, output, interrupt).
#pragma once

#include "chip/program_builder.h"
#include "container/executable.h"
#include "usb/test_programs.h"

namespace tinycoral::testing {

inline constexpr uint32_t kCopyBytes = 32;

inline std::vector<uint8_t> copy_bitstream() {
  constexpr uint32_t kNarrowWord = 100;
  chip::testing::ProgramBuilder p;
  const size_t pop = p.add(0x25);
  p.set(pop, 12, 1, 1);  // activations
  p.set(pop, 44, 15, 16383);
  p.set(pop, 142, 14, kCopyBytes / 8 - 1);  // units of 8 bytes
  p.set(pop, 157, 1, 1);
  const size_t cons = p.add(0x11);
  p.set(cons, 12, 16, 1);
  p.set(cons, 60, 18, 8312);
  p.set(cons, 78, 17, 1);
  p.set(cons, 335, 2, 3);
  const size_t in = p.add(0x26);
  p.set(in, 12, 1, 1);
  p.set(in, 55, 20, 16383);
  p.set(in, 183, 14, kCopyBytes / 8 - 1);
  p.set(in, 203, 1, 1);
  p.set(in, 409, 16, 1);
  p.set(in, 438, 2, 3);
  const size_t w2n = p.add(0x14);
  p.set(w2n, 12, 16, 1);
  p.set(w2n, 60, 14, 8312);
  p.set(w2n, 78, 17, 1);
  p.set(w2n, 267, 16, kNarrowWord);
  p.set(w2n, 283, 17, 1);
  p.set(w2n, 300, 16, 7);
  p.set(w2n, 487, 2, 1);
  const size_t n2w = p.add(0x13);
  p.set(n2w, 12, 16, 1);
  p.set(n2w, 62, 16, kNarrowWord);
  p.set(n2w, 78, 17, 1);
  p.set(n2w, 95, 16, 7);
  p.set(n2w, 335, 14, 8000);
  p.set(n2w, 353, 17, 1);
  p.movi(1, kCopyBytes);
  p.movi(2, 3);  // tag 3: output
  p.movi(3, 0);
  p.descriptor(1, 2, 3);
  const size_t out = p.add(0x27);
  p.set(out, 43, 15, kCopyBytes / 8 - 1);
  p.set(out, 173, 2, 3);
  const size_t prod = p.add(0x10);
  p.set(prod, 12, 16, 1);
  p.set(prod, 60, 18, 8000);
  p.set(prod, 78, 17, 1);
  p.set(prod, 467, 17, 1u << 16);
  const size_t fence = p.add(0x24);
  p.set(fence, 57, 1, 1);
  p.set(fence, 73, 16, 0xffff);
  p.movi(4, 0);
  p.movi(30, 4);  // tag 4: scalar-core interrupt 0
  p.movi(31, 0);
  p.descriptor(4, 30, 31);
  return p.finish();
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
