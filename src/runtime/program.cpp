// Preparing an executable: relocation, buffer sizing, hint validation, segmentation, output maps.
#include "runtime/program.h"

#include <algorithm>
#include <cstring>

#include "common/error.h"
#include "common/limits.h"
#include "isa/relocate.h"

namespace tinycoral::runtime {
namespace {
using container::BufferKind;
using container::Direction;
using container::HintKind;
using container::Layer;

size_t element_size(const Layer& layer) { return container::data_type_size(layer.data_type); }

// A layer's buffer sizes, checked against the limits before anything is allocated: its dimensions
// and counts come straight from the package, and their product may not even fit in 64 bits.
void check_layer(const Layer& layer, uint64_t& total) {
  const int32_t count = layer.execution_count_per_inference;
  if (count > limits::kMaxExecutionCount)
    fail("layer '", layer.name, "' runs ", count, " times per inference, more than the limit of ",
         limits::kMaxExecutionCount);
  uint64_t dense = element_size(layer);
  for (int32_t d : {layer.y_dim, layer.x_dim, layer.z_dim, count}) {
    dense *= static_cast<uint64_t>(std::max(1, d));
    if (dense > limits::kMaxDeviceBufferBytes) break;  // dims < 2^31: no overflow before this
  }
  const uint64_t padded = static_cast<uint64_t>(std::max(0, layer.size_bytes)) *
                          static_cast<uint64_t>(std::max(1, count));
  total += std::max(dense, padded);
  if (total > limits::kMaxDeviceBufferBytes)
    fail("layer '", layer.name, "' takes the executable's device buffers past the limit of ",
         limits::kMaxDeviceBufferBytes, " bytes (", layer.y_dim, "x", layer.x_dim, "x", layer.z_dim,
         ", ", layer.size_bytes, " bytes padded, ", count, " runs)");
}

size_t dense_bytes(const Layer& layer) {
  const int64_t elements =
      int64_t{std::max(1, layer.y_dim)} * std::max(1, layer.x_dim) * std::max(1, layer.z_dim);
  return static_cast<size_t>(elements) * element_size(layer) *
         static_cast<size_t>(std::max(1, layer.execution_count_per_inference));
}

size_t padded_bytes(const Layer& layer) {
  const size_t padded = static_cast<size_t>(std::max(0, layer.size_bytes)) *
                        static_cast<size_t>(std::max(1, layer.execution_count_per_inference));
  return std::max(padded, dense_bytes(layer));
}

int layer_index(const std::vector<Layer>& layers, const std::string& name) {
  for (size_t i = 0; i < layers.size(); ++i)
    if (layers[i].name == name) return static_cast<int>(i);
  return -1;
}

// Flips the most significant bit of every element: the chip stores signed types offset-binary.
void flip_sign_bits(std::span<uint8_t> bytes, size_t element) {
  for (size_t at = element - 1; at < bytes.size(); at += element) bytes[at] ^= 0x80;
}

constexpr size_t kMaxBuffersOfAKind = 256;  // (buffer_base: the index below the kind's bit 40)

uint64_t buffer_base(BufferKind kind, size_t index) {
  return (uint64_t(static_cast<int>(kind) + 1) << 40) | (uint64_t{index} << 32);
}

}  // namespace

uint64_t relocation_address(const container::Meta& meta, const container::Executable& exe) {
  int index = 0;
  if (meta.desc == BufferKind::kInput)
    index = std::max(0, layer_index(exe.input_layers, meta.name));
  if (meta.desc == BufferKind::kOutput)
    index = std::max(0, layer_index(exe.output_layers, meta.name));
  return buffer_base(meta.desc, static_cast<size_t>(index));
}

Program::Program(container::Executable executable) : exe_(std::move(executable)) {
  if (exe_.batch_size != 1)
    fail("executable '", exe_.name, "' has batch size ", exe_.batch_size, "; only 1 is supported");
  // A relocated address tells a buffer by its index in 8 bits (buffer_base): past 256 inputs or
  // outputs two buffers would share an address (a program of many layers has many outputs).
  for (const auto& [layers, what] :
       {std::pair{&exe_.input_layers, "inputs"}, std::pair{&exe_.output_layers, "outputs"}})
    if (layers->size() > kMaxBuffersOfAKind)
      fail("executable '", exe_.name, "' has ", layers->size(), " ", what, ", more than the ",
           kMaxBuffersOfAKind, " a relocated address tells apart");
  uint64_t device_bytes = static_cast<uint64_t>(std::max(0, exe_.scratch_size_bytes));
  if (device_bytes > limits::kMaxDeviceBufferBytes)
    fail("executable '", exe_.name, "' asks for ", device_bytes,
         " bytes of scratch, more than the limit of ", limits::kMaxDeviceBufferBytes);
  for (const Layer& l : exe_.input_layers) check_layer(l, device_bytes);
  for (const Layer& l : exe_.output_layers) check_layer(l, device_bytes);
  uint64_t instruction_bytes = 0;
  for (const container::Bitstream& b : exe_.bitstreams) instruction_bytes += b.data.size();
  if (instruction_bytes > limits::kMaxBitstreamBytes)
    fail("executable '", exe_.name, "' has ", instruction_bytes,
         " bytes of instructions, more than the limit of ", limits::kMaxBitstreamBytes);
  for (const container::Bitstream& b : exe_.bitstreams) {
    std::vector<uint8_t> chunk = b.data;
    for (const container::FieldOffset& f : b.field_offsets) {
      const uint64_t address = relocation_address(f.meta, exe_);
      const uint32_t half = f.meta.position == container::Half::kUpper32
                                ? static_cast<uint32_t>(address >> 32)
                                : static_cast<uint32_t>(address);
      isa::apply_field_offset(chunk, f.offset_bit, half);
    }
    instructions_.push_back(std::move(chunk));
  }
  for (const Layer& l : exe_.input_layers) inputs_.emplace_back(padded_bytes(l), 0);
  for (const Layer& l : exe_.output_layers) outputs_.emplace_back(padded_bytes(l), 0);
  scratch_.assign(static_cast<size_t>(std::max(0, exe_.scratch_size_bytes)), 0);
  if (exe_.dma_hints.fully_deterministic)
    build_segments();
  else
    build_requested();
  build_output_maps();
}

size_t Program::input_bytes(size_t i) const { return dense_bytes(exe_.input_layers.at(i)); }
size_t Program::output_bytes(size_t i) const { return dense_bytes(exe_.output_layers.at(i)); }

std::span<uint8_t> Program::hint_bytes(const container::DmaHint& h, bool outfeed) {
  std::vector<uint8_t>* buffer = nullptr;
  std::string what;
  switch (h.meta.desc) {
    case BufferKind::kInput:
    case BufferKind::kOutput: {
      const bool in = h.meta.desc == BufferKind::kInput;
      const auto& layers = in ? exe_.input_layers : exe_.output_layers;
      const int index = layer_index(layers, h.meta.name);
      if (index < 0)
        fail("a DMA hint names ", in ? "input" : "output", " '", h.meta.name,
             "', which the executable does not have");
      buffer = in ? &inputs_[index] : &outputs_[index];
      what = (in ? "input '" : "output '") + h.meta.name + "'";
      break;
    }
    case BufferKind::kParameter:
      if (outfeed) fail("a DMA hint reads parameters back from the device");
      buffer = &exe_.parameters;
      what = "the parameters";
      break;
    case BufferKind::kScratch:
      buffer = &scratch_;
      what = "the scratch buffer";
      break;
  }
  if ((h.meta.desc == BufferKind::kInput && outfeed) ||
      (h.meta.desc == BufferKind::kOutput && !outfeed))
    fail("a DMA hint moves ", what, " in the wrong direction");
  if (h.offset_in_bytes < 0 || h.size_in_bytes <= 0 ||
      size_t(h.offset_in_bytes) + size_t(h.size_in_bytes) > buffer->size())
    fail("a DMA hint covers bytes [", h.offset_in_bytes, ", ",
         int64_t{h.offset_in_bytes} + h.size_in_bytes, ") of ", what, ", which holds ",
         buffer->size());
  return std::span<uint8_t>(buffer->data() + h.offset_in_bytes, size_t(h.size_in_bytes));
}

void Program::build_segments() {
  const container::DmaHints& hints = exe_.dma_hints;
  usb::Segment current;
  bool has_in = false;
  auto close_segment = [&] {
    if (!current.outs.empty() || !current.outputs.empty() || !current.events.empty())
      segments_.push_back(std::move(current));
    current = usb::Segment{};
    has_in = false;
  };
  for (const container::DmaHint& h : hints.hints) {
    switch (h.kind) {
      case HintKind::kInstruction: {
        if (h.chunk_index < 0 || size_t(h.chunk_index) >= instructions_.size())
          fail("a DMA hint sends instruction chunk ", h.chunk_index, " of ", instructions_.size());
        if (has_in) close_segment();
        current.outs.push_back({usb::Tag::kInstructions, instructions_[h.chunk_index]});
        break;
      }
      case HintKind::kDma: {
        if (h.direction == Direction::kInfeed) {
          if (has_in) close_segment();
          const usb::Tag tag =
              h.meta.desc == BufferKind::kParameter ? usb::Tag::kParameters : usb::Tag::kInput;
          current.outs.push_back({tag, hint_bytes(h, false)});
        } else {
          current.outputs.push_back(hint_bytes(h, true));
          has_in = true;
        }
        break;
      }
      case HintKind::kInterrupt:
        if (h.interrupt_type < 0 || h.interrupt_type > 3)
          fail("a DMA hint waits for interrupt ", h.interrupt_type, " (0..3 exist)");
        current.events.push_back(static_cast<uint8_t>(4 + h.interrupt_type));
        has_in = true;
        break;
      case HintKind::kFence:
        close_segment();
        break;
      case HintKind::kNone:
        fail("executable '", exe_.name, "' has a DMA hint of no kind");
    }
  }
  close_segment();
  if (segments_.empty()) fail("executable '", exe_.name, "' has no DMA hints");
}

void Program::build_requested() {
  usb::RequestedProgram program;
  for (const container::DmaHint& h : exe_.dma_hints.hints) {
    switch (h.kind) {
      case HintKind::kInstruction:
        if (h.chunk_index < 0 || size_t(h.chunk_index) >= instructions_.size())
          fail("a DMA hint sends instruction chunk ", h.chunk_index, " of ", instructions_.size());
        program.hinted.push_back({0, 0, instructions_[size_t(h.chunk_index)]});
        break;
      case HintKind::kDma: {
        const bool out = h.direction != Direction::kInfeed;
        const uint8_t tag = out ? 3 : h.meta.desc == BufferKind::kParameter ? 2 : 1;
        program.hinted.push_back({tag,
                                  relocation_address(h.meta, exe_) + uint64_t(h.offset_in_bytes),
                                  hint_bytes(h, out)});
        break;
      }
      case HintKind::kInterrupt:
        if (h.interrupt_type < 0 || h.interrupt_type > 3)
          fail("a DMA hint waits for interrupt ", h.interrupt_type, " (0..3 exist)");
        program.hinted.push_back({static_cast<uint8_t>(4 + h.interrupt_type), 0, {}});
        break;
      case HintKind::kFence:
        break;  // the requests are served strictly in order anyway
      case HintKind::kNone:
        fail("executable '", exe_.name, "' has a DMA hint of no kind");
    }
  }
  program.resolve = [this](const usb::DeviceDescriptor& d) { return device_bytes(d); };
  requested_ = std::move(program);
}

std::span<uint8_t> Program::device_bytes(const usb::DeviceDescriptor& d) {
  struct Candidate {
    BufferKind kind;
    size_t index;
    std::vector<uint8_t>* buffer;
  };
  std::vector<Candidate> candidates;
  if (d.tag == 1)
    for (size_t i = 0; i < inputs_.size(); ++i)
      candidates.push_back({BufferKind::kInput, i, &inputs_[i]});
  if (d.tag == 2) candidates.push_back({BufferKind::kParameter, 0, &exe_.parameters});
  if (d.tag == 3)
    for (size_t i = 0; i < outputs_.size(); ++i)
      candidates.push_back({BufferKind::kOutput, i, &outputs_[i]});
  if (d.tag == 1 || d.tag == 3) candidates.push_back({BufferKind::kScratch, 0, &scratch_});
  for (const Candidate& c : candidates) {
    const uint64_t base = buffer_base(c.kind, c.index);
    if (d.address < base || d.address - base > c.buffer->size() ||
        c.buffer->size() - (d.address - base) < d.length)
      continue;
    return std::span<uint8_t>(c.buffer->data() + (d.address - base), d.length);
  }
  fail("the device ", d.tag == 3 ? "sent " : "asked for ", d.length, " bytes at address 0x",
       std::hex, d.address, std::dec, " (descriptor tag ", int(d.tag), "), which no ",
       d.tag == 3   ? "output or scratch"
       : d.tag == 2 ? "parameter"
                    : "input or scratch",
       " buffer of executable '", exe_.name, "' holds");
}

void Program::build_output_maps() {
  for (size_t o = 0; o < exe_.output_layers.size(); ++o) {
    const Layer& layer = exe_.output_layers[o];
    std::vector<uint32_t> map;
    const bool plain = !layer.output_layout || (layer.y_dim <= 1 && layer.x_dim <= 1) ||
                       layer.execution_count_per_inference > 1;
    if (!plain) {
      const container::OutputLayout& l = *layer.output_layout;
      const size_t y_dim = size_t(layer.y_dim), x_dim = size_t(layer.x_dim);
      const size_t row = size_t(std::max(1, layer.z_dim)) * element_size(layer);
      if (l.y_coordinate_to_linear_tile_id_map.size() < y_dim ||
          l.y_coordinate_to_local_y_offset.size() < y_dim ||
          l.x_coordinate_to_linear_tile_id_map.size() < x_dim ||
          l.x_coordinate_to_local_byte_offset.size() < x_dim ||
          l.x_coordinate_to_local_y_row_size.size() < x_dim)
        fail("output '", layer.name, "': its layout does not cover ", y_dim, "x", x_dim);
      map.reserve(y_dim * x_dim);
      for (size_t y = 0; y < y_dim; ++y) {
        for (size_t x = 0; x < x_dim; ++x) {
          const int64_t tile = int64_t{l.y_coordinate_to_linear_tile_id_map[y]} +
                               l.x_coordinate_to_linear_tile_id_map[x];
          if (tile < 0 || size_t(tile) >= l.linearized_tile_byte_offset.size())
            fail("output '", layer.name, "': layout tile ", tile, " does not exist");
          const int64_t at =
              int64_t{l.linearized_tile_byte_offset[size_t(tile)]} +
              int64_t{l.y_coordinate_to_local_y_offset[y]} * l.x_coordinate_to_local_y_row_size[x] +
              l.x_coordinate_to_local_byte_offset[x];
          if (at < 0 || size_t(at) + row > outputs_[o].size())
            fail("output '", layer.name, "': layout puts (", y, ", ", x, ") at byte ", at,
                 " outside its ", outputs_[o].size(), "-byte buffer");
          map.push_back(static_cast<uint32_t>(at));
        }
      }
    }
    output_maps_.push_back(std::move(map));
  }
}

void Program::set_parameters(std::span<const uint8_t> bytes) {
  if (bytes.size() != exe_.parameters.size())
    fail("new parameters of ", bytes.size(), " bytes for a program of ", exe_.parameters.size());
  // In place: the prepared transfers point into this buffer.
  std::copy(bytes.begin(), bytes.end(), exe_.parameters.begin());
  exe_.parameter_caching_token = 0;
}

void Program::patch_field(size_t chunk, int64_t offset_bit, int width, uint64_t value) {
  if (chunk >= instructions_.size())
    fail("a field of instruction chunk ", chunk, " of ", instructions_.size());
  // A relocated address would be lost the next time: the chunk is relocated once.
  for (const container::FieldOffset& f : exe_.bitstreams[chunk].field_offsets)
    if (offset_bit < int64_t{f.offset_bit} + 32 && int64_t{f.offset_bit} < offset_bit + width)
      fail("a field at bit ", offset_bit, " overlaps the relocation at bit ", f.offset_bit);
  isa::write_field(instructions_[chunk], offset_bit, width, value);
  isa::write_field(exe_.bitstreams[chunk].data, offset_bit, width, value);
}

void Program::set_input(size_t i, std::span<const uint8_t> bytes) {
  const Layer& layer = exe_.input_layers.at(i);
  if (bytes.size() != input_bytes(i))
    fail("input '", layer.name, "' needs ", input_bytes(i), " bytes, got ", bytes.size());
  std::vector<uint8_t>& buffer = inputs_[i];
  std::memcpy(buffer.data(), bytes.data(), bytes.size());
  if (container::data_type_is_signed_fixed(layer.data_type))
    flip_sign_bits(std::span(buffer.data(), bytes.size()), element_size(layer));
}

void Program::get_output(size_t i, std::span<uint8_t> bytes) const {
  const Layer& layer = exe_.output_layers.at(i);
  if (bytes.size() != output_bytes(i))
    fail("output '", layer.name, "' has ", output_bytes(i), " bytes, the destination ",
         bytes.size());
  const std::vector<uint8_t>& buffer = outputs_[i];
  const std::vector<uint32_t>& map = output_maps_[i];
  if (map.empty()) {
    std::memcpy(bytes.data(), buffer.data(), bytes.size());
  } else {
    const size_t row = size_t(std::max(1, layer.z_dim)) * element_size(layer);
    for (size_t k = 0; k < map.size(); ++k)
      std::memcpy(bytes.data() + k * row, buffer.data() + map[k], row);
  }
  if (container::data_type_is_signed_fixed(layer.data_type))
    flip_sign_bits(bytes, element_size(layer));
}

}  // namespace tinycoral::runtime
