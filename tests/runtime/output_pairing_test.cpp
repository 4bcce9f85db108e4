// How the runtime pairs an Edge TPU operator's tensors with its executable's layers: by name first,
// then the tensors no name matches take the layers left over, in order. A rewritten model can
// rename a tensor (Google's recurrent links name the operator's output after the input it feeds)
// and list the outputs in another order; each output must still get its own layer's bytes.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "container/edgetpu_custom_op.h"
#include "container/tflite_reader.h"
#include "host/interpreter.h"
#include "runtime/device_select.h"
#include "runtime/edgetpu_delegate.h"
#include "support/testdata.h"

namespace tinycoral::runtime {
namespace {

std::vector<std::vector<uint8_t>> run_on_the_virtual_stick(const container::Model& model,
                                                           uint32_t seed) {
  host::InterpreterOptions options;
  add_edgetpu_delegate(options.delegates, open_virtual_edgetpu());
  host::Interpreter interpreter(model, options);
  std::mt19937 rng(seed);
  for (size_t i = 0; i < interpreter.num_inputs(); ++i) {
    std::vector<uint8_t> bytes(interpreter.input(i).bytes);
    for (auto& b : bytes) b = static_cast<uint8_t>(rng());
    interpreter.set_input(i, bytes);
  }
  interpreter.invoke();
  std::vector<std::vector<uint8_t>> outputs;
  for (size_t o = 0; o < interpreter.num_outputs(); ++o) {
    const auto bytes = interpreter.output_bytes(o);
    outputs.emplace_back(bytes.begin(), bytes.end());
  }
  return outputs;
}

TEST(OutputPairing, ARenamedOutputInAnotherOrderGetsItsOwnLayer) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  const container::Model original =
      container::read_tflite_file(data / "gen2021/split_concat_edgetpu.tflite");
  container::Model edited = original;
  auto& graph = edited.subgraphs.at(0);
  container::Operator* tpu_op = nullptr;
  for (auto& op : graph.operators)
    if (edited.code_of(op).custom_code == container::kEdgeTpuCustomCode) tpu_op = &op;
  ASSERT_NE(tpu_op, nullptr);
  ASSERT_GE(tpu_op->outputs.size(), size_t{2});
  // The operator lists its first two outputs the other way round, and the one now second loses
  // its name: by name it matches no layer, by position it would take the first's.
  std::swap(tpu_op->outputs[0], tpu_op->outputs[1]);
  graph.tensors.at(size_t(tpu_op->outputs[1])).name = "renamed_by_an_edit";

  const auto want = run_on_the_virtual_stick(original, 5);
  const auto got = run_on_the_virtual_stick(edited, 5);
  ASSERT_EQ(got.size(), want.size());
  for (size_t o = 0; o < want.size(); ++o) EXPECT_EQ(got[o], want[o]) << "output " << o;
}

}  // namespace
}  // namespace tinycoral::runtime
