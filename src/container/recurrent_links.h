// Turning a recurrent model's cut links back into state: for each (input, output) pair of graph
// tensor names, the operators that wrote the output write the input tensor instead, that tensor
// becomes a variable (kept between invocations, zero at load), and both leave the graph's inputs
// and outputs. This is the surgery of Google's libcoral AppendRecurrentLinks; running the result
// equals running the original with each output copied back into its input after every invocation.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "container/tflite_model.h"

namespace tinycoral::container {

struct RecurrentLink {
  std::string input, output;  // names of a graph input and a graph output of the same type/shape
};

// Throws Error naming the link when a name is not a graph input/output, the two differ in type or
// shape, or no operator writes the output.
Model append_recurrent_links(Model model, const std::vector<RecurrentLink>& links);

}  // namespace tinycoral::container
