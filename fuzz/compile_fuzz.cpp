// libFuzzer target: `tinycoral compile` on hostile models. An input's first byte picks the form:
// odd, the rest of the input is the model itself; even, the next bytes build a small CPU twin of
// a conv chain (the compiler tests' builder: convs, depthwise layers, pools, residual ADDs, an FC
// head, a softmax) and the bytes after them overwrite some of the twin's bytes, so that most
// inputs reach the partitioner and the generators instead of stopping in the flatbuffer reader.
// Compiling must give an output or a tinycoral::Error, never a crash, a hang or another
// exception, and every output must read back as an *_edgetpu.tflite.
#include <cstddef>
#include <cstdint>
#include <exception>
#include <random>
#include <span>
#include <vector>

#include "common/error.h"
#include "compiler/compile.h"
#include "container/edgetpu_model.h"
#include "container/tflite_writer.h"
#include "fuzz_input.h"
#include "support/conv_twin.h"

namespace {

using tinycoral::compiler::twins::ConvSpec;

ConvSpec layer(tinycoral::fuzz::FuzzInput& in, int index, bool last) {
  static const int kK[] = {1, 2, 3, 5};
  static const tinycoral::container::Activation kAct[] = {tinycoral::container::Activation::kNone,
                                                          tinycoral::container::Activation::kRelu,
                                                          tinycoral::container::Activation::kRelu6};
  ConvSpec s;
  const uint8_t kind = in.byte();
  s.cout = in.range(1, 130);
  s.k = kK[in.byte() % 4];
  s.stride = in.range(1, 2);
  s.same = in.byte() % 2 == 0;
  s.bias = in.byte() % 4 != 0;
  s.per_channel = in.byte() % 4 != 0;
  s.act = kAct[in.byte() % 3];
  s.depthwise = kind % 5 == 1;
  s.pool = kind % 5 == 2;
  s.fc = last && kind % 5 == 3;
  s.softmax = last && kind % 7 == 6;
  if (kind % 5 == 4 && index > 0) s.residual_from = in.range(0, index - 1);
  return s;
}

std::vector<uint8_t> structured_model(tinycoral::fuzz::FuzzInput& in) {
  static const int kCin[] = {1, 2, 3, 4, 8, 16, 32, 64};
  const int h = in.range(1, 20), w = in.range(1, 20), cin = kCin[in.byte() % 8];
  const int layers = in.range(1, 3);
  std::vector<ConvSpec> specs;
  for (int i = 0; i < layers; ++i) specs.push_back(layer(in, i, i + 1 == layers));
  std::mt19937 random(in.u32());
  std::vector<uint8_t> bytes = tinycoral::container::write_tflite(
      tinycoral::compiler::twins::conv_twin(h, w, cin, specs, random, in.byte() % 4 == 0));
  for (int edits = in.byte() % 9; edits > 0 && !bytes.empty(); --edits) {
    const uint32_t at = in.u32() % bytes.size();
    bytes[at] = in.byte();
  }
  return bytes;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tinycoral::fuzz::FuzzInput in(std::span<const uint8_t>(data, size));
  std::vector<uint8_t> model;
  try {
    if (in.byte() % 2 == 1) {
      const auto rest = in.rest();
      model.assign(rest.begin(), rest.end());
    } else {
      model = structured_model(in);
    }
  } catch (const std::exception&) {
    // The builder (test support, not the code under test) refuses or cannot size a combination
    // of layers, such as a VALID kernel larger than its map.
    return 0;
  }
  std::vector<uint8_t> compiled;
  try {
    compiled = tinycoral::compiler::compile_model(model).tflite;
  } catch (const tinycoral::Error&) {
    return 0;
  }
  // Our own output is not hostile: reading it back must not throw.
  (void)tinycoral::container::read_edgetpu_model(compiled);
  return 0;
}
