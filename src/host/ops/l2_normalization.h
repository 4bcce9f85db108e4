// L2_NORMALIZATION's fixed-point inverse square root (l2_normalization.cpp), exposed for tests.
#pragma once

#include <cstdint>

#include "host/rounding.h"

namespace tinycoral::host {

// TFLite's GetInvSqrtQuantizedMultiplierExp(input, reverse_shift = -1): 1 / sqrt(input) as a
// Q0.31 multiplier with a non-positive shift; inputs 0 and 1 give (INT32_MAX, 0).
QuantizedMultiplier inv_sqrt_multiplier(int32_t input);

}  // namespace tinycoral::host
