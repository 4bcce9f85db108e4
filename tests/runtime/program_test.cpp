// Preparing executables: deadlock-safe segments, hint validation, relocation, de-tiling, signed
// I/O.
#include "runtime/program.h"

#include <gtest/gtest.h>

#include "common/bits.h"
#include "common/error.h"
#include "usb/test_programs.h"

namespace tinycoral::runtime {
namespace {

using namespace tinycoral::testing;
using container::BufferKind;
using container::Direction;

TEST(Program, CutsHintsSoThatNoOutIsSentWhileAnOutputIsPending) {
  // movenet's shape: parameters interleaved between outputs.
  container::Executable e = make_inference(8, {4, 4});
  e.parameters.assign(16, 1);
  auto& h = e.dma_hints.hints;  // instr, input, out0, out1, intr
  h.insert(h.begin() + 3, dma(Direction::kInfeed, BufferKind::kParameter, "", 0, 16));
  // -> instr, input, out0, param, out1, intr
  Program p(std::move(e));
  ASSERT_EQ(p.segments().size(), 2u);
  EXPECT_EQ(p.segments()[0].outs.size(), 2u);
  EXPECT_EQ(p.segments()[0].outputs.size(), 1u);
  EXPECT_TRUE(p.segments()[0].events.empty());
  EXPECT_EQ(p.segments()[1].outs.size(), 1u);
  EXPECT_EQ(p.segments()[1].outs[0].tag, usb::Tag::kParameters);
  EXPECT_EQ(p.segments()[1].outputs.size(), 1u);
  EXPECT_EQ(p.segments()[1].events, std::vector<uint8_t>{4});
}

// A caching program reused with new values (the llm path's key writes): the prepared parameter
// transfer sends the new bytes, the token no longer claims residency, and a wrong size is refused.
TEST(Program, NewParametersGoOutThroughThePreparedTransfer) {
  container::Executable e = make_inference(8, {4});
  e.parameters.assign(16, 1);
  e.parameter_caching_token = 77;
  auto& h = e.dma_hints.hints;
  h.insert(h.begin() + 1, dma(Direction::kInfeed, BufferKind::kParameter, "", 0, 16));
  Program p(std::move(e));
  const std::vector<uint8_t> fresh = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  p.set_parameters(fresh);
  EXPECT_EQ(p.executable().parameter_caching_token, 0u);
  bool sent = false;
  for (const usb::Segment& s : p.segments())
    for (const usb::OutDma& out : s.outs)
      if (out.tag == usb::Tag::kParameters) {
        EXPECT_EQ(std::vector<uint8_t>(out.payload.begin(), out.payload.end()), fresh);
        sent = true;
      }
  EXPECT_TRUE(sent);
  EXPECT_THROW(p.set_parameters(std::vector<uint8_t>(15, 0)), Error);
}

TEST(Program, AFenceStartsANewSegment) {
  container::Executable e = make_inference(8, {4});
  container::DmaHint fence;
  fence.kind = container::HintKind::kFence;
  e.dma_hints.hints.insert(e.dma_hints.hints.begin() + 1, fence);
  Program p(std::move(e));
  ASSERT_EQ(p.segments().size(), 2u);
  EXPECT_EQ(p.segments()[0].outs.size(), 1u);
  EXPECT_TRUE(p.segments()[0].outputs.empty());
}

TEST(Program, RejectsHintsItCannotFollow) {
  auto expect_error = [](container::Executable e, const std::string& part) {
    try {
      Program p(std::move(e));
      FAIL() << "expected an error mentioning " << part;
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find(part), std::string::npos) << err.what();
    }
  };
  container::Executable e = make_inference(8, {4});
  e.dma_hints.hints[1].size_in_bytes = 9;
  expect_error(e, "covers bytes [0, 9) of input 'input'");
  e = make_inference(8, {4});
  e.dma_hints.hints[2].meta.name = "nope";
  expect_error(e, "'nope'");
  e = make_inference(8, {4});
  e.dma_hints.hints[0].chunk_index = 3;
  expect_error(e, "instruction chunk 3");
  // An address's 8 bits of buffer index: 256 outputs are taken, 257 refused.
  EXPECT_NO_THROW(Program(make_inference(8, std::vector<uint32_t>(256, 4))));
  expect_error(make_inference(8, std::vector<uint32_t>(257, 4)),
               "257 outputs, more than the 256 a relocated address tells apart");
}

// Hints that are not fully deterministic: the program runs on what the device requests, each
// descriptor naming its host buffer by the relocated address (docs/driver.md "Device-requested
// DMAs"); the hinted transfers carry the addresses their descriptors will.
TEST(Program, FindsTheBuffersDeviceDescriptorsName) {
  container::Executable e = make_inference(8, {4});
  e.scratch_size_bytes = 64;
  e.dma_hints.fully_deterministic = false;
  container::Meta input, output, scratch;
  input.desc = BufferKind::kInput;
  input.name = "input";
  output.desc = BufferKind::kOutput;
  output.name = e.output_layers[0].name;
  scratch.desc = BufferKind::kScratch;
  const uint64_t in_base = relocation_address(input, e), out_base = relocation_address(output, e),
                 scratch_base = relocation_address(scratch, e);
  Program p(std::move(e));
  EXPECT_TRUE(p.segments().empty());
  ASSERT_TRUE(p.requested().has_value());
  const usb::RequestedProgram& r = *p.requested();
  ASSERT_EQ(r.hinted.size(), 4u);  // instructions, input, output, interrupt 0
  EXPECT_EQ(r.hinted[0].tag, 0);
  EXPECT_EQ(r.hinted[1].tag, 1);
  EXPECT_EQ(r.hinted[1].address, in_base);
  EXPECT_EQ(r.hinted[1].bytes.data(), p.input_buffers()[0].data());
  EXPECT_EQ(r.hinted[2].tag, 3);
  EXPECT_EQ(r.hinted[2].address, out_base);
  EXPECT_EQ(r.hinted[3].tag, 4);

  // Scratch both ways, at an offset; inputs and outputs each in their direction only.
  const auto out = r.resolve({3, scratch_base + 40, 24});
  const auto back = r.resolve({1, scratch_base + 40, 24});
  EXPECT_EQ(out.data(), back.data());
  EXPECT_EQ(out.size(), 24u);
  EXPECT_EQ(r.resolve({3, out_base, 4}).data(), p.output_buffers()[0].data());
  auto expect_refused = [&](usb::DeviceDescriptor d, const std::string& part) {
    try {
      r.resolve(d);
      FAIL() << "expected an error mentioning " << part;
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find(part), std::string::npos) << err.what();
    }
  };
  expect_refused({3, scratch_base + 41, 24}, "which no output or scratch buffer");
  expect_refused({1, out_base, 4}, "which no input or scratch buffer");
  expect_refused({3, in_base, 8}, "sent 8 bytes");
  expect_refused({2, 0, 8}, "which no parameter buffer");
}

