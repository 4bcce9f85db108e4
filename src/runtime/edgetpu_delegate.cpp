// The edgetpu-custom-op kernel: inputs in, package run on the Edge TPU, outputs out.
#include "runtime/edgetpu_delegate.h"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "common/error.h"
#include "container/edgetpu_custom_op.h"

namespace tinycoral::runtime {

namespace {
// Whether a tensor of `type` carries the elements of a layer of `data`: the same kind (integers for
// the fixed-point types, the matching float type) and width. Equal byte counts alone would let a
// float32[1,4] tensor pass for a 16-byte uint8 layer.
bool types_match(container::TensorType type, container::DataType data) {
  using container::DataType;
  using container::TensorType;
  switch (data) {
    case DataType::kSingle:
      return type == TensorType::kFloat32;
    case DataType::kHalf:
      return type == TensorType::kFloat16;
    case DataType::kBfloat:
      return false;  // TFLite has no bfloat16 tensors
    default:
      break;
  }
  const bool integer = type == TensorType::kUInt8 || type == TensorType::kInt8 ||
                       type == TensorType::kInt16 || type == TensorType::kInt32;
  return integer && container::tensor_type_size(type) == container::data_type_size(data);
}

// Fails unless tensor `t` and `layer` agree on element type, element count and bytes.
void check_match(const std::string& op, const char* what, size_t i, const host::TensorView& t,
                 const container::Layer& layer, size_t layer_bytes) {
  const size_t element = container::data_type_size(layer.data_type);
  if (!types_match(t.type(), layer.data_type) || t.bytes != layer_bytes ||
      static_cast<uint64_t>(t.elements()) * element != layer_bytes)
    fail(op, ": ", what, " ", i, " ('", t.name(), "') is ", container::tensor_type_name(t.type()),
         " with ", t.elements(), " elements (", t.bytes, " bytes); the executable's layer '",
         layer.name, "' holds ", layer_bytes / std::max<size_t>(element, 1), " elements of type ",
         static_cast<int>(layer.data_type), " (", layer_bytes, " bytes)");
}
}  // namespace

PackagePrograms prepare_package(const container::Package& package) {
  using container::ExecutableType;
  const container::Executable* by_type[3] = {nullptr, nullptr, nullptr};
  for (const container::Executable& e : package.executables) {
    const int t = static_cast<int>(e.type);
    if (t < 0 || t > 2) fail("an executable has the unknown type ", t);
    if (by_type[t])
      fail("the package holds two ", container::executable_type_name(e.type), " executables");
    by_type[t] = &e;
  }
  PackagePrograms p;
  const auto* stand_alone = by_type[int(ExecutableType::kStandAlone)];
  const auto* caching = by_type[int(ExecutableType::kParameterCaching)];
  const auto* execution = by_type[int(ExecutableType::kExecutionOnly)];
  if (package.executables.size() == 1) {
    p.inference = std::make_shared<Program>(package.executables[0]);
  } else if (stand_alone) {
    p.inference = std::make_shared<Program>(*stand_alone);
  } else if (caching && execution) {
    p.caching = std::make_shared<Program>(*caching);
    p.inference = std::make_shared<Program>(*execution);
  } else {
    fail("the package's executables are not {parameter caching, execution only}");
  }
  return p;
}

void add_edgetpu_delegate(host::Registry& registry, std::shared_ptr<EdgeTpu> tpu) {
  registry.add_custom(
      std::string(container::kEdgeTpuCustomCode),
      [tpu](const host::OpContext& ctx) -> std::unique_ptr<host::Kernel> {
        const container::EdgeTpuCustomOp op =
            container::read_edgetpu_custom_op(ctx.custom_options());
        if (op.packages.empty()) fail(ctx.op_name, ": no package");
        const PackagePrograms programs = prepare_package(op.packages[0]);
        const Program& inference = *programs.inference;
        if (ctx.num_inputs() != inference.num_inputs())
          fail(ctx.op_name, ": the operator has ", ctx.num_inputs(), " inputs, its executable ",
               inference.num_inputs());
        // An output layer named after an input layer plus "_variable_output" is that input's new
        // value (a recurrent state: the Keras LSTM's hidden and cell state), written back into
        // the input tensor after the run as libedgetpu does; the others are the operator's.
        const auto& in_layers = inference.executable().input_layers;
        const auto& out_layers = inference.executable().output_layers;
        std::vector<size_t> op_outputs;                           // output layers of the op
        std::vector<std::pair<size_t, size_t>> variable_outputs;  // (output layer, input layer)
        for (size_t k = 0; k < out_layers.size(); ++k) {
          size_t state = in_layers.size();
          for (size_t j = 0; j < in_layers.size(); ++j)
            if (out_layers[k].name == in_layers[j].name + "_variable_output") state = j;
          if (state < in_layers.size())
            variable_outputs.emplace_back(k, state);
          else
            op_outputs.push_back(k);
        }
        if (ctx.num_outputs() != op_outputs.size())
          fail(ctx.op_name, ": the operator has ", ctx.num_outputs(), " outputs, its executable ",
               op_outputs.size(), variable_outputs.empty() ? "" : " (besides its state outputs)");
        // Tensors and layers are matched by name (their orders may differ); the tensors no name
        // matches take the layers left over, in order (a rewritten model may rename a tensor:
        // Google's recurrent links name the operator's output after the input it feeds).
        auto match = [](const std::vector<container::Layer>& all, const std::vector<size_t>& layers,
                        const std::vector<std::string>& tensors) {
          std::vector<size_t> chosen(tensors.size(), SIZE_MAX);
          std::vector<bool> taken(layers.size(), false);
          for (size_t i = 0; i < tensors.size(); ++i)
            for (size_t k = 0; k < layers.size(); ++k)
              if (!taken[k] && all[layers[k]].name == tensors[i]) {
                chosen[i] = layers[k];
                taken[k] = true;
                break;
              }
          size_t next = 0;
          for (size_t i = 0; i < tensors.size(); ++i) {
            if (chosen[i] != SIZE_MAX) continue;
            while (taken[next]) ++next;  // as many layers as tensors: one is left for each
            chosen[i] = layers[next];
            taken[next] = true;
          }
          return chosen;
        };
        std::vector<size_t> all_inputs(in_layers.size());
        std::iota(all_inputs.begin(), all_inputs.end(), size_t{0});
        std::vector<std::string> input_names, output_names;
        for (size_t i = 0; i < ctx.num_inputs(); ++i) input_names.push_back(ctx.input(i).name());
        for (size_t i = 0; i < ctx.num_outputs(); ++i) output_names.push_back(ctx.output(i).name());
        const std::vector<size_t> input_layer = match(in_layers, all_inputs, input_names);
        const std::vector<size_t> output_layer = match(out_layers, op_outputs, output_names);
        for (size_t i = 0; i < ctx.num_inputs(); ++i)
          check_match(ctx.op_name, "input", i, ctx.input(i), in_layers[input_layer[i]],
                      inference.input_bytes(input_layer[i]));
        for (size_t i = 0; i < ctx.num_outputs(); ++i)
          check_match(ctx.op_name, "output", i, ctx.output(i), out_layers[output_layer[i]],
                      inference.output_bytes(output_layer[i]));
        // (output layer, operator input) of each state the run updates; a state held in a
        // constant tensor is not written (it stays as the model has it).
        std::vector<std::pair<size_t, size_t>> state_updates;
        for (const auto& [k, j] : variable_outputs)
          for (size_t i = 0; i < ctx.num_inputs(); ++i)
            if (input_layer[i] == j && !ctx.input(i).constant) {
              if (inference.output_bytes(k) != inference.input_bytes(j))
                fail(ctx.op_name, ": state output '", out_layers[k].name, "' has ",
                     inference.output_bytes(k), " bytes, its input ", inference.input_bytes(j));
              state_updates.emplace_back(k, i);
            }
        return host::make_kernel([tpu, programs, input_layer, output_layer,
                                  state_updates](host::OpContext& run) {
          Program& program = *programs.inference;
          for (size_t i = 0; i < run.num_inputs(); ++i)
            program.set_input(input_layer[i],
                              std::span<const uint8_t>(run.inputs[i].data, run.inputs[i].bytes));
          tpu->run(programs.caching, programs.inference);
          for (size_t i = 0; i < run.num_outputs(); ++i)
            program.get_output(output_layer[i],
                               std::span<uint8_t>(run.outputs[i].data, run.outputs[i].bytes));
          for (const auto& [k, i] : state_updates)
            program.get_output(k, std::span<uint8_t>(run.inputs[i].data, run.inputs[i].bytes));
        });
      });
}

}  // namespace tinycoral::runtime
