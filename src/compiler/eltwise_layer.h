// ADD and MUL of two tensors (and RELU/RELU6 of one) as the code generator sees them, and the
// recognition of a mapped part [QUANTIZE...] ADD|MUL|RELU|RELU6 [QUANTIZE]: both operands
// activations of the same shape (no broadcasting), per-tensor quantization, uint8 on the chip (int8
// tensors shifted by 128), a fused NONE, RELU or RELU6. The output stage uses the constants the
// host's `edgetpu` rounding uses (host/rational.h: ADD's integer weights w1, w2 ~ s1 : s2; MUL's
// product scale), so the chip's bytes and the CPU reference's are the same computation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/conv_layer.h"
#include "compiler/graph.h"

namespace tinycoral::compiler {

struct EltwiseLayer {
  // kRelu: a standalone RELU or RELU6 (one operand: b is a), the chip's requantize op.
  enum class Kind { kAdd, kMul, kRelu };
  Kind kind = Kind::kAdd;
  int64_t elements = 0;                    // of each operand and of the output
  std::vector<int32_t> shape;              // the output tensor's shape
  int32_t a_zp = 0, b_zp = 0, out_zp = 0;  // uint8 domain
  float a_scale = 0, b_scale = 0, out_scale = 0;
  // ADD: acc = w1 a + w2 b + offset, offset = -(w1 a_zp + w2 b_zp); MUL: acc = (a - a_zp)(b -
  // b_zp).
  int32_t w1 = 0, w2 = 0, offset = 0;
  float mult = 0;                           // acc -> output, float32
  float clamp_min = 0, clamp_max = 0;       // activation_clamps() of the fused activation
  std::string a_name, b_name, output_name;  // boundary tensors (a_name == b_name: x op x)
  bool signed_a = false, signed_b = false, signed_output = false;
  bool same_operand() const { return a_name == b_name; }
};

// Recognises the part; returns "" and fills `layer`, or the reason tinycoral cannot generate it.
std::string match_eltwise(const Graph& graph, const std::vector<int>& mapped_ops,
                          EltwiseLayer& layer);

// The output stage of an ADD or MUL from its operands' and output's quantization (uint8 zero
// points) and fused activation; "" or the reason it cannot be done on the chip.
std::string eltwise_output_stage(EltwiseLayer& layer, container::Activation activation);

// The same from the tensors themselves (per-tensor 8-bit a, b and output y): the zero points and
// scales, then the output stage. The standalone ADD/MUL/RELU, the residual ADD and the joins of
// fan-out heads all quantize this way.
std::string eltwise_stage_of(EltwiseLayer& layer, const GraphTensor& a, const GraphTensor& b,
                             const GraphTensor& y, container::Activation activation);

// An ADD's or MUL's fused activation (NONE when the operator has none).
container::Activation fused_activation(const GraphOp& op);

// A residual ADD inside a CONV_2D chain (conv_layer.h): one operand is `flowing` (the previous
// layer's output), the other the input tensor of an earlier chain layer (`layer_inputs[j]`), same
// shape; fills `l` as a 1x1 layer with residual_of = j. "" or the reason.
std::string match_residual_add(const Graph& graph, const GraphOp& op, int flowing,
                               const std::vector<int>& layer_inputs, ConvLayer& l);

}  // namespace tinycoral::compiler