TEST(Program, PatchesRelocationsWithDistinctAddresses) {
  container::Executable e = make_inference(8, {4});
  e.bitstreams[0].data.resize(32, 0);
  container::FieldOffset lo, hi;
  lo.meta.desc = BufferKind::kInput;
  lo.meta.name = "input";
  lo.offset_bit = 128 + 70;
  hi = lo;
  hi.meta.position = container::Half::kUpper32;
  hi.offset_bit = 64;
  e.bitstreams[0].field_offsets = {lo, hi};
  const uint64_t address = relocation_address(lo.meta, e);
  Program p(std::move(e));
  const auto& chunk = p.segments()[0].outs[0].payload;
  EXPECT_EQ(get_bits(chunk, 128 + 70, 32), address & 0xFFFFFFFF);
  EXPECT_EQ(get_bits(chunk, 64, 32), address >> 32);
  EXPECT_NE(address >> 32, 0u);
}

// A field rewritten in place (the llm path's key column address): the bytes the prepared
// transfer sends change in that field alone, relocations kept, and so does executable(); a field
// over a relocation, outside the chunk or in no chunk is refused.
TEST(Program, RewritesAFieldInTheBytesEveryRunSends) {
  container::Executable e = make_inference(8, {4});
  e.bitstreams[0].data.resize(32, 0xff);
  container::FieldOffset lo;
  lo.meta.desc = BufferKind::kInput;
  lo.meta.name = "input";
  lo.offset_bit = 128 + 70;
  e.bitstreams[0].field_offsets = {lo};
  const uint64_t address = relocation_address(lo.meta, e);
  std::vector<uint8_t> unrelocated = e.bitstreams[0].data;
  Program p(std::move(e));
  const std::vector<uint8_t> before = p.instructions().at(0);
  p.patch_field(0, 11, 16, 0x1234);
  const auto& chunk = p.segments()[0].outs[0].payload;
  EXPECT_EQ(get_bits(chunk, 11, 16), 0x1234u);
  EXPECT_EQ(get_bits(chunk, 128 + 70, 32), address & 0xFFFFFFFF);
  std::vector<uint8_t> want = before;
  set_bits(want, 11, 16, 0x1234);
  EXPECT_EQ(std::vector<uint8_t>(chunk.begin(), chunk.end()), want);
  set_bits(unrelocated, 11, 16, 0x1234);
  EXPECT_EQ(p.executable().bitstreams[0].data, unrelocated);
  EXPECT_THROW(p.patch_field(0, 128 + 60, 16, 1), Error);  // reaches the relocation at 198
  EXPECT_THROW(p.patch_field(0, 128 + 101, 8, 1), Error);  // inside it
  EXPECT_THROW(p.patch_field(0, 250, 16, 1), Error);
  EXPECT_THROW(p.patch_field(1, 0, 16, 1), Error);
  EXPECT_THROW(p.patch_field(0, 11, 16, 0x10000), Error);
}

