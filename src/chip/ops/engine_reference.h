// The op engine's slow reference: docs/chip_ops.md section 2 written as plain loops, one main-loop
// step at a time, with none of the fast engine's machinery (runs, batches, operand gathers, FIFO
// row caches, SIMD kernels and output stages). The fast engine (run_engine) is tested against it
// on random ops of every step kind (tests/chip/engine_reference_test.cpp); the simulator never
// calls it. Expects an op the fast engine accepts (it checks less).
#pragma once

#include "chip/ops/mac_engine.h"

namespace tinycoral::chip::ops {

void run_engine_reference(const OpInstr& op, OpEnv& env, const EngineSpec& spec);

}  // namespace tinycoral::chip::ops
