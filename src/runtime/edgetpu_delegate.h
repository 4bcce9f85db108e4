// How a *_edgetpu.tflite runs: the host interpreter runs the CPU operators and hands every
// "edgetpu-custom-op" node to this delegate, which loads the node's DWN1 package (the parameter-
// caching program and the inference program) and runs it on an EdgeTpu through the runtime.
#pragma once

#include <memory>

#include "host/registry.h"
#include "runtime/edgetpu.h"

namespace tinycoral::runtime {

// Registers the edgetpu-custom-op kernel on `registry`. `tpu` must outlive every interpreter built
// with it. Load-time errors (a package the runtime cannot run, tensor sizes that disagree with the
// executable's layers) are thrown from the interpreter's constructor.
void add_edgetpu_delegate(host::Registry& registry, std::shared_ptr<EdgeTpu> tpu);

// The programs of one package, chosen as libedgetpu does: one executable runs alone; two must be
// {parameter caching, execution only}; three add a stand-alone one, which is used alone.
struct PackagePrograms {
  std::shared_ptr<Program> caching;  // may be null
  std::shared_ptr<Program> inference;
};
PackagePrograms prepare_package(const container::Package& package);

}  // namespace tinycoral::runtime
