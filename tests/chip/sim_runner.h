// Test helper: runs a compiled model's executables on the virtual Edge TPU by replaying their DMA
// hints directly on the HostPort (the runtime's real replayer lives in src/runtime/; this one is
// deliberately minimal), and de-tiles outputs by their output layouts.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "chip/virtual_edge_tpu.h"
#include "common/error.h"
#include "container/edgetpu_model.h"

namespace tinycoral::chip::testing {

using Buffers = std::map<std::string, std::vector<uint8_t>>;

inline void advance_or_fail(VirtualEdgeTpu& chip) {
  if (chip.advance() == RunState::kFaulted) fail("chip faulted: ", chip.fault());
}

// Replays `exe`'s hints. Inputs by layer name (raw device bytes, padded as the layer says);
// returns the raw output buffers by layer name.
inline Buffers run_executable(VirtualEdgeTpu& chip, const container::Executable& exe,
                              const Buffers& inputs) {
  using container::BufferKind;
  using container::HintKind;
  Buffers outputs;
  for (const auto& layer : exe.output_layers) outputs[layer.name].assign(layer.size_bytes, 0);
  for (const auto& hint : exe.dma_hints.hints) {
    switch (hint.kind) {
      case HintKind::kInstruction:
        chip.receive(DmaTag::kInstructions, exe.bitstreams.at(hint.chunk_index).data);
        advance_or_fail(chip);
        break;
      case HintKind::kDma: {
        const auto begin = static_cast<size_t>(hint.offset_in_bytes);
        const auto size = static_cast<size_t>(hint.size_in_bytes);
        if (hint.direction == container::Direction::kInfeed) {
          std::vector<uint8_t> data(size, 0);
          DmaTag tag = DmaTag::kInput;
          if (hint.meta.desc == BufferKind::kParameter) {
            tag = DmaTag::kParameters;
            for (size_t i = 0; i < size && begin + i < exe.parameters.size(); ++i)
              data[i] = exe.parameters[begin + i];
          } else if (hint.meta.desc == BufferKind::kInput) {
            const auto& in = inputs.at(hint.meta.name);
            for (size_t i = 0; i < size && begin + i < in.size(); ++i) data[i] = in[begin + i];
          }
          chip.receive(tag, data);
          advance_or_fail(chip);
        } else {
          std::vector<uint8_t> got;
          while (got.size() < size) {
            advance_or_fail(chip);
            auto out = chip.take_output();
            if (!out)
              fail("chip produced ", got.size(), " of the ", size, " output bytes of hint ",
                   hint.meta.name);
            got.insert(got.end(), out->begin(), out->end());
          }
          if (hint.meta.desc == BufferKind::kOutput) {
            auto& dst = outputs[hint.meta.name];
            if (dst.size() < begin + size) dst.resize(begin + size);
            std::copy(got.begin(), got.begin() + static_cast<std::ptrdiff_t>(size),
                      dst.begin() + begin);
          }
        }
        break;
      }
      case HintKind::kInterrupt: {
        advance_or_fail(chip);
        auto event = chip.take_event();
        while (event && event->tag < 4) event = chip.take_event();  // DMA descriptors
        if (!event) fail("no completion event (interrupt ", hint.interrupt_type, ")");
        break;
      }
      default:
        advance_or_fail(chip);
    }
  }
  return outputs;
}

// Element (y, x, c) of a tile-blocked output (docs/container.md "Output layout").
inline std::vector<uint8_t> detile(const container::Layer& layer, const std::vector<uint8_t>& raw) {
  if (!layer.output_layout)
    return std::vector<uint8_t>(
        raw.begin(),
        raw.begin() + std::min<size_t>(raw.size(), layer.y_dim * layer.x_dim * layer.z_dim));
  const auto& l = *layer.output_layout;
  std::vector<uint8_t> out(static_cast<size_t>(layer.y_dim) * layer.x_dim * layer.z_dim);
  for (int y = 0; y < layer.y_dim; ++y)
    for (int x = 0; x < layer.x_dim; ++x) {
      const int tile =
          l.y_coordinate_to_linear_tile_id_map[y] + l.x_coordinate_to_linear_tile_id_map[x];
      const size_t base = static_cast<size_t>(l.linearized_tile_byte_offset[tile]) +
                          static_cast<size_t>(l.y_coordinate_to_local_y_offset[y]) *
                              l.x_coordinate_to_local_y_row_size[x] +
                          l.x_coordinate_to_local_byte_offset[x];
      for (int c = 0; c < layer.z_dim; ++c)
        out[(static_cast<size_t>(y) * layer.x_dim + x) * layer.z_dim + c] = raw.at(base + c);
    }
  return out;
}

// The package's executables by type (the caching one may be absent).
struct PackageExecutables {
  const container::Executable* caching = nullptr;
  const container::Executable* execution = nullptr;
};
// Not from a temporary model: the pointers would dangle once the statement ends.
PackageExecutables executables_of(container::EdgeTpuModel&& model, size_t op = 0) = delete;
inline PackageExecutables executables_of(const container::EdgeTpuModel& model, size_t op = 0) {
  PackageExecutables p;
  const auto& pkg = model.edgetpu_ops.at(op).options.packages.at(0);
  for (const auto& e : pkg.executables) {
    if (e.type == container::ExecutableType::kParameterCaching)
      p.caching = &e;
    else
      p.execution = &e;
  }
  return p;
}

// Caches the parameters on a new chip, runs the execution program twice on `bytes` (its one input
// layer; the runs must agree and the chip must not fault) and returns the second run's outputs.
inline Buffers run_chip_twice(const PackageExecutables& exes, const std::vector<uint8_t>& bytes) {
  Buffers inputs;
  inputs[exes.execution->input_layers.at(0).name] = bytes;
  VirtualEdgeTpu chip;
  if (exes.caching) run_executable(chip, *exes.caching, {});
  const auto first = run_executable(chip, *exes.execution, inputs);
  auto second = run_executable(chip, *exes.execution, inputs);
  EXPECT_EQ(first, second) << "the second inference differs from the first";
  EXPECT_EQ(chip.fault(), "");
  return second;
}

// Random bytes (a fixed seed) for every input layer of an executable.
inline Buffers random_inputs(const container::Executable& exe, uint32_t seed) {
  std::mt19937 generator(seed);
  Buffers inputs;
  for (const auto& layer : exe.input_layers) {
    auto& bytes = inputs[layer.name];
    bytes.resize(static_cast<size_t>(layer.size_bytes));
    for (auto& b : bytes) b = static_cast<uint8_t>(generator());
  }
  return inputs;
}

// The CPU twin with its outputs set to its tensors named `names`, in that order (an error names a
// tensor the twin lacks), so that output i can be set beside the chip's output i.
inline container::Model twin_with_outputs(container::Model twin,
                                          const std::vector<std::string>& names) {
  auto& sg = twin.subgraphs.at(0);
  sg.outputs.clear();
  for (const std::string& name : names) {
    const auto it = std::find_if(sg.tensors.begin(), sg.tensors.end(),
                                 [&](const container::Tensor& t) { return t.name == name; });
    if (it == sg.tensors.end()) fail("the twin has no tensor '", name, "'");
    sg.outputs.push_back(static_cast<int32_t>(it - sg.tensors.begin()));
  }
  return twin;
}

// The names of an executable's output layers, in order.
inline std::vector<std::string> output_layer_names(const container::Executable& exe) {
  std::vector<std::string> names;
  for (const auto& layer : exe.output_layers) names.push_back(layer.name);
  return names;
}

}  // namespace tinycoral::chip::testing
