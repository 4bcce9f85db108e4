// Test helper: a compiled CPU twin run twice on a virtual Edge TPU with random images, every
// output byte against the CPU reference in `edgetpu` rounding.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include "support/compiled_twin.h"
#include "support/same_bytes.h"

namespace tinycoral::compiler::testing {

// Two inferences of `input_bytes` random bytes each (input "x"): the chip's output equals the
// reference's in every byte, the reference spread over more than 16 values (so that equal bytes
// mean something), and the chip never faults.
inline void expect_two_inferences_equal(const CompiledTwin& compiled, const container::Model& twin,
                                        size_t input_bytes, std::mt19937& random) {
  host::Interpreter cpu = edgetpu_reference(twin);
  chip::VirtualEdgeTpu chip;
  compiled.cache_parameters(chip);
  for (int inference = 0; inference < 2; ++inference) {
    const std::vector<uint8_t> x = random_bytes(input_bytes, random);
    const std::vector<uint8_t> want = reference_output(cpu, x);
    EXPECT_GT(std::set<uint8_t>(want.begin(), want.end()).size(), 16u);
    EXPECT_TRUE(same_bytes(compiled.infer(chip, {{"x", x}}), want)) << "inference " << inference;
  }
  EXPECT_EQ(chip.fault(), "");
}

}  // namespace tinycoral::compiler::testing
