// Test helper: the prologue the conv-twin tests share - a chain's CPU twin (conv_twin) on an
// H x W x Cin image, compiled, checked to be one custom op on the chip - and their closing check,
// two inferences against the CPU reference.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "container/tflite_model.h"
#include "support/compiled_twin.h"
#include "support/conv_twin.h"
#include "support/two_inferences.h"

namespace tinycoral::compiler::testing {

// A change to a twin before it is compiled.
using TwinEdit = std::function<void(container::Model&)>;

// One zero point `zp` for the images between a chain's `layers` layers (its tensors y0, y1, ...
// but the last), as PoseNet's ReLU6 outputs have.
inline TwinEdit inner_zero_point(size_t layers, int zp) {
  return [=](container::Model& twin) {
    for (container::Tensor& t : twin.subgraphs.at(0).tensors)
      for (size_t i = 0; i + 1 < layers; ++i)
        if (t.name == "y" + std::to_string(i)) t.quantization.zero_point = {zp};
  };
}

// The twin of `specs` on an h x w x cin image (its weights from `random`), edited by `edit`, and
// what the compiler makes of it. Neither copied nor moved (CompiledTwin).
struct CompiledConvTwin {
  CompiledConvTwin(int h, int w, int cin, const std::vector<twins::ConvSpec>& specs,
                   std::mt19937& random, const TwinEdit& edit = {})
      : twin(edited(twins::conv_twin(h, w, cin, specs, random), edit)),
        compiled(twin),
        input_bytes(static_cast<size_t>(h) * w * cin) {}

  // Whether the whole twin went to the chip: one custom op, with an execution program.
  ::testing::AssertionResult on_the_chip() const {
    if (compiled.result.edgetpu_subgraphs != 1)
      return ::testing::AssertionFailure()
             << compiled.result.edgetpu_subgraphs << " custom ops: " << compiled.reason();
    if (compiled.exes.execution == nullptr)
      return ::testing::AssertionFailure() << "no execution program";
    return ::testing::AssertionSuccess();
  }

  // Two inferences of random images: every output byte the CPU reference's
  // (testing::expect_two_inferences_equal).
  void expect_two_inferences_equal(std::mt19937& random) const {
    testing::expect_two_inferences_equal(compiled, twin, input_bytes, random);
  }

  container::Model twin;
  CompiledTwin compiled;
  size_t input_bytes;

 private:
  static container::Model edited(container::Model twin, const TwinEdit& edit) {
    if (edit) edit(twin);
    return twin;
  }
};

}  // namespace tinycoral::compiler::testing
