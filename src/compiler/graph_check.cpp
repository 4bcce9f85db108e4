// Checking each operator of an imported graph against itself (graph_check.h). The shape rules are
// TFLite's (its kernels' Prepare): SAME/VALID output sizes with dilation, FULLY_CONNECTED's
// flattening, numpy broadcasting, concatenation along one axis.
#include "compiler/graph_check.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "common/error.h"

namespace tinycoral::compiler {

using container::BuiltinOp;
using container::TensorType;

namespace {

std::string shape_text(const std::vector<int32_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

// The output size of a window sweep, or <= 0 when the window does not fit (TFLite's padding.h).
int64_t window_out(int64_t in, int64_t k, int64_t stride, int64_t dilation, bool same) {
  const int64_t reach = (k - 1) * dilation + 1;
  return same ? (in + stride - 1) / stride : (in - reach + stride) / stride;
}

class OpChecker {
 public:
  OpChecker(const Graph& graph, const GraphOp& op) : graph_(graph), op_(op) {}

  // "" or the contradiction.
  std::string check() {
    std::string why = shape();
    return why.empty() && checked_ ? quantization() : why;
  }

 private:
  std::string shape() {
    checked_ = true;
    switch (static_cast<BuiltinOp>(op_.builtin)) {
      case BuiltinOp::kConv2D:
        return conv(false);
      case BuiltinOp::kDepthwiseConv2D:
        return conv(true);
      case BuiltinOp::kFullyConnected:
        return fully_connected();
      case BuiltinOp::kAveragePool2D:
      case BuiltinOp::kMaxPool2D:
        return pool();
      case BuiltinOp::kAdd:
      case BuiltinOp::kSub:
      case BuiltinOp::kMul:
        return broadcast();
      case BuiltinOp::kConcatenation:
        return concatenation();
      case BuiltinOp::kReshape:
        return same_elements();
      case BuiltinOp::kSoftmax:
      case BuiltinOp::kLogistic:
      case BuiltinOp::kRelu:
      case BuiltinOp::kRelu6:
      case BuiltinOp::kTanh:
      case BuiltinOp::kQuantize:
        return same_elements();
      default:
        checked_ = false;
        return "";
    }
  }

  // The i-th input (required: present) and output.
  const GraphTensor* in(size_t i) const {
    if (i >= op_.inputs.size() || op_.inputs[i] < 0) return nullptr;
    return &graph_.tensor(op_.inputs[i]);
  }
  const GraphTensor* out(size_t i) const {
    if (i >= op_.outputs.size() || op_.outputs[i] < 0) return nullptr;
    return &graph_.tensor(op_.outputs[i]);
  }
  std::string arity(size_t inputs, size_t outputs = 1) const {
    for (size_t i = 0; i < inputs; ++i)
      if (in(i) == nullptr) return cat("needs ", inputs, " inputs, input ", i, " is missing");
    for (size_t i = 0; i < outputs; ++i)
      if (out(i) == nullptr) return cat("needs ", outputs, " outputs, output ", i, " is missing");
    return "";
  }

  // Scales and zero points of the 8-bit quantized tensors the operator reads and writes.
  std::string quantization() const {
    auto one = [](const GraphTensor& t) -> std::string {
      if (t.type != TensorType::kInt8 && t.type != TensorType::kUInt8) return "";
      const int64_t lo = t.type == TensorType::kInt8 ? -128 : 0;
      // TFLite refuses a quantization whose scales and zero points differ in number.
      if (!t.quant.scale.empty() && t.quant.zero_point.size() != t.quant.scale.size())
        return cat("tensor ", t.index, " (", t.name, ") has ", t.quant.scale.size(),
                   " quantization scales and ", t.quant.zero_point.size(), " zero points");
      for (float s : t.quant.scale)
        if (!std::isfinite(s) || s < 0 || (s == 0 && !t.is_constant()))
          return cat("tensor ", t.index, " (", t.name, ") has quantization scale ", s);
      for (int64_t zp : t.quant.zero_point)
        if (zp < lo || zp > lo + 255)
          return cat("tensor ", t.index, " (", t.name, ") has zero point ", zp,
                     " outside its type");
      return "";
    };
    for (int t : op_.inputs)
      if (t >= 0)
        if (std::string why = one(graph_.tensor(t)); !why.empty()) return why;
    for (int t : op_.outputs)
      if (t >= 0)
        if (std::string why = one(graph_.tensor(t)); !why.empty()) return why;
    return "";
  }

  // Per-channel quantization of a filter along `axis` with `channels` channels.
  static std::string channel_quant(const GraphTensor& w, int axis, int64_t channels) {
    if (!w.quant.per_channel()) return "";
    if (w.quant.axis != axis || static_cast<int64_t>(w.quant.scale.size()) != channels)
      return cat("its filter has ", w.quant.scale.size(), " scales along dimension ", w.quant.axis,
                 ", its ", channels, " output channels need one each along dimension ", axis);
    return "";
  }

  // The optional bias: one value per output channel.
  std::string bias(size_t index, int64_t channels) const {
    const GraphTensor* b = in(index);
    if (b == nullptr || b->elements() == channels) return "";
    return cat("its bias ", shape_text(b->shape), " does not have one value for each of its ",
               channels, " output channels");
  }

  // `from`: what implies the shape ("its inputs imply").
  std::string expect_output(const std::vector<int32_t>& want, const char* from) const {
    const GraphTensor& y = *out(0);
    if (y.shape == want) return "";
    return cat("output shape ", shape_text(y.shape), " contradicts ", shape_text(want),
               ", the shape ", from);
  }

  template <typename Options>
  std::string windows(const GraphTensor& x, int64_t kh, int64_t kw, const Options& o, int64_t dh,
                      int64_t dw, int64_t channels, const char* from) const {
    if (o.stride_h < 1 || o.stride_w < 1 || dh < 1 || dw < 1)
      return cat("has stride ", o.stride_h, "x", o.stride_w, " and dilation ", dh, "x", dw,
                 " (each must be 1 or more)");
    const bool same = o.padding == container::Padding::kSame;
    const int64_t oh = window_out(x.shape[1], kh, o.stride_h, dh, same);
    const int64_t ow = window_out(x.shape[2], kw, o.stride_w, dw, same);
    if (oh < 1 || ow < 1)
      return cat("its ", kh, "x", kw, " window leaves no output of its input ",
                 shape_text(x.shape));
    if (oh > INT32_MAX || ow > INT32_MAX) return "its output is too large";
    return expect_output({x.shape[0], static_cast<int32_t>(oh), static_cast<int32_t>(ow),
                          static_cast<int32_t>(channels)},
                         from);
  }

  std::string rank4(const GraphTensor& t, const char* what) const {
    if (t.shape.size() == 4) return "";
    return cat("its ", what, " ", shape_text(t.shape), " is not 4-D (NHWC)");
  }

  std::string conv(bool depthwise) const {
    if (std::string why = arity(2); !why.empty()) return why;
    const GraphTensor& x = *in(0);
    const GraphTensor& w = *in(1);
    if (std::string why = rank4(x, "input"); !why.empty()) return why;
    if (std::string why = rank4(w, "filter"); !why.empty()) return why;
    if (std::string why = rank4(*out(0), "output"); !why.empty()) return why;
    for (int32_t d : w.shape)
      if (d < 1) return cat("its filter ", shape_text(w.shape), " has an empty dimension");
    if (x.shape[3] < 1) return cat("its input ", shape_text(x.shape), " has no channels");
    int64_t channels = 0;
    std::string why;
    if (depthwise) {
      const auto* o = std::get_if<container::DepthwiseConv2DOptions>(&op_.options);
      if (o == nullptr) return "has no DepthwiseConv2D options";
      channels = w.shape[3];
      // TFLite takes the depth multiplier from the filter, not from the options.
      if (w.shape[0] != 1 || channels % x.shape[3] != 0)
        return cat("its filter ", shape_text(w.shape), " is not [1, kh, kw, a multiple of the ",
                   x.shape[3], " input channels]");
      why = windows(x, w.shape[1], w.shape[2], *o, o->dilation_h, o->dilation_w, channels,
                    "its input, filter and options imply");
      if (why.empty()) why = channel_quant(w, 3, channels);
    } else {
      const auto* o = std::get_if<container::Conv2DOptions>(&op_.options);
      if (o == nullptr) return "has no Conv2D options";
      channels = w.shape[0];
      if (x.shape[3] % w.shape[3] != 0)  // TFLite runs groups of w.shape[3] channels
        return cat("its filter ", shape_text(w.shape), " does not divide its input's ", x.shape[3],
                   " channels");
      why = windows(x, w.shape[1], w.shape[2], *o, o->dilation_h, o->dilation_w, channels,
                    "its input, filter and options imply");
      if (why.empty()) why = channel_quant(w, 0, channels);
    }
    if (why.empty()) why = bias(2, channels);
    return why;
  }

  std::string fully_connected() const {
    if (std::string why = arity(2); !why.empty()) return why;
    const GraphTensor& x = *in(0);
    const GraphTensor& w = *in(1);
    const GraphTensor& y = *out(0);
    if (w.shape.size() != 2 || w.shape[0] < 1 || w.shape[1] < 1)
      return cat("its weights ", shape_text(w.shape), " are not [units, depth]");
    const int64_t units = w.shape[0], depth = w.shape[1];
    if (x.elements() % depth != 0)
      return cat("its input ", shape_text(x.shape), " is not a whole number of rows of depth ",
                 depth);
    const auto* o = std::get_if<container::FullyConnectedOptions>(&op_.options);
    if (o != nullptr && o->keep_num_dims) {
      if (x.shape.empty() || x.shape.back() != depth)
        return cat("keeps its input's dimensions but its input ", shape_text(x.shape),
                   " does not end in depth ", depth);
      std::vector<int32_t> want = x.shape;
      want.back() = static_cast<int32_t>(units);
      if (std::string why = expect_output(want, "its input and weights imply"); !why.empty())
        return why;
    } else if (y.shape.empty() || y.shape.back() != units ||
               y.elements() != x.elements() / depth * units) {
      return cat("output shape ", shape_text(y.shape), " contradicts the ", x.elements() / depth,
                 " rows of ", units, " units its input ", shape_text(x.shape), " and weights ",
                 shape_text(w.shape), " imply");
    }
    if (std::string why = channel_quant(w, 0, units); !why.empty()) return why;
    return bias(2, units);
  }

  std::string pool() const {
    if (std::string why = arity(1); !why.empty()) return why;
    const GraphTensor& x = *in(0);
    if (std::string why = rank4(x, "input"); !why.empty()) return why;
    const auto* o = std::get_if<container::Pool2DOptions>(&op_.options);
    if (o == nullptr) return "has no Pool2D options";
    if (o->filter_h < 1 || o->filter_w < 1)
      return cat("has a ", o->filter_h, "x", o->filter_w, " window");
    return windows(x, o->filter_h, o->filter_w, *o, 1, 1, x.shape[3],
                   "its input and options imply");
  }

  // ADD, SUB, MUL: the output has the broadcast shape of the two inputs (numpy's rule).
  std::string broadcast() const {
    if (std::string why = arity(2); !why.empty()) return why;
    const std::vector<int32_t>& a = in(0)->shape;
    const std::vector<int32_t>& b = in(1)->shape;
    std::vector<int32_t> want(std::max(a.size(), b.size()));
    for (size_t i = 0; i < want.size(); ++i) {
      const int32_t da = i < a.size() ? a[a.size() - 1 - i] : 1;
      const int32_t db = i < b.size() ? b[b.size() - 1 - i] : 1;
      if (da != db && da != 1 && db != 1)
        return cat("its inputs ", shape_text(a), " and ", shape_text(b), " do not broadcast");
      want[want.size() - 1 - i] = da == 1 ? db : da;
    }
    return expect_output(want, "its inputs imply");
  }

  std::string concatenation() const {
    if (op_.inputs.empty()) return "has no inputs";
    if (std::string why = arity(op_.inputs.size()); !why.empty()) return why;
    const auto* o = std::get_if<container::ConcatenationOptions>(&op_.options);
    if (o == nullptr) return "has no Concatenation options";
    std::vector<int32_t> want = in(0)->shape;
    const int64_t rank = static_cast<int64_t>(want.size());
    const int64_t axis = o->axis < 0 ? o->axis + rank : o->axis;
    if (axis < 0 || axis >= rank)
      return cat("axis ", o->axis, " is outside its inputs' ", rank, " dimensions");
    int64_t total = 0;
    for (size_t i = 0; i < op_.inputs.size(); ++i) {
      const std::vector<int32_t>& s = in(i)->shape;
      bool fits = static_cast<int64_t>(s.size()) == rank;
      for (int64_t d = 0; fits && d < rank; ++d) fits = d == axis || s[d] == want[d];
      if (!fits)
        return cat("its input ", i, " ", shape_text(s), " does not match input 0 ",
                   shape_text(in(0)->shape), " outside axis ", axis);
      total += s[axis];
    }
    if (total > INT32_MAX) return "its output is too large";
    want[axis] = static_cast<int32_t>(total);
    return expect_output(want, "its inputs and axis imply");
  }

  // RESHAPE, and the element-wise operators (TFLite gives their output the input's dimensions,
  // so only the element count can contradict: test twins write QUANTIZE [1,1,1,10] -> [1,10]).
  std::string same_elements() const {
    if (std::string why = arity(1); !why.empty()) return why;
    const GraphTensor& x = *in(0);
    const GraphTensor& y = *out(0);
    if (x.elements() == y.elements()) return "";
    return cat("output shape ", shape_text(y.shape), " does not hold the ", x.elements(),
               " elements of its input ", shape_text(x.shape));
  }

  const Graph& graph_;
  const GraphOp& op_;
  bool checked_ = false;  // the operator is one of those checked
};

}  // namespace

void check_operators(const Graph& graph) {
  for (const GraphOp& op : graph.ops) {
    if (std::string why = OpChecker(graph, op).check(); !why.empty())
      fail("operator ", op.index, " (", op.name, "): ", why);
  }
}

}  // namespace tinycoral::compiler
