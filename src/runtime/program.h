// One executable prepared for the wire (docs/driver.md "How one program run is sequenced"):
// relocated instruction chunks, padded input/output/scratch buffers, and its DMA hints cut into
// segments that can never break the deadlock rule - a segment is a run of OUTs followed by the INs
// that come before the next OUT, and a fence always starts a new one. Everything is built once, so
// an inference only copies its inputs in, runs the segments and copies its outputs out.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "container/executable.h"
#include "usb/dma_engine.h"

namespace tinycoral::runtime {

class Program {
 public:
  // Throws Error for hints the runtime cannot follow (non-deterministic hints, a DMA outside its
  // buffer, an unknown layer name or instruction chunk).
  explicit Program(container::Executable executable);
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  const container::Executable& executable() const { return exe_; }
  size_t num_inputs() const { return exe_.input_layers.size(); }
  size_t num_outputs() const { return exe_.output_layers.size(); }
  // Bytes of input/output i as the user sees it (dense, unpadded, y*x*z elements).
  size_t input_bytes(size_t i) const;
  size_t output_bytes(size_t i) const;

  // Copies a user input into its padded device buffer (flipping the MSB of signed types).
  void set_input(size_t i, std::span<const uint8_t> bytes);
  // Replaces the parameter bytes (the same count; throws Error otherwise), keeping the prepared
  // instructions: a caching program that writes new values to the same place. Its caching token
  // becomes 0, so the runtime never takes it for parameters already resident.
  void set_parameters(std::span<const uint8_t> bytes);
  // Rewrites the `width`-bit field at `offset_bit` of instruction chunk `chunk` to `value` in
  // place (isa::write_field), in the bytes every run sends and in executable(): one program for
  // many that differ only in that field (the llm path's key column, ChipTransformer::joined_run).
  // The chunk keeps its size, so the prepared segments stay valid. Throws Error for a field
  // outside the chunk, a value that does not fit, or a field a relocation writes.
  void patch_field(size_t chunk, int64_t offset_bit, int width, uint64_t value);
  // The relocated instruction chunks, as every run sends them.
  const std::vector<std::vector<uint8_t>>& instructions() const { return instructions_; }
  // Writes output i in YXZ order (de-tiled by its layout, MSB flipped back for signed types).
  void get_output(size_t i, std::span<uint8_t> bytes) const;

  const std::vector<usb::Segment>& segments() const { return segments_; }
  // Set instead of segments when the hints are not fully deterministic: the program then runs on
  // the transfers the device requests itself (docs/driver.md "Device-requested DMAs").
  const std::optional<usb::RequestedProgram>& requested() const { return requested_; }
  // The device-side buffers, for the canary (save, replay, compare bit for bit).
  std::vector<std::vector<uint8_t>>& input_buffers() { return inputs_; }
  const std::vector<std::vector<uint8_t>>& output_buffers() const { return outputs_; }

 private:
  void build_segments();
  void build_requested();
  // The bytes a DMA hint moves, checked against its buffer and direction.
  std::span<uint8_t> hint_bytes(const container::DmaHint& h, bool outfeed);
  // The host bytes a device-reported descriptor names, by its relocated address.
  std::span<uint8_t> device_bytes(const usb::DeviceDescriptor& d);
  void build_output_maps();

  container::Executable exe_;
  std::vector<std::vector<uint8_t>> instructions_;  // relocated chunks
  std::vector<std::vector<uint8_t>> inputs_, outputs_;
  std::vector<uint8_t> scratch_;
  std::vector<usb::Segment> segments_;
  std::optional<usb::RequestedProgram> requested_;
  // Per output: byte offset of each (y, x) run of z elements in the device buffer; empty = plain.
  std::vector<std::vector<uint32_t>> output_maps_;
};

// The synthetic device address a buffer is relocated to: (kind + 1) << 40 | index << 32, the low
// 32 bits free for offsets. Nothing on the USB path dereferences it (data is routed by header
// tags), but device-reported descriptors (descr_ep 0xFF) carry it plus an offset, and the host
// finds the buffer they name by it (docs/driver.md "Device-requested DMAs").
uint64_t relocation_address(const container::Meta& meta, const container::Executable& exe);

}  // namespace tinycoral::runtime
