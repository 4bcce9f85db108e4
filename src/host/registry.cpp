// The standard operator list: every src/host/ops/<name>.cpp defines register_<name>(Registry&) and
// appears once in TINYCORAL_HOST_OPS below.
#include "host/registry.h"

#include <algorithm>

namespace tinycoral::host {

// One line per operator file in src/host/ops/ (keep sorted).
#define TINYCORAL_HOST_OPS(X) \
  X(arg_max)                  \
  X(cast)                     \
  X(concatenation)            \
  X(conv_2d)                  \
  X(depthwise_conv_2d)        \
  X(detection_postprocess)    \
  X(elementwise_binary)       \
  X(float_activation)         \
  X(float_conv)               \
  X(float_elementwise)        \
  X(float_fully_connected)    \
  X(float_pool)               \
  X(fully_connected)          \
  X(l2_normalization)         \
  X(lut_activation)           \
  X(mean)                     \
  X(pad)                      \
  X(pool_2d)                  \
  X(posenet_decoder)          \
  X(quantize)                 \
  X(quantized_relu)           \
  X(reshape)                  \
  X(resize_bilinear)          \
  X(sequence_lstm)            \
  X(softmax)                  \
  X(split)                    \
  X(tile)

#define TINYCORAL_DECLARE_OP(name) void register_##name(Registry& registry);
TINYCORAL_HOST_OPS(TINYCORAL_DECLARE_OP)
#undef TINYCORAL_DECLARE_OP

void Registry::add_builtin(container::BuiltinOp op, KernelFactory factory) {
  add_builtin(static_cast<int32_t>(op), std::move(factory));
}

void Registry::add_builtin(int32_t code, KernelFactory factory) {
  builtins_[code].push_back(std::move(factory));
}

void Registry::add_custom(const std::string& custom_code, KernelFactory factory) {
  customs_[custom_code].push_back(std::move(factory));
}

const std::vector<KernelFactory>& Registry::find(const container::OperatorCode& code) const {
  static const std::vector<KernelFactory> none;
  if (code.builtin_code == static_cast<int32_t>(container::BuiltinOp::kCustom)) {
    auto it = customs_.find(code.custom_code);
    return it == customs_.end() ? none : it->second;
  }
  auto it = builtins_.find(code.builtin_code);
  return it == builtins_.end() ? none : it->second;
}

const Registry& Registry::standard() {
  static const Registry registry = [] {
    Registry r;
#define TINYCORAL_REGISTER_OP(name) register_##name(r);
    TINYCORAL_HOST_OPS(TINYCORAL_REGISTER_OP)
#undef TINYCORAL_REGISTER_OP
    return r;
  }();
  return registry;
}

Registry Registry::overlay(const Registry& base, const Registry& extra) {
  Registry out = extra;
  for (const auto& [code, factories] : base.builtins_)
    for (const auto& f : factories) out.builtins_[code].push_back(f);
  for (const auto& [code, factories] : base.customs_)
    for (const auto& f : factories) out.customs_[code].push_back(f);
  return out;
}

std::vector<std::string> Registry::names() const {
  std::vector<std::string> out;
  for (const auto& [code, factories] : builtins_) out.push_back(container::builtin_op_name(code));
  for (const auto& [code, factories] : customs_) out.push_back(code);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace tinycoral::host
