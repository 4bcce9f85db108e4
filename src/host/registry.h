// Which kernel runs which operator: builtin code or custom code -> an ordered list of factories.
// The interpreter asks each factory in turn (see kernel.h) and refuses the model at load time when
// none accepts, naming the operator. Callers may layer their own factories on top (e.g. the
// runtime's "edgetpu-custom-op" delegate) through Registry::overlay.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "host/kernel.h"

namespace tinycoral::host {

class Registry {
 public:
  // Adds a factory for a builtin operator / a custom operator. Factories added later for the same
  // code are tried after the earlier ones.
  void add_builtin(container::BuiltinOp op, KernelFactory factory);
  void add_builtin(int32_t code, KernelFactory factory);
  void add_custom(const std::string& custom_code, KernelFactory factory);

  // Factories for an operator code, in the order to try them (empty when unknown).
  const std::vector<KernelFactory>& find(const container::OperatorCode& code) const;
  bool knows(const container::OperatorCode& code) const { return !find(code).empty(); }

  // The registry of every operator in src/host/ops/ (built once, thread-safe).
  static const Registry& standard();

  // A copy of `base` whose factories for the codes in `extra` come FIRST (so a caller's delegate
  // overrides or complements the standard kernels).
  static Registry overlay(const Registry& base, const Registry& extra);

  // Names of every registered operator, sorted (for docs and `--help`).
  std::vector<std::string> names() const;

 private:
  std::map<int32_t, std::vector<KernelFactory>> builtins_;
  std::map<std::string, std::vector<KernelFactory>> customs_;
};

}  // namespace tinycoral::host
