// Acceptance (issue 10): every compiled model in the test data - found by name, `*_edgetpu.tflite`
// in any folder, never listed, since models this test has not seen must pass too - runs on the
// virtual stick through the runtime, and each Edge TPU output equals its CPU twin's tensor (the
// twin `<name>.tflite` beside it, `edgetpu` rounding, the same random inputs) as strictly as
// docs/chip.md's table claims:
// - every element equal, unless one of the table's reasons applies:
// - an output the twin computes from a SOFTMAX: the chip sums rounded 16-bit exponentials on the
//   tiles (docs/chip_ops.md 6.2), so none is off by more than 1 and at least 99% are equal (per
//   output of 100 elements or more, and over all such outputs together);
// - an output whose quantization differs from the twin tensor's (the compiler requantized it
//   through a scale of its own, gen2020 PoseNet's mid offsets): values within one step of each,
//   the twin's clamped to the range the output can hold;
// A recurrent layer's state outputs (`<input>_variable_output`: the LSTM's hidden and cell state
// after the last step) are compared with the twin's state tensors after its run: the twin's
// UNIDIRECTIONAL_SEQUENCE_LSTM in `edgetpu` rounding computes the program's LSTM
// (docs/host_ops.md "The chip's LSTM"), so they and its class scores follow the rules above.
// Programs without a twin (the SSD pipeline segments) must run and repeat their bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <random>

#include "container/edgetpu_model.h"
#include "container/tflite_reader.h"
#include "host/interpreter.h"
#include "runtime/device_select.h"
#include "runtime/edgetpu_delegate.h"
#include "support/sanitizers.h"
#include "support/testdata.h"

