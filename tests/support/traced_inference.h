// Test helper: one inference of a compiled CPU twin on a traced virtual Edge TPU, with the
// latest finish (clock cycles) of each instruction, to ask what ran while what (the
// hand-over-overlap tests: halo rows first, the swap under the depthwise).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include "chip/program.h"
#include "chip/virtual_edge_tpu.h"
#include "isa/isa.h"
#include "support/compiled_twin.h"

namespace tinycoral::compiler::testing {

// The latest finish of each instruction, by word offset, on any tile, in the last program run.
struct Finishes : chip::TraceSink {
  uint32_t program = 0;
  std::map<uint32_t, uint64_t> at;
  void record(const chip::TraceRecord& r) override {
    if (r.program != program) {
      program = r.program;
      at.clear();
    }
    if (r.tile >= 0) at[r.word_offset] = std::max(at[r.word_offset], r.finish);
  }
  // 0 for an instruction no tile ran.
  uint64_t of(uint32_t word_offset) const {
    const auto it = at.find(word_offset);
    return it == at.end() ? 0 : it->second;
  }
};

// The execution program decoded, and when each of its instructions finished in one inference of
// `input_bytes` random bytes (input "x"; the chip must not fault).
struct TracedInference {
  std::unique_ptr<chip::Program> program;
  Finishes finishes;
};
inline TracedInference traced_inference(const CompiledTwin& compiled, size_t input_bytes,
                                        std::mt19937& random) {
  TracedInference run;
  chip::ChipOptions options;
  options.trace = &run.finishes;
  chip::VirtualEdgeTpu chip(options);
  compiled.cache_parameters(chip);
  compiled.infer(chip, {{"x", random_bytes(input_bytes, random)}});
  EXPECT_EQ(chip.fault(), "");
  run.program = chip::Program::decode(compiled.exes.execution->bitstreams.at(0).data);
  return run;
}

// A ring producer handing rows to tiles (not FIFO weights, not to the scalar core).
inline bool hands_rows_to_tiles(const chip::ProgramItem& item) {
  const auto* ring = std::get_if<chip::RingInstr>(&item.decoded);
  return ring && item.opcode == isa::kRingProducer && (ring->dest & 0xffff) != 0 && !ring->to_c1;
}

}  // namespace tinycoral::compiler::testing
