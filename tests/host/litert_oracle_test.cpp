// LiteRT.js (Google's TFLite runtime, its WebAssembly build from npm) as a second oracle: one-op
// models written by our TFLite writer, across the operators the host supports, run in LiteRT.js
// under Node and in our interpreter (tflite rounding) on the same random inputs. Where LiteRT runs
// TFLite's built-in kernels the outputs must be equal byte for byte; its XNNPACK kernels for
// CONV_2D, DEPTHWISE_CONV_2D, ADD/SUB/MUL and RESIZE_BILINEAR round some values differently (ours
// follow TFLite's reference arithmetic), so there every byte must be within 1; float32 results
// within 1e-4 relative (docs/host_ops.md has the measured differences).
// Dev-only: skipped unless Node and an installed LiteRT.js tool are found
// ($TINYCORAL_LITERT = a folder made by ../shared/tools/litert/setup.sh DIR).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "container/schema/tflite_generated.h"
#include "container/tflite_writer.h"
#include "hostops_test_util.h"
#include "support/testdata.h"

namespace tinycoral::host {
namespace {

namespace fs = std::filesystem;
using container::Activation;
using container::BuiltinOp;
using container::Padding;
using container::TensorType;
using testing::OneOpModel;
using Tag = tflite::BuiltinOptions;

// The LiteRT.js tool folder, or why there is none.
std::optional<fs::path> litert_dir(std::string& why) {
  if (::tinycoral::testing::run_shell("node --version").exit_code != 0) {
    why = "node is not installed (LiteRT.js runs under Node 20)";
    return std::nullopt;
  }
  std::vector<fs::path> candidates;
  if (const char* env = std::getenv("TINYCORAL_LITERT"); env && *env) candidates.push_back(env);
  candidates.push_back(::tinycoral::testing::source_dir().parent_path() / "shared" / "tools" /
                       "litert");
  for (const auto& dir : candidates)
    if (fs::exists(dir / "litert_run.mjs") && fs::exists(dir / "node_modules" / "@litertjs"))
      return dir;
  why =
      "LiteRT.js is not installed: run ../shared/tools/litert/setup.sh DIR and set "
      "TINYCORAL_LITERT=DIR";
  return std::nullopt;
}

// A deterministic byte source (xorshift) for weights and inputs.
struct Random {
  uint32_t state;
  uint32_t next() {
    state ^= state << 13;
    state ^= state >> 17;
    state ^= state << 5;
    return state;
  }
  std::vector<uint8_t> bytes(size_t n) {
    std::vector<uint8_t> out(n);
    for (auto& b : out) b = static_cast<uint8_t>(next() >> 24);
    return out;
  }
  std::vector<uint8_t> floats(size_t n, float lo, float hi) {
    std::vector<float> v(n);
    for (auto& f : v) f = lo + (hi - lo) * static_cast<float>(next() >> 8) / 16777216.0f;
    return OneOpModel::bytes(v);
  }
  std::vector<uint8_t> int32s(size_t n, int32_t lo, int32_t hi) {
    std::vector<int32_t> v(n);
    for (auto& x : v) x = lo + static_cast<int32_t>(next() % static_cast<uint32_t>(hi - lo + 1));
    return OneOpModel::bytes(v);
  }
};

// How LiteRT's result must compare with ours.
// kFloatClose: float32 outputs within 1e-4 x max(1, |ours|) (XNNPACK's float kernels and TFLite's
// exp/tanh sum and round in their own order; the units in the last place are reported).
enum class Bound { kExact, kXnnpackWithinOne, kFloatClose };
constexpr double kFloatTolerance = 1e-4;

struct Case {
  std::string name;
  OneOpModel model;
  Bound bound = Bound::kExact;
};

size_t elements(const std::vector<int32_t>& shape) {
  size_t n = 1;
  for (int32_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

// One-op model builder on top of OneOpModel that also records the options' union tag (the writer
// needs it) and makes weights and biases.
class Builder {
 public:
  Builder(std::string name, BuiltinOp op, Bound bound = Bound::kExact)
      : c_{std::move(name), OneOpModel(op), bound} {}
  int act(TensorType type, std::vector<int32_t> shape, float scale = 0, int64_t zp = 0) {
    return c_.model.tensor(type, std::move(shape), scale, zp);
  }
  int constant(TensorType type, std::vector<int32_t> shape, std::vector<uint8_t> data,
               float scale = 0, int64_t zp = 0) {
    return c_.model.tensor(type, std::move(shape), scale, zp, std::move(data));
  }
  // int8 weights [shape] quantized per channel along `dim` (zero points 0).
  int per_channel_weights(std::vector<int32_t> shape, int dim, Random& r) {
    const int t = constant(TensorType::kInt8, shape, r.bytes(elements(shape)));
    auto& q = c_.model.model().subgraphs[0].tensors[static_cast<size_t>(t)].quantization;
    q.scale.clear();
    q.zero_point.clear();
    for (int32_t c = 0; c < shape[static_cast<size_t>(dim)]; ++c) {
      q.scale.push_back(0.004f + 0.001f * static_cast<float>(c));
      q.zero_point.push_back(0);
    }
    q.quantized_dimension = dim;
    return t;
  }
  int bias(int32_t n, const std::vector<float>& scales, Random& r) {
    const int t = constant(TensorType::kInt32, {n}, r.int32s(static_cast<size_t>(n), -600, 600));
    auto& q = c_.model.model().subgraphs[0].tensors[static_cast<size_t>(t)].quantization;
    q.scale = scales;
    q.zero_point.assign(scales.size(), 0);
    return t;
  }
  float scale_of(int t) {
    return c_.model.model().subgraphs[0].tensors[static_cast<size_t>(t)].quantization.scale[0];
  }
  std::vector<float> scales_of(int t) {
    return c_.model.model().subgraphs[0].tensors[static_cast<size_t>(t)].quantization.scale;
  }
  Case done(std::vector<int32_t> in, std::vector<int32_t> out, Tag tag = Tag::NONE,
            container::BuiltinOptions options = {}) {
    c_.model.wire(std::move(in), std::move(out));
    c_.model.options(std::move(options));
    c_.model.model().subgraphs[0].operators[0].builtin_options_type = static_cast<uint8_t>(tag);
    return std::move(c_);
  }

 private:
  Case c_;
};

std::vector<Case> oracle_cases() {
  Random r{12345};
  std::vector<Case> cases;
  const TensorType u8 = TensorType::kUInt8, i8 = TensorType::kInt8, f32 = TensorType::kFloat32;
  {  // CONV_2D int8, per-channel weights, SAME, stride 2, ReLU
    Builder b("CONV_2D int8 per-channel", BuiltinOp::kConv2D, Bound::kXnnpackWithinOne);
    const int in = b.act(i8, {1, 9, 9, 3}, 0.05f, -3);
    const int w = b.per_channel_weights({4, 3, 3, 3}, 0, r);
    std::vector<float> bs;
    for (float s : b.scales_of(w)) bs.push_back(s * 0.05f);
    const int bias = b.bias(4, bs, r);
    const int out = b.act(i8, {1, 5, 5, 4}, 0.06f, -10);
    container::Conv2DOptions o;
    o.padding = Padding::kSame;
    o.stride_w = o.stride_h = 2;
    o.activation = Activation::kRelu;
    cases.push_back(b.done({in, w, bias}, {out}, Tag::Conv2DOptions, o));
  }
  {  // CONV_2D uint8, per-tensor, VALID
    Builder b("CONV_2D uint8", BuiltinOp::kConv2D, Bound::kXnnpackWithinOne);
    const int in = b.act(u8, {1, 6, 6, 2}, 0.04f, 120);
    const int w = b.constant(u8, {3, 3, 3, 2}, r.bytes(54), 0.01f, 130);
    const int bias = b.bias(3, {0.04f * 0.01f}, r);
    const int out = b.act(u8, {1, 4, 4, 3}, 0.05f, 128);
    container::Conv2DOptions o;
    o.padding = Padding::kValid;
    cases.push_back(b.done({in, w, bias}, {out}, Tag::Conv2DOptions, o));
  }
  {  // DEPTHWISE_CONV_2D uint8, multiplier 2
    Builder b("DEPTHWISE_CONV_2D uint8", BuiltinOp::kDepthwiseConv2D, Bound::kXnnpackWithinOne);
    const int in = b.act(u8, {1, 7, 7, 2}, 0.03f, 128);
    const int w = b.constant(u8, {1, 3, 3, 4}, r.bytes(36), 0.02f, 127);
    const int bias = b.bias(4, {0.03f * 0.02f}, r);
    const int out = b.act(u8, {1, 7, 7, 4}, 0.04f, 125);
    container::DepthwiseConv2DOptions o;
    o.depth_multiplier = 2;
    o.activation = Activation::kRelu6;
    cases.push_back(b.done({in, w, bias}, {out}, Tag::DepthwiseConv2DOptions, o));
  }
  {  // FULLY_CONNECTED uint8
    Builder b("FULLY_CONNECTED uint8", BuiltinOp::kFullyConnected);
    const int in = b.act(u8, {2, 24}, 0.05f, 128);
    const int w = b.constant(u8, {10, 24}, r.bytes(240), 0.01f, 128);
    const int bias = b.bias(10, {0.05f * 0.01f}, r);
    const int out = b.act(u8, {2, 10}, 0.08f, 120);
    cases.push_back(b.done({in, w, bias}, {out}, Tag::FullyConnectedOptions,
                           container::FullyConnectedOptions{}));
  }
  {  // FULLY_CONNECTED int8, per-tensor
    Builder b("FULLY_CONNECTED int8", BuiltinOp::kFullyConnected);
    const int in = b.act(i8, {1, 32}, 0.05f, 3);
    const int w = b.constant(i8, {8, 32}, r.bytes(256), 0.01f, 0);
    const int bias = b.bias(8, {0.05f * 0.01f}, r);
    const int out = b.act(i8, {1, 8}, 0.1f, -5);
    container::FullyConnectedOptions o;
    o.activation = Activation::kRelu;
    cases.push_back(b.done({in, w, bias}, {out}, Tag::FullyConnectedOptions, o));
  }
  for (BuiltinOp op : {BuiltinOp::kAveragePool2D, BuiltinOp::kMaxPool2D}) {
    const bool avg = op == BuiltinOp::kAveragePool2D;
    Builder b(avg ? "AVERAGE_POOL_2D uint8" : "MAX_POOL_2D int8", op);
    const TensorType t = avg ? u8 : i8;
    const int in = b.act(t, {1, 7, 7, 3}, 0.1f, avg ? 128 : 0);
    const int out = b.act(t, {1, 4, 4, 3}, 0.1f, avg ? 128 : 0);
    container::Pool2DOptions o;
    o.padding = Padding::kSame;
    o.stride_w = o.stride_h = 2;
    o.filter_w = o.filter_h = 3;
    cases.push_back(b.done({in}, {out}, Tag::Pool2DOptions, o));
  }
  const std::vector<std::pair<BuiltinOp, Tag>> binaries = {{BuiltinOp::kAdd, Tag::AddOptions},
                                                           {BuiltinOp::kSub, Tag::SubOptions},
                                                           {BuiltinOp::kMul, Tag::MulOptions}};
  for (const auto& [op, tag] : binaries) {
    for (TensorType t : {u8, i8}) {
      Builder b(std::string(container::builtin_op_name(static_cast<int32_t>(op))) +
                    (t == u8 ? " uint8" : " int8"),
                op, Bound::kXnnpackWithinOne);
      const int zp = t == u8 ? 128 : 0;
      const int x = b.act(t, {1, 4, 4, 3}, 0.05f, zp + 2);
      const int y = b.act(t, {1, 4, 4, 3}, 0.07f, zp - 4);
      const int out = b.act(t, {1, 4, 4, 3}, op == BuiltinOp::kMul ? 0.2f : 0.1f, zp + 1);
      cases.push_back(b.done({x, y}, {out}, tag, container::ActivationOptions{}));
    }
  }
  for (TensorType t : {u8, i8}) {
    Builder b(std::string("SOFTMAX ") + (t == u8 ? "uint8" : "int8"), BuiltinOp::kSoftmax);
    const int in = b.act(t, {2, 20}, 0.1f, t == u8 ? 128 : 0);
    const int out = b.act(t, {2, 20}, 1.0f / 256, t == u8 ? 0 : -128);
    cases.push_back(b.done({in}, {out}, Tag::SoftmaxOptions, container::SoftmaxOptions{}));
  }
  {  // CONCATENATION uint8 with a requantized input
    Builder b("CONCATENATION uint8", BuiltinOp::kConcatenation);
    const int x = b.act(u8, {1, 3, 3, 2}, 0.1f, 128);
    const int y = b.act(u8, {1, 3, 3, 5}, 0.05f, 100);
    const int out = b.act(u8, {1, 3, 3, 7}, 0.1f, 128);
    container::ConcatenationOptions o;
    o.axis = 3;
    cases.push_back(b.done({x, y}, {out}, Tag::ConcatenationOptions, o));
  }
  {
    Builder b("RESHAPE int8", BuiltinOp::kReshape);
    const int in = b.act(i8, {1, 4, 6}, 0.1f, 1);
    const int shape = b.constant(TensorType::kInt32, {2}, OneOpModel::bytes<int32_t>({3, 8}));
    const int out = b.act(i8, {3, 8}, 0.1f, 1);
    container::ReshapeOptions o;
    o.new_shape = {3, 8};
    cases.push_back(b.done({in, shape}, {out}, Tag::ReshapeOptions, o));
  }
  {
    Builder b("PAD uint8", BuiltinOp::kPad);
    const int in = b.act(u8, {1, 3, 4, 2}, 0.1f, 77);
    const int pads = b.constant(TensorType::kInt32, {4, 2},
                                OneOpModel::bytes<int32_t>({0, 0, 1, 2, 0, 1, 0, 0}));
    const int out = b.act(u8, {1, 6, 5, 2}, 0.1f, 77);
    cases.push_back(b.done({in, pads}, {out}, Tag::PadOptions));
  }
  {
    Builder b("SPLIT int8", BuiltinOp::kSplit);
    const int axis = b.constant(TensorType::kInt32, {}, OneOpModel::bytes<int32_t>({2}));
    const int in = b.act(i8, {1, 2, 6}, 0.1f, 0);
    const int o1 = b.act(i8, {1, 2, 3}, 0.1f, 0);
    const int o2 = b.act(i8, {1, 2, 3}, 0.1f, 0);
    container::SplitOptions o;
    o.num_splits = 2;
    cases.push_back(b.done({axis, in}, {o1, o2}, Tag::SplitOptions, o));
  }
  {
    Builder b("ARG_MAX uint8", BuiltinOp::kArgMax);
    const int in = b.act(u8, {1, 5, 5, 21}, 0.1f, 0);
    const int axis = b.constant(TensorType::kInt32, {1}, OneOpModel::bytes<int32_t>({3}));
    const int out = b.act(TensorType::kInt32, {1, 5, 5});
    container::ArgMaxOptions o;
    o.output_type = TensorType::kInt32;
    cases.push_back(b.done({in, axis}, {out}, Tag::ArgMaxOptions, o));
  }
  {
    Builder b("QUANTIZE float32 to int8", BuiltinOp::kQuantize);
    const int in = b.act(f32, {3, 17});
    const int out = b.act(i8, {3, 17}, 0.03f, 5);
    cases.push_back(b.done({in}, {out}, Tag::QuantizeOptions));
  }
  {
    Builder b("QUANTIZE uint8 to int8", BuiltinOp::kQuantize);
    const int in = b.act(u8, {3, 17}, 0.05f, 130);
    const int out = b.act(i8, {3, 17}, 0.07f, -3);
    cases.push_back(b.done({in}, {out}, Tag::QuantizeOptions));
  }
  {
    Builder b("DEQUANTIZE int8", BuiltinOp::kDequantize);
    const int in = b.act(i8, {3, 17}, 0.037f, -7);
    const int out = b.act(f32, {3, 17});
    cases.push_back(b.done({in}, {out}, Tag::DequantizeOptions));
  }
  for (TensorType t : {u8, i8}) {
    Builder b(std::string("RESIZE_BILINEAR half-pixel ") + (t == u8 ? "uint8" : "int8"),
              BuiltinOp::kResizeBilinear, Bound::kXnnpackWithinOne);
    const int in = b.act(t, {1, 4, 5, 3}, 0.1f, t == u8 ? 128 : 0);
    const int size = b.constant(TensorType::kInt32, {2}, OneOpModel::bytes<int32_t>({9, 11}));
    const int out = b.act(t, {1, 9, 11, 3}, 0.1f, t == u8 ? 128 : 0);
    container::ResizeOptions o;
    o.half_pixel_centers = true;
    cases.push_back(b.done({in, size}, {out}, Tag::ResizeBilinearOptions, o));
  }
  {
    Builder b("L2_NORMALIZATION uint8", BuiltinOp::kL2Normalization);
    const int in = b.act(u8, {1, 3, 3, 8}, 0.1f, 128);
    const int out = b.act(u8, {1, 3, 3, 8}, 1.0f / 128, 128);
    cases.push_back(b.done({in}, {out}, Tag::L2NormOptions));
  }
  {
    Builder b("MEAN uint8", BuiltinOp::kMean);
    const int in = b.act(u8, {1, 5, 5, 4}, 0.1f, 128);
    const int axes = b.constant(TensorType::kInt32, {2}, OneOpModel::bytes<int32_t>({1, 2}));
    const int out = b.act(u8, {1, 1, 1, 4}, 0.05f, 120);
    container::ReducerOptions o;
    o.keep_dims = true;
    cases.push_back(b.done({in, axes}, {out}, Tag::ReducerOptions, o));
  }
  {
    Builder b("LOGISTIC int8", BuiltinOp::kLogistic);
    const int in = b.act(i8, {4, 16}, 0.06f, 0);
    const int out = b.act(i8, {4, 16}, 1.0f / 256, -128);
    cases.push_back(b.done({in}, {out}));
  }
  {
    Builder b("TANH uint8", BuiltinOp::kTanh);
    const int in = b.act(u8, {4, 16}, 0.03f, 128);
    const int out = b.act(u8, {4, 16}, 1.0f / 128, 128);
    cases.push_back(b.done({in}, {out}));
  }
  {
    Builder b("CAST float32 to int32", BuiltinOp::kCast);
    const int in = b.act(f32, {4, 10});
    const int out = b.act(TensorType::kInt32, {4, 10});
    cases.push_back(b.done({in}, {out}, Tag::CastOptions));
  }
  {
    Builder b("CAST uint8 to float32", BuiltinOp::kCast);
    const int in = b.act(u8, {40});
    const int out = b.act(f32, {40});
    cases.push_back(b.done({in}, {out}, Tag::CastOptions));
  }
  {
    Builder b("TILE int8", BuiltinOp::kTile);
    const int in = b.act(i8, {1, 2, 3, 2}, 0.1f, 0);
    const int mult = b.constant(TensorType::kInt32, {4}, OneOpModel::bytes<int32_t>({2, 1, 3, 2}));
    const int out = b.act(i8, {2, 2, 9, 4}, 0.1f, 0);
    cases.push_back(b.done({in, mult}, {out}, Tag::TileOptions));
  }
  {
    Builder b("RESIZE_NEAREST_NEIGHBOR uint8", BuiltinOp::kResizeNearestNeighbor);
    const int in = b.act(u8, {1, 3, 4, 2}, 0.1f, 128);
    const int size = b.constant(TensorType::kInt32, {2}, OneOpModel::bytes<int32_t>({7, 9}));
    const int out = b.act(u8, {1, 7, 9, 2}, 0.1f, 128);
    cases.push_back(
        b.done({in, size}, {out}, Tag::ResizeNearestNeighborOptions, container::ResizeOptions{}));
  }
  {
    Builder b("SQUEEZE uint8", BuiltinOp::kSqueeze);
    const int in = b.act(u8, {1, 5, 1, 3}, 0.1f, 128);
    const int out = b.act(u8, {5, 3}, 0.1f, 128);
    container::SqueezeOptions o;
    o.squeeze_dims = {0, 2};
    cases.push_back(b.done({in}, {out}, Tag::SqueezeOptions, o));
  }
  // float32 operators.
  {
    Builder b("CONV_2D float32", BuiltinOp::kConv2D, Bound::kFloatClose);
    const int in = b.act(f32, {1, 6, 6, 3});
    const int w = b.constant(f32, {4, 3, 3, 3}, r.floats(108, -1.0f, 1.0f));
    const int bias = b.constant(f32, {4}, r.floats(4, -1.0f, 1.0f));
    const int out = b.act(f32, {1, 6, 6, 4});
    cases.push_back(b.done({in, w, bias}, {out}, Tag::Conv2DOptions, container::Conv2DOptions{}));
  }
  {
    Builder b("DEPTHWISE_CONV_2D float32", BuiltinOp::kDepthwiseConv2D, Bound::kFloatClose);
    const int in = b.act(f32, {1, 5, 5, 3});
    const int w = b.constant(f32, {1, 3, 3, 3}, r.floats(27, -1.0f, 1.0f));
    const int bias = b.constant(f32, {3}, r.floats(3, -1.0f, 1.0f));
    const int out = b.act(f32, {1, 5, 5, 3});
    cases.push_back(b.done({in, w, bias}, {out}, Tag::DepthwiseConv2DOptions,
                           container::DepthwiseConv2DOptions{}));
  }
  {
    Builder b("FULLY_CONNECTED float32", BuiltinOp::kFullyConnected, Bound::kFloatClose);
    const int in = b.act(f32, {2, 20});
    const int w = b.constant(f32, {6, 20}, r.floats(120, -1.0f, 1.0f));
    const int bias = b.constant(f32, {6}, r.floats(6, -1.0f, 1.0f));
    const int out = b.act(f32, {2, 6});
    cases.push_back(b.done({in, w, bias}, {out}, Tag::FullyConnectedOptions,
                           container::FullyConnectedOptions{}));
  }
  for (BuiltinOp op : {BuiltinOp::kAveragePool2D, BuiltinOp::kMaxPool2D}) {
    Builder b(op == BuiltinOp::kAveragePool2D ? "AVERAGE_POOL_2D float32" : "MAX_POOL_2D float32",
              op, Bound::kFloatClose);
    const int in = b.act(f32, {1, 6, 6, 2});
    const int out = b.act(f32, {1, 3, 3, 2});
    container::Pool2DOptions o;
    o.padding = Padding::kValid;
    o.stride_w = o.stride_h = o.filter_w = o.filter_h = 2;
    cases.push_back(b.done({in}, {out}, Tag::Pool2DOptions, o));
  }
  for (const auto& [op, tag] : binaries) {
    Builder b(std::string(container::builtin_op_name(static_cast<int32_t>(op))) + " float32", op,
              Bound::kFloatClose);
    const int x = b.act(f32, {1, 3, 3, 2});
    const int y = b.act(f32, {1, 3, 3, 2});
    const int out = b.act(f32, {1, 3, 3, 2});
    cases.push_back(b.done({x, y}, {out}, tag, container::ActivationOptions{}));
  }
  {
    Builder b("SOFTMAX float32", BuiltinOp::kSoftmax, Bound::kFloatClose);
    const int in = b.act(f32, {2, 10});
    const int out = b.act(f32, {2, 10});
    cases.push_back(b.done({in}, {out}, Tag::SoftmaxOptions, container::SoftmaxOptions{}));
  }
  for (BuiltinOp op :
       {BuiltinOp::kRelu, BuiltinOp::kRelu6, BuiltinOp::kLogistic, BuiltinOp::kTanh}) {
    Builder b(std::string(container::builtin_op_name(static_cast<int32_t>(op))) + " float32", op,
              Bound::kFloatClose);
    const int in = b.act(f32, {4, 8});
    const int out = b.act(f32, {4, 8});
    cases.push_back(b.done({in}, {out}));
  }
  return cases;
}

// Random bytes for every graph input of `model` (floats in [-8, 8)).
std::vector<std::vector<uint8_t>> random_inputs(const container::Model& model, Random& r) {
  std::vector<std::vector<uint8_t>> out;
  const auto& g = model.subgraphs[0];
  for (int32_t i : g.inputs) {
    const auto& t = g.tensors[static_cast<size_t>(i)];
    const size_t n = elements(t.shape);
    out.push_back(t.type == TensorType::kFloat32
                      ? r.floats(n, -8.0f, 8.0f)
                      : r.bytes(n * container::tensor_type_size(t.type)));
  }
  return out;
}

std::vector<uint8_t> slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

TEST(LiteRtOracle, SingleOpModelsEqualOursWhereLiteRtRunsTfliteKernels) {
  std::string why;
  const auto tool = litert_dir(why);
  if (!tool) GTEST_SKIP() << why;
  char tmpl[] = "/tmp/tinycoral_litert_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const fs::path dir = tmpl;

  // Our results, and the jobs for one LiteRT.js process.
  std::vector<Case> cases = oracle_cases();
  std::vector<std::vector<std::vector<uint8_t>>> ours(cases.size());
  nlohmann::json jobs = nlohmann::json::array();
  Random r{777};
  for (size_t c = 0; c < cases.size(); ++c) {
    const container::Model& model = cases[c].model.model();
    const auto inputs = random_inputs(model, r);
    Interpreter it = cases[c].model.build(Rounding::kTflite);
    std::vector<uint8_t> joined;
    for (size_t i = 0; i < inputs.size(); ++i) {
      it.set_input(i, inputs[i]);
      joined.insert(joined.end(), inputs[i].begin(), inputs[i].end());
    }
    it.invoke();
    for (size_t o = 0; o < it.num_outputs(); ++o) {
      const auto b = it.output_bytes(o);
      ours[c].emplace_back(b.begin(), b.end());
    }
    const std::string stem = (dir / std::to_string(c)).string();
    const auto bytes = container::write_tflite(model);
    std::ofstream(stem + ".tflite", std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
    std::ofstream(stem + ".in", std::ios::binary)
        .write(reinterpret_cast<const char*>(joined.data()),
               static_cast<std::streamsize>(joined.size()));
    jobs.push_back(
        {{"model", stem + ".tflite"}, {"input", stem + ".in"}, {"output", stem + ".out"}});
  }
  std::ofstream(dir / "jobs.json") << jobs.dump();
  const auto run =
      ::tinycoral::testing::run_shell("node '" + (*tool / "litert_run.mjs").string() +
                                      "' --batch '" + (dir / "jobs.json").string() + "'");
  ASSERT_EQ(run.exit_code, 0) << run.err;

  std::istringstream lines(run.out);
  std::string line;
  size_t c = 0, exact_ops = 0, bounded_ops = 0;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] != '{') continue;
    ASSERT_LT(c, cases.size()) << line;
    Case& k = cases[c];
    SCOPED_TRACE(k.name);
    const auto result = nlohmann::json::parse(line);
    ASSERT_FALSE(result.contains("error")) << result.dump();
    // LiteRT's outputs, split by their sizes, in the graph's output order.
    const auto all = slurp(dir / (std::to_string(c) + ".out"));
    size_t at = 0, differing = 0;
    int64_t worst = 0;  // bytes for integer outputs, units in the last place for float32
    ASSERT_EQ(result["outputs"].size(), ours[c].size());
    for (size_t o = 0; o < ours[c].size(); ++o) {
      const size_t n = result["outputs"][o]["bytes"].get<size_t>();
      ASSERT_EQ(n, ours[c][o].size()) << "output " << o;
      ASSERT_LE(at + n, all.size());
      const TensorType type =
          k.model.model()
              .subgraphs[0]
              .tensors[static_cast<size_t>(k.model.model().subgraphs[0].outputs[o])]
              .type;
      if (type == TensorType::kFloat32) {
        for (size_t i = 0; i + 4 <= n; i += 4) {
          int32_t a, b;
          std::memcpy(&a, all.data() + at + i, 4);
          std::memcpy(&b, ours[c][o].data() + i, 4);
          if (a == b) continue;
          ++differing;
          float fa, fb;
          std::memcpy(&fa, &a, 4);
          std::memcpy(&fb, &b, 4);
          const double allowed = kFloatTolerance * std::max(1.0, std::abs(double{fb}));
          EXPECT_LE(std::abs(double{fa} - double{fb}), allowed)
              << "output " << o << " value " << i / 4 << ": LiteRT " << fa << ", ours " << fb;
          // Ordered integer images of the floats: their distance counts the floats in between.
          const auto ordered = [](int32_t v) -> int64_t {
            return v < 0 ? int64_t{INT32_MIN} - v : v;
          };
          worst = std::max(worst, std::abs(ordered(a) - ordered(b)));
        }
      } else {
        for (size_t i = 0; i < n; ++i) {
          if (all[at + i] == ours[c][o][i]) continue;
          ++differing;
          const int d = type == TensorType::kInt8
                            ? std::abs(int{static_cast<int8_t>(all[at + i])} -
                                       int{static_cast<int8_t>(ours[c][o][i])})
                            : std::abs(int{all[at + i]} - int{ours[c][o][i]});
          worst = std::max<int64_t>(worst, d);
        }
      }
      at += n;
    }
    const char* unit = k.bound == Bound::kFloatClose ? " floats" : " bytes";
    if (k.bound == Bound::kExact) {
      ++exact_ops;
      EXPECT_EQ(differing, 0u) << "values differ from LiteRT.js (largest difference " << worst
                               << ")";
    } else {
      ++bounded_ops;
      if (k.bound == Bound::kXnnpackWithinOne) {
        EXPECT_LE(worst, 1) << differing << unit << " differ";
      }
    }
    std::cout << "[ LiteRT   ] " << k.name << ": " << differing << unit << " differ"
              << (differing > 0 ? ", largest difference " + std::to_string(worst) : "")
              << (k.bound == Bound::kFloatClose && differing > 0 ? " ulp" : "") << "\n";
    ++c;
  }
  EXPECT_EQ(c, cases.size()) << "LiteRT.js answered " << c << " of " << cases.size() << " models";
  RecordProperty("exact_ops", static_cast<int>(exact_ops));
  RecordProperty("bounded_ops", static_cast<int>(bounded_ops));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tinycoral::host
