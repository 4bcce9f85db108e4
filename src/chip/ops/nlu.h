// The tile's non-linear unit as used by LOGISTIC (isa.md 2.1.5, 2.4; device-verified for all 256
// inputs x 18 quantizations in tinycoral): an 8-segment quartic spline in float32 whose output is
// already in units of the output scale (1/256 for LOGISTIC).
#pragma once

#include <cstdint>

#include "chip/tile.h"

namespace tinycoral::chip::ops {

// Segment = number of breakpoints <= x; p = c0 + x(c1 + x(c2 + x(c3 + x c4))), every operation
// rounded to float32 (Horner, no fused multiply-add).
float evaluate_spline(const NluTable& table, float x);

// The constant LOGISTIC table the compiler loads with 0x19 (41/41 instances, isa.md 2.4); for tests
// and for building our own programs.
NluTable logistic_table();

}  // namespace tinycoral::chip::ops
