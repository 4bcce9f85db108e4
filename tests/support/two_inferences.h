// Test helper: a compiled CPU twin run twice on a virtual Edge TPU with random images, every
// output byte against the CPU reference in `edgetpu` rounding.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include "isa/isa.h"
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

// The compiled program with its instructions replaced by `edited` (a copy of them with one field
// changed), run on one random image of `input_bytes`: its output must differ from the CPU
// reference's, so the assertions a test makes on the unedited program pin what the output needs.
inline void expect_edited_program_differs(const CompiledTwin& compiled,
                                          const container::Model& twin,
                                          const std::vector<isa::Instruction>& edited,
                                          size_t input_bytes, std::mt19937& random) {
  container::Executable perturbed = *compiled.exes.execution;
  perturbed.bitstreams.at(0).data = isa::encode(edited);
  chip::VirtualEdgeTpu chip;
  compiled.cache_parameters(chip);
  host::Interpreter cpu = edgetpu_reference(twin);
  const std::vector<uint8_t> x = random_bytes(input_bytes, random);
  const container::Layer& layer = perturbed.output_layers.at(0);
  const std::vector<uint8_t> got = chip::testing::detile(
      layer, chip::testing::run_executable(chip, perturbed, {{"x", x}}).at(layer.name));
  EXPECT_NE(got, reference_output(cpu, x));
}

}  // namespace tinycoral::compiler::testing
