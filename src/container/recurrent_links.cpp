// The recurrent-link surgery (recurrent_links.h). The old output tensor stays in the tensor list,
// unused, as in Google's tool; only subgraph 0 is edited.
#include "container/recurrent_links.h"

#include <algorithm>
#include <functional>

#include "common/error.h"

namespace tinycoral::container {

namespace {

// Position of the tensor called `name` in `list` (graph inputs or outputs).
size_t find_named(const Subgraph& g, const std::vector<int32_t>& list, const std::string& name,
                  const char* what) {
  for (size_t i = 0; i < list.size(); ++i)
    if (g.tensors.at(static_cast<size_t>(list[i])).name == name) return i;
  fail("recurrent link: '", name, "' is not a graph ", what);
}

}  // namespace

Model append_recurrent_links(Model model, const std::vector<RecurrentLink>& links) {
  if (model.subgraphs.empty()) fail("recurrent links: the model has no subgraph");
  Subgraph& g = model.subgraphs[0];
  std::vector<size_t> input_positions, output_positions;
  for (const auto& link : links) {
    const size_t ip = find_named(g, g.inputs, link.input, "input");
    const size_t op = find_named(g, g.outputs, link.output, "output");
    const int32_t in = g.inputs[ip], out = g.outputs[op];
    Tensor& state = g.tensors[static_cast<size_t>(in)];
    const Tensor& result = g.tensors[static_cast<size_t>(out)];
    if (state.type != result.type)
      fail("recurrent link ", link.input, " <- ", link.output, ": types differ (",
           tensor_type_name(state.type), " vs ", tensor_type_name(result.type), ")");
    if (state.shape != result.shape)
      fail("recurrent link ", link.input, " <- ", link.output, ": shapes differ");
    if (std::count(input_positions.begin(), input_positions.end(), ip) ||
        std::count(output_positions.begin(), output_positions.end(), op))
      fail("recurrent link ", link.input, " <- ", link.output, ": a tensor is linked twice");
    bool written = false;
    for (auto& o : g.operators) {
      for (auto& t : o.outputs) {
        if (t != out) continue;
        t = in;
        written = true;
      }
      for (auto& t : o.inputs)
        if (t == out) t = in;
    }
    if (!written)
      fail("recurrent link ", link.input, " <- ", link.output, ": no operator writes the output");
    state.is_variable = true;
    input_positions.push_back(ip);
    output_positions.push_back(op);
  }
  // Erase from the back so earlier positions stay valid.
  std::sort(input_positions.begin(), input_positions.end(), std::greater<>());
  std::sort(output_positions.begin(), output_positions.end(), std::greater<>());
  for (size_t p : input_positions) g.inputs.erase(g.inputs.begin() + static_cast<ptrdiff_t>(p));
  for (size_t p : output_positions) g.outputs.erase(g.outputs.begin() + static_cast<ptrdiff_t>(p));
  return model;
}

}  // namespace tinycoral::container