namespace tinycoral::runtime {
namespace {

// Inferences per model: the second must repeat the first. Sanitized builds run about ten times
// slower (44 s for two); they check one, the normal build checks the repetition.
#ifdef TINYCORAL_ASAN
constexpr size_t kRuns = 1;
#else
constexpr size_t kRuns = 2;
#endif

namespace fs = std::filesystem;
using container::BuiltinOp;
using container::Model;

int find_tensor(const container::Subgraph& sg, const std::string& name) {
  for (size_t t = 0; t < sg.tensors.size(); ++t)
    if (sg.tensors[t].name == name) return static_cast<int>(t);
  return -1;
}

// The twin tensor that stands for tensor `t` of the compiled model: the one of the same name, else
// the input of the twin operator that consumes it the way the compiled model's CPU operator does
// (the same slot of an operator with the same first output name).
int twin_tensor(const Model& compiled, int t, const Model& twin) {
  const auto& csg = compiled.subgraphs.at(0);
  const auto& tsg = twin.subgraphs.at(0);
  if (int found = find_tensor(tsg, csg.tensors.at(size_t(t)).name); found >= 0) return found;
  for (const auto& op : csg.operators)
    for (size_t slot = 0; slot < op.inputs.size(); ++slot) {
      if (op.inputs[slot] != t || op.outputs.empty()) continue;
      const int out = find_tensor(tsg, csg.tensors.at(size_t(op.outputs[0])).name);
      for (const auto& top : tsg.operators)
        if (!top.outputs.empty() && top.outputs[0] == out && slot < top.inputs.size())
          return top.inputs[slot];
    }
  return -1;
}

// The operators (indices, in order) that compute `outputs` from `inputs` (tensor indices): those
// the outputs need, not those that compute the inputs.
std::vector<size_t> needed_operators(const Model& twin, const std::vector<int>& inputs,
                                     const std::vector<int>& outputs) {
  const auto& sg = twin.subgraphs.at(0);
  std::vector<bool> needed(sg.tensors.size(), false), given(sg.tensors.size(), false);
  for (int t : outputs) needed[size_t(t)] = true;
  for (int t : inputs) given[size_t(t)] = true;
  std::vector<size_t> kept;
  for (size_t k = sg.operators.size(); k-- > 0;) {
    const auto& op = sg.operators[k];
    const bool wanted = std::any_of(op.outputs.begin(), op.outputs.end(), [&](int32_t o) {
      return o >= 0 && needed[size_t(o)] && !given[size_t(o)];
    });
    if (!wanted) continue;
    for (int32_t i : op.inputs)
      if (i >= 0) needed[size_t(i)] = true;
    kept.insert(kept.begin(), k);
  }
  return kept;
}

// Whether a SOFTMAX is among the operators that compute `output` from `inputs`.
bool from_softmax(const Model& twin, const std::vector<int>& inputs, int output) {
  for (size_t k : needed_operators(twin, inputs, {output}))
    if (twin.code_of(twin.subgraphs[0].operators[k]).builtin_code == int32_t(BuiltinOp::kSoftmax))
      return true;
  return false;
}

// The twin cut to the part between `inputs` and `outputs`; its inputs plain tensors (no
// variables).
Model twin_segment(Model twin, const std::vector<int>& inputs, const std::vector<int>& outputs) {
  auto& sg = twin.subgraphs.at(0);
  std::vector<container::Operator> kept;
  for (size_t k : needed_operators(twin, inputs, outputs)) kept.push_back(sg.operators[k]);
  sg.operators = std::move(kept);
  sg.inputs.assign(inputs.begin(), inputs.end());
  sg.outputs.assign(outputs.begin(), outputs.end());
  for (int t : inputs) sg.tensors[size_t(t)].is_variable = false;
  return twin;
}

struct Tally {
  size_t elements = 0, equal = 0;
  int64_t worst_steps = 0;   // same quantization: the largest difference in steps
  double worst_value = 0;    // other quantization: the largest difference in values
  double allowed_value = 0;  // one step of each
};

// The elements of every output computed from a softmax, over all models.
struct Pool {
  size_t elements = 0, equal = 0;
};

int64_t element(std::span<const uint8_t> bytes, size_t i, size_t size, bool is_signed) {
  if (size == 1) return is_signed ? int64_t(int8_t(bytes[i])) : int64_t(bytes[i]);
  const uint16_t v = uint16_t(bytes[2 * i] | bytes[2 * i + 1] << 8);
  return is_signed ? int64_t(int16_t(v)) : int64_t(v);
}

// One compiled model: each Edge TPU operator's package run kRuns times through the runtime on
// random inputs, compared with the twin's tensors. Returns a line for the summary.
std::string check_model(const fs::path& file, const fs::path& root, Pool& pool) {
  const std::string rel = fs::relative(file, root).string();
  const auto compiled = container::read_edgetpu_model_file(file);
  if (compiled.edgetpu_ops.empty()) {
    ADD_FAILURE() << rel << ": no edgetpu-custom-op";
    return rel + ": no Edge TPU operator";
  }
  std::string twin_name = file.filename().string();
  twin_name.replace(twin_name.rfind("_edgetpu.tflite"), 15, ".tflite");
  const fs::path twin_file = file.parent_path() / twin_name;
  const bool has_twin = fs::exists(twin_file);
  const Model twin = has_twin ? container::read_tflite_file(twin_file) : Model{};

  auto tpu = open_virtual_edgetpu();
  std::mt19937 rng(2026);
  std::string summary = rel + ":";
  for (const auto& op_ref : compiled.edgetpu_ops) {
    const auto& csg = compiled.model.subgraphs.at(size_t(op_ref.subgraph));
    const auto& op = csg.operators.at(size_t(op_ref.op_index));
    const PackagePrograms programs = prepare_package(op_ref.options.packages.at(0));
    Program& program = *programs.inference;
    const auto& exe = program.executable();

    // Inputs: random bytes, by layer; the operator's tensor of the layer's name, else by position.
    std::vector<std::vector<uint8_t>> inputs;
    std::vector<int> input_tensors;
    for (size_t i = 0; i < program.num_inputs(); ++i) {
      inputs.emplace_back(program.input_bytes(i));
      for (auto& b : inputs.back()) b = static_cast<uint8_t>(rng());
      int t = find_tensor(csg, exe.input_layers[i].name);
      if (t < 0 && i < op.inputs.size()) t = op.inputs[i];
      input_tensors.push_back(t);
    }
    std::vector<std::vector<std::vector<uint8_t>>> runs(kRuns);
    for (auto& run : runs) {
      for (size_t i = 0; i < program.num_inputs(); ++i) program.set_input(i, inputs[i]);
      tpu->run(programs.caching, programs.inference);
      for (size_t o = 0; o < program.num_outputs(); ++o) {
        run.emplace_back(program.output_bytes(o));
        program.get_output(o, run.back());
      }
    }
    if (kRuns > 1) {
      EXPECT_EQ(runs[0], runs[1]) << rel << ": the second inference differs from the first";
    }
    if (!has_twin) {
      summary += " runs, repeats (no twin)";
      continue;
    }

    // The twin's tensors for the operator's inputs and outputs.
    std::vector<int> twin_inputs, twin_outputs;
    std::vector<size_t> compared;
    for (size_t i = 0; i < input_tensors.size(); ++i) {
      const int t = input_tensors[i] < 0 ? -1 : twin_tensor(compiled.model, input_tensors[i], twin);
      if (t < 0) {
        ADD_FAILURE() << rel << ": the twin has no tensor for input '" << exe.input_layers[i].name
                      << "'";
        return summary + " twin lacks an input";
      }
      twin_inputs.push_back(t);
    }
    for (size_t o = 0; o < program.num_outputs(); ++o) {
      const std::string& name = exe.output_layers[o].name;
      // The state a recurrent layer leaves (`<input>_variable_output`) is, on the twin, the
      // state tensor its operator updated in place: the input's.
      const std::string_view suffix = "_variable_output";
      int t = -1;
      if (name.ends_with(suffix)) {
        t = find_tensor(csg, name.substr(0, name.size() - suffix.size()));
        if (t < 0) {
          ADD_FAILURE() << rel << ": no input for the state output '" << name << "'";
          return summary + " state output without its input";
        }
      } else {
        t = find_tensor(csg, name);
      }
      if (t < 0 && o < op.outputs.size()) t = op.outputs[o];
      const int tt = t < 0 ? -1 : twin_tensor(compiled.model, t, twin);
      if (tt < 0) {
        ADD_FAILURE() << rel << ": the twin has no tensor for output '" << name << "'";
        return summary + " twin lacks an output";
      }
      twin_outputs.push_back(tt);
      compared.push_back(o);
    }
    host::InterpreterOptions options;
    options.rounding = host::Rounding::kEdgeTpu;
    host::Interpreter cpu(twin_segment(twin, twin_inputs, twin_outputs), options);
    for (size_t i = 0; i < inputs.size(); ++i) cpu.set_input(i, inputs[i]);
    cpu.invoke();

    for (size_t k = 0; k < compared.size(); ++k) {
      const size_t o = compared[k];
      const auto& layer = exe.output_layers[o];
      const auto& tensor = twin.subgraphs[0].tensors.at(size_t(twin_outputs[k]));
      const auto want = cpu.output_bytes(k);
      const auto& got = runs[0][o];
      SCOPED_TRACE(rel + " output '" + layer.name + "'");
      const size_t size = container::data_type_size(layer.data_type);
      const bool is_signed = container::data_type_is_signed_fixed(layer.data_type);
      if (got.size() != want.size() || (size != 1 && size != 2)) {
        ADD_FAILURE() << got.size() << " bytes of " << size << "-byte elements, the twin's "
                      << want.size() << " bytes";
        continue;
      }
      const float twin_scale = tensor.quantization.scale.empty() ? 0 : tensor.quantization.scale[0];
      const int64_t twin_zp =
          tensor.quantization.zero_point.empty() ? 0 : tensor.quantization.zero_point[0];
      // The layer's zero point is the device's (offset binary for signed types); in the user's
      // bytes a signed layer's zero point is that minus 2^(bits - 1).
      const int64_t layer_zp = layer.zero_point - (is_signed ? int64_t{1} << (8 * size - 1) : 0);
      const bool same_quantization =
          layer_zp == twin_zp &&
          std::abs(layer.dequantization_factor - twin_scale) <= 1e-6f * std::abs(twin_scale);
      Tally tally;
      tally.elements = got.size() / size;
      tally.allowed_value = double{twin_scale} + double{layer.dequantization_factor};
      // The values the layer can hold: a twin value outside them saturates on the chip.
      const int64_t lowest = is_signed ? -(int64_t{1} << (8 * size - 1)) : 0;
      const int64_t highest = lowest + (int64_t{1} << (8 * size)) - 1;
      const double scale = layer.dequantization_factor;
      for (size_t e = 0; e < tally.elements; ++e) {
        const int64_t a = element(got, e, size, is_signed), b = element(want, e, size, is_signed);
        tally.equal += a == b;
        tally.worst_steps = std::max(tally.worst_steps, std::abs(a - b));
        const double twin_value =
            std::clamp((b - twin_zp) * double{twin_scale}, (lowest - layer_zp) * scale,
                       (highest - layer_zp) * scale);
        tally.worst_value =
            std::max(tally.worst_value, std::abs((a - layer_zp) * scale - twin_value));
      }
      const double share = tally.elements ? double(tally.equal) / double(tally.elements) : 1.0;
      std::string rule;
      if (!same_quantization) {
        rule = "other quantization: values within a step of each, in the output's range";
        EXPECT_LE(tally.worst_value, tally.allowed_value);
      } else if (from_softmax(twin, twin_inputs, twin_outputs[k])) {
        rule = "from a softmax: off by <= 1, >= 99% equal";
        EXPECT_LE(tally.worst_steps, 1);
        if (tally.elements >= 100) {
          EXPECT_GE(share, 0.99);
        }
        pool.elements += tally.elements;
        pool.equal += tally.equal;
      } else {
        rule = "every element";
        EXPECT_EQ(tally.equal, tally.elements);
      }
      char line[400];
      std::snprintf(line, sizeof line, " %s %zu/%zu equal, max %lld steps, %.3g in value (%s);",
                    layer.name.c_str(), tally.equal, tally.elements,
                    static_cast<long long>(tally.worst_steps), tally.worst_value, rule.c_str());
      summary += line;
    }
  }
  return summary;
}

TEST(EveryCompiledModel, RunsOnTheVirtualStickAndEqualsItsTwin) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  std::vector<fs::path> models;
  for (const auto& entry : fs::recursive_directory_iterator(data))
    if (entry.is_regular_file() && entry.path().filename().string().ends_with("_edgetpu.tflite"))
      models.push_back(entry.path());
  std::sort(models.begin(), models.end());
  ASSERT_FALSE(models.empty()) << "no *_edgetpu.tflite under " << data;
  Pool softmax;
  for (const fs::path& file : models) {
    try {
      std::cout << check_model(file, data, softmax) << "\n";
    } catch (const std::exception& e) {
      ADD_FAILURE() << fs::relative(file, data).string() << ": " << e.what();
    }
  }
  // Outputs too small for a share of their own (bright's two coordinates) count here.
  std::cout << "outputs from a softmax: " << softmax.equal << "/" << softmax.elements
            << " elements equal\n";
  EXPECT_GE(double(softmax.equal), 0.99 * double(softmax.elements));
}

}  // namespace
}  // namespace tinycoral::runtime
