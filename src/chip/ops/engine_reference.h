// The op engine's slow reference: docs/chip_ops.md section 2 written as plain loops, one main-loop
// step at a time (and the 16-bit average pooling's two stages, which run outside the engine), with
// none of the fast engine's machinery (runs, batches, operand gathers, FIFO row caches, SIMD
// kernels and output stages). The fast engine (run_engine) is tested against it on random ops of
// every step kind (tests/chip/engine_reference_test.cpp); the simulator never calls it. Expects an
// op the fast engine accepts (it checks less).
#pragma once

#include "chip/ops/mac_engine.h"

namespace tinycoral::chip::ops {

void run_engine_reference(const OpInstr& op, OpEnv& env, const EngineSpec& spec);

// The two stages of the 16-bit average pooling (pooling16.cpp, docs/chip_ops.md 3.6) as plain
// loops: `halfword_lanes` false = the row sums (byte lanes, signed 16-bit outputs two to a word),
// true = the sum of the row sums (16-bit lanes, byte outputs). Tested against the class on random
// ops (tests/chip/engine_reference_test.cpp); the simulator never calls it.
void run_avg_pool16_reference(const OpInstr& op, OpEnv& env, bool halfword_lanes);

}  // namespace tinycoral::chip::ops
