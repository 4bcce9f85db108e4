// A small program the virtual Edge TPU runs exactly, shared by the chip's data-path tests and the
// libusb path tests (tests/umockdev): `bytes` (a multiple of 8, at most 256) of host input go
// avDataPop -> infeed -> ringConsumer0 -> wideToNarrow -> narrowToWide -> ringProducer -> outfeed
// and come back unchanged, followed by scalar-core interrupt 0. `narrow_word` is where the row
// lands in narrow memory.
#pragma once

#include "chip/program_builder.h"

namespace tinycoral::chip::testing {

inline std::vector<uint8_t> round_trip_program(uint32_t narrow_word, uint32_t bytes = 32) {
  ProgramBuilder p;
  const size_t pop = p.add(0x25);
  p.set(pop, 12, 1, 1);  // activations
  p.set(pop, 44, 15, 16383);
  p.set(pop, 142, 14, bytes / 8 - 1);  // units of 8 bytes
  p.set(pop, 157, 1, 1);
  const size_t cons = p.add(0x11);
  p.set(cons, 12, 16, 1);
  p.set(cons, 60, 18, 8312);
  p.set(cons, 78, 17, 1);
  p.set(cons, 335, 2, 3);
  const size_t in = p.add(0x26);
  p.set(in, 12, 1, 1);
  p.set(in, 55, 20, 16383);
  p.set(in, 183, 14, bytes / 8 - 1);
  p.set(in, 203, 1, 1);
  p.set(in, 409, 16, 1);
  p.set(in, 438, 2, 3);
  const size_t w2n = p.add(0x14);
  p.set(w2n, 12, 16, 1);
  p.set(w2n, 60, 14, 8312);
  p.set(w2n, 78, 17, 1);
  p.set(w2n, 267, 16, narrow_word);
  p.set(w2n, 283, 17, 1);
  p.set(w2n, 300, 16, 7);
  p.set(w2n, 487, 2, 1);
  const size_t n2w = p.add(0x13);
  p.set(n2w, 12, 16, 1);
  p.set(n2w, 62, 16, narrow_word);
  p.set(n2w, 78, 17, 1);
  p.set(n2w, 95, 16, 7);
  p.set(n2w, 335, 14, 8000);
  p.set(n2w, 353, 17, 1);
  p.movi(1, bytes);
  p.movi(2, 3);
  p.movi(3, 0);
  p.descriptor(1, 2, 3);  // the output
  const size_t out = p.add(0x27);
  p.set(out, 43, 15, bytes / 8 - 1);
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
  p.movi(30, 4);  // tag 4 = scalar-core interrupt 0
  p.movi(31, 0);
  p.descriptor(4, 30, 31);
  return p.finish();
}

}  // namespace tinycoral::chip::testing
