// Hand-made executables for the fake chip (fake_chip.h): what the runtime's tests and benchmarks
// feed through the virtual stick, with the outputs the fake chip must produce for them.
#pragma once

#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "container/executable.h"
#include "usb/fake_chip.h"

namespace tinycoral::testing {

inline container::Layer make_layer(const std::string& name, int32_t bytes, bool output,
                                   container::DataType type = container::DataType::kFixedPoint8) {
  container::Layer l;
  l.name = name;
  l.size_bytes = bytes;
  l.y_dim = 1;
  l.x_dim = 1;
  l.z_dim = bytes / static_cast<int32_t>(container::data_type_size(type));
  l.data_type = type;
  l.is_output = output;
  return l;
}

inline container::DmaHint dma(container::Direction dir, container::BufferKind kind,
                              const std::string& name, int32_t offset, int32_t size) {
  container::DmaHint h;
  h.kind = container::HintKind::kDma;
  h.direction = dir;
  h.meta.desc = kind;
  h.meta.name = name;
  h.offset_in_bytes = offset;
  h.size_in_bytes = size;
  return h;
}
inline container::DmaHint instruction(int32_t chunk) {
  container::DmaHint h;
  h.kind = container::HintKind::kInstruction;
  h.chunk_index = chunk;
  return h;
}
inline container::DmaHint interrupt0() {
  container::DmaHint h;
  h.kind = container::HintKind::kInterrupt;
  h.direction = container::Direction::kOutfeed;
  return h;
}

// The common shape of a compiled model's inference program: instr, input, [param], outputs, intr.
inline container::Executable make_inference(uint32_t input_bytes, std::vector<uint32_t> outputs,
                                            uint64_t token = 0x1234, uint32_t salt = 7,
                                            uint32_t own_param_bytes = 0) {
  container::Executable e;
  e.name = "model";
  e.type = container::ExecutableType::kExecutionOnly;
  e.parameter_caching_token = token;
  e.dma_hints.fully_deterministic = true;
  // The fake chip emits equal-sized outputs; tests use that.
  const uint32_t size = outputs.empty() ? 0 : outputs[0];
  container::Bitstream b;
  b.data = FakeChip::program(input_bytes + own_param_bytes, static_cast<uint32_t>(outputs.size()),
                             size, salt);
  e.bitstreams.push_back(b);
  e.input_layers.push_back(make_layer("input", static_cast<int32_t>(input_bytes), false));
  e.dma_hints.hints.push_back(instruction(0));
  e.dma_hints.hints.push_back(dma(container::Direction::kInfeed, container::BufferKind::kInput,
                                  "input", 0, static_cast<int32_t>(input_bytes)));
  if (own_param_bytes) {
    e.parameters.assign(own_param_bytes, 1);
    e.dma_hints.hints.push_back(dma(container::Direction::kInfeed,
                                    container::BufferKind::kParameter, "", 0,
                                    static_cast<int32_t>(own_param_bytes)));
  }
  for (size_t k = 0; k < outputs.size(); ++k) {
    const std::string name = "output" + std::to_string(k);
    e.output_layers.push_back(make_layer(name, static_cast<int32_t>(outputs[k]), true));
    e.dma_hints.hints.push_back(dma(container::Direction::kOutfeed, container::BufferKind::kOutput,
                                    name, 0, static_cast<int32_t>(outputs[k])));
  }
  e.dma_hints.hints.push_back(interrupt0());
  return e;
}

// The parameter-caching program: instr, all parameters, intr.
inline container::Executable make_caching(uint32_t param_bytes, uint64_t token = 0x1234) {
  container::Executable e;
  e.name = "Unknown";
  e.type = container::ExecutableType::kParameterCaching;
  e.parameter_caching_token = token;
  e.dma_hints.fully_deterministic = true;
  container::Bitstream b;
  b.data = FakeChip::program(param_bytes, 0, 0);
  e.bitstreams.push_back(b);
  e.parameters.resize(param_bytes);
  for (uint32_t i = 0; i < param_bytes; ++i) e.parameters[i] = static_cast<uint8_t>(i * 7 + 3);
  e.dma_hints.hints.push_back(instruction(0));
  e.dma_hints.hints.push_back(dma(container::Direction::kInfeed, container::BufferKind::kParameter,
                                  "", 0, static_cast<int32_t>(param_bytes)));
  e.dma_hints.hints.push_back(interrupt0());
  return e;
}

inline uint32_t byte_sum(const std::vector<uint8_t>& bytes) {
  return std::accumulate(bytes.begin(), bytes.end(), 0u);
}

// What FakeChip computes for output k of make_inference() given `input` and the resident sum.
inline std::vector<uint8_t> expected_output(const std::vector<uint8_t>& infeed, uint32_t k,
                                            uint32_t size, uint32_t resident, uint32_t salt = 7) {
  std::vector<uint8_t> out(size);
  for (uint32_t j = 0; j < size; ++j)
    out[j] =
        static_cast<uint8_t>(infeed[(size_t(k) * size + j) % infeed.size()] + resident + salt + k);
  return out;
}

}  // namespace tinycoral::testing
