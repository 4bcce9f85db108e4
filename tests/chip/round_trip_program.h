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
  p.set(pop, "stream", 1);  // activations
  p.set(pop, "walk.cnt0", 16383);
  p.set(pop, "count_m1", bytes / 8 - 1);  // units of 8 bytes
  p.set(pop, "tail_en", 1);
  const size_t cons = p.add(0x11);
  p.set(cons, "tiles", 1);
  p.set(cons, "addr", 8312);
  p.set(cons, "inc0", 1);
  p.set(cons, "mode", 3);
  const size_t in = p.add(0x26);
  p.set(in, "stream", 1);
  p.set(in, "walk.cnt0", 16383);
  p.set(in, "count_m1", bytes / 8 - 1);
  p.set(in, "tail_en", 1);
  p.set(in, "dest", 1);
  p.set(in, "lanes_m1", 3);
  const size_t w2n = p.add(0x14);
  p.set(w2n, "tiles", 1);
  p.set(w2n, "w.addr", 8312);
  p.set(w2n, "w.inc0", 1);
  p.set(w2n, "n.addr", narrow_word);
  p.set(w2n, "n.inc0", 1);
  p.set(w2n, "n.cnt0", 7);
  p.set(w2n, "mode", 1);
  const size_t n2w = p.add(0x13);
  p.set(n2w, "tiles", 1);
  p.set(n2w, "n.addr", narrow_word);
  p.set(n2w, "n.inc0", 1);
  p.set(n2w, "n.cnt0", 7);
  p.set(n2w, "w.addr", 8000);
  p.set(n2w, "w.inc0", 1);
  p.movi(1, bytes);
  p.movi(2, 3);
  p.movi(3, 0);
  p.descriptor(1, 2, 3);  // the output
  const size_t out = p.add(0x27);
  p.set(out, "walk.cnt0", bytes / 8 - 1);
  p.set(out, "k173", 3);
  const size_t prod = p.add(0x10);
  p.set(prod, "tiles", 1);
  p.set(prod, "addr", 8000);
  p.set(prod, "inc0", 1);
  p.set(prod, "dest", 1u << 16);
  const size_t fence = p.add(0x24);
  p.set(fence, "tokwait", 1);
  p.set(fence, "tmask", 0xffff);
  p.movi(4, 0);
  p.movi(30, 4);  // tag 4 = scalar-core interrupt 0
  p.movi(31, 0);
  p.descriptor(4, 30, 31);
  return p.finish();
}

}  // namespace tinycoral::chip::testing