TEST(Program, DetilesOutputsByTheirLayout) {
  // A 2x2x3 output stored as two tiles (x = 0 and x = 1), rows 8 bytes apart inside each tile.
  container::Executable e = make_inference(8, {32});
  container::Layer& out = e.output_layers[0];
  out.y_dim = 2;
  out.x_dim = 2;
  out.z_dim = 3;
  container::OutputLayout layout;
  layout.y_coordinate_to_linear_tile_id_map = {0, 0};
  layout.x_coordinate_to_linear_tile_id_map = {0, 1};
  layout.linearized_tile_byte_offset = {0, 16};
  layout.x_coordinate_to_local_byte_offset = {0, 0};
  layout.y_coordinate_to_local_y_offset = {0, 1};
  layout.x_coordinate_to_local_y_row_size = {8, 8};
  out.output_layout = layout;
  Program p(std::move(e));
  auto& device = const_cast<std::vector<uint8_t>&>(p.output_buffers()[0]);
  for (size_t i = 0; i < device.size(); ++i) device[i] = static_cast<uint8_t>(i);
  std::vector<uint8_t> yxz(12);
  p.get_output(0, yxz);
  // (y,x) -> tile x at 16*x, row y at 8*y.
  EXPECT_EQ(yxz, (std::vector<uint8_t>{0, 1, 2, 16, 17, 18, 8, 9, 10, 24, 25, 26}));
}

TEST(Program, RejectsALayoutOutsideTheBuffer) {
  container::Executable e = make_inference(8, {8});
  container::Layer& out = e.output_layers[0];
  out.y_dim = 2;
  out.x_dim = 1;
  out.z_dim = 4;
  container::OutputLayout layout;
  layout.y_coordinate_to_linear_tile_id_map = {0, 0};
  layout.x_coordinate_to_linear_tile_id_map = {0};
  layout.linearized_tile_byte_offset = {0};
  layout.x_coordinate_to_local_byte_offset = {0};
  layout.y_coordinate_to_local_y_offset = {0, 100};
  layout.x_coordinate_to_local_y_row_size = {4};
  out.output_layout = layout;
  EXPECT_THROW(Program p(std::move(e)), Error);
}

TEST(Program, FlipsTheSignBitOfSignedInputsAndOutputs) {
  container::Executable e = make_inference(4, {4});
  e.input_layers[0].data_type = container::DataType::kSignedFixedPoint16;
  e.input_layers[0].z_dim = 2;
  e.output_layers[0].data_type = container::DataType::kSignedFixedPoint8;
  Program p(std::move(e));
  const std::vector<uint8_t> in = {0x01, 0x02, 0x03, 0x84};  // two int16 little-endian
  p.set_input(0, in);
  EXPECT_EQ(p.input_buffers()[0], (std::vector<uint8_t>{0x01, 0x82, 0x03, 0x04}));
  auto& device = const_cast<std::vector<uint8_t>&>(p.output_buffers()[0]);
  device = {0x00, 0x80, 0xFF, 0x7F};
  std::vector<uint8_t> out(4);
  p.get_output(0, out);
  EXPECT_EQ(out, (std::vector<uint8_t>{0x80, 0x00, 0x7F, 0xFF}));
  EXPECT_THROW(p.set_input(0, std::vector<uint8_t>(3)), Error);
}

}  // namespace
}  // namespace tinycoral::runtime
