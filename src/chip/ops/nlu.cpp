// Spline evaluation of the non-linear unit (see nlu.h); the arithmetic and the LOGISTIC table are
// the ISA's (isa/nlu_spline.h), which the CPU reference's `edgetpu` rounding shares.
#include "chip/ops/nlu.h"

#include "isa/nlu_spline.h"

namespace tinycoral::chip::ops {

float evaluate_spline(const NluTable& table, float x) {
  return isa::evaluate_spline(table.coefficients, table.breakpoints, x);
}

NluTable logistic_table() {
  NluTable t;
  t.coefficients = isa::logistic_coefficients();
  t.breakpoints = isa::logistic_breakpoints();
  t.mode = 3;
  t.loaded = true;
  return t;
}

}  // namespace tinycoral::chip::ops
