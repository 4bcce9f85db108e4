// Test helper: a compiled model that takes the host's image as it is - no PAD left on the CPU and
// its custom op reading an input of the model's own shape (the chip repacks the rows,
// docs/compiler.md "Images repacked on the chip").
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "container/tflite_model.h"

namespace tinycoral::compiler::testing {

inline void expect_image_as_it_is(const container::Model& twin, const container::Model& ours) {
  const auto& g = ours.subgraphs.at(0);
  std::vector<int32_t> custom_input;
  for (const container::Operator& op : g.operators) {
    const int32_t code = ours.operator_codes.at(op.opcode_index).builtin_code;
    EXPECT_NE(code, static_cast<int32_t>(container::BuiltinOp::kPad));
    if (code == static_cast<int32_t>(container::BuiltinOp::kCustom) && custom_input.empty())
      custom_input = g.tensors.at(static_cast<size_t>(op.inputs.at(0))).shape;
  }
  const auto& t = twin.subgraphs.at(0);
  EXPECT_EQ(custom_input, t.tensors.at(static_cast<size_t>(t.inputs.at(0))).shape);
}

}  // namespace tinycoral::compiler::testing
