// The op functions of the word-times-row MAC classes (word_times_row.h).
#include "chip/ops/word_times_row.h"

#include "chip/ops/mac_engine.h"

namespace tinycoral::chip::ops::word_times_row {
namespace {
constexpr EngineSpec spec(bool has_position_loop) {
  EngineSpec s{OperandKind::kWordTimesRow};
  s.has_position_loop = has_position_loop;
  s.psum_rows = true;
  return s;
}
constexpr EngineSpec kSpec = spec(true), kNoPosition = spec(false);
}  // namespace

void run(const OpInstr& op, OpEnv& env) { run_engine(op, env, kSpec); }
uint32_t fills(const OpInstr& op) { return fifo_fill_count(op, kSpec); }
bool keeps_psum(const OpInstr& op) { return keeps_partial_sums(op, kSpec); }
void run_no_position(const OpInstr& op, OpEnv& env) { run_engine(op, env, kNoPosition); }
uint32_t fills_no_position(const OpInstr& op) { return fifo_fill_count(op, kNoPosition); }
bool keeps_psum_no_position(const OpInstr& op) { return keeps_partial_sums(op, kNoPosition); }

}  // namespace tinycoral::chip::ops::word_times_row
