// One scalar-side DMA instruction being run by its unit's handler (VirtualEdgeTpu::Impl::run_pop,
// run_infeed, run_outfeed): the work, its item, and what the unit reports to the modeled clock.
#pragma once

#include <string>

#include "chip/machine.h"
#include "common/error.h"

namespace tinycoral::chip {

constexpr uint32_t kActivationUnit = 8;  // bytes per avDataPop/infeed unit ("act unit")
constexpr uint32_t kParameterUnit = 64;  // bytes per parameterPop/infeed unit

struct DmaWork {
  uint32_t id;
  Work& w;
  const ProgramItem& item;
  // clock: what the unit moved.
  uint64_t bytes = 0, packets = 0;

  [[noreturn]] void fail(const std::string& what) const {
    tinycoral::fail(opcode_name(item.opcode), " at word ", item.word_offset, ": ", what);
  }
};

}  // namespace tinycoral::chip
