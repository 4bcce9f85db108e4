// DWN1 Package <-> Package/Executable structs. Each nested flatbuffer (MultiExecutable, every
// Executable) is given an aligned home and verified before it is read; the checks libedgetpu makes
// on a package (driver.md 5.1 step 3) are repeated here as errors or warnings. Slot layout:
// schema/executable.fbs; facts: docs/container.md.
#include "container/package.h"

#include "common/error.h"
#include "container/flatbuffer_util.h"
#include "container/schema/executable_generated.h"

namespace tinycoral::container {
namespace dw = platforms::darwinn;
namespace {

using detail::to_bytes;
using detail::to_string;
using detail::to_vector;
using detail::vec_or_null;
using flatbuffers::FlatBufferBuilder;
using flatbuffers::Offset;

template <typename Table>
const Table* verified_root(std::span<const uint8_t> bytes, const detail::AlignedBytes& aligned,
                           const char* what) {
  if (bytes.size() < 8) fail(what, " is only ", bytes.size(), " bytes");
  if (bytes.size() >= FLATBUFFERS_MAX_BUFFER_SIZE) fail(what, " is larger than 2 GiB");
  flatbuffers::Verifier verifier(aligned.data(), aligned.size());
  // nullptr: do not insist on an identifier (executables have none; a package's is checked apart).
  if (!verifier.VerifyBuffer<Table>(nullptr))
    fail(what,
         " is malformed (flatbuffer verification failed: an offset or size points outside "
         "it)");
  return flatbuffers::GetRoot<Table>(aligned.data());
}

// ---------------------------------------------------------------------------------------------
// Reading

Meta read_meta(const dw::Meta* m) {
  Meta out;
  if (m == nullptr) return out;
  const auto desc = static_cast<int16_t>(m->desc());
  if (desc < 0 || desc > 3) fail("unknown buffer description ", desc);
  const auto position = static_cast<int16_t>(m->position());
  if (position < 0 || position > 1) fail("unknown address half ", position);
  out.desc = static_cast<BufferKind>(desc);
  out.batch = m->batch();
  out.name = to_string(m->name());
  out.position = static_cast<Half>(position);
  return out;
}

Bitstream read_bitstream(const dw::InstructionBitstream& b) {
  Bitstream out;
  out.data = to_bytes(b.bitstream());
  if (out.data.size() % 16 != 0)
    fail(out.data.size(), " bytes is not a whole number of 16-byte instruction words");
  if (b.field_offsets() != nullptr) {
    for (flatbuffers::uoffset_t i = 0; i < b.field_offsets()->size(); ++i) {
      const dw::FieldOffset& f = *b.field_offsets()->Get(i);
      FieldOffset fo{with_context(cat("field offset ", i), [&] { return read_meta(f.meta()); }),
                     f.offset_bit()};
      // A relocation writes 32 bits starting at offset_bit; it must stay inside the stream.
      if (fo.offset_bit < 0 || static_cast<uint64_t>(fo.offset_bit) + 32 > out.data.size() * 8)
        fail("field offset ", i, " at bit ", fo.offset_bit, " is outside the ", out.data.size() * 8,
             "-bit bitstream");
      out.field_offsets.push_back(std::move(fo));
    }
  }
  return out;
}

DmaHint read_hint(const dw::DmaHint& h) {
  DmaHint out;
  const auto direction = static_cast<int16_t>(h.direction());
  if (direction < 0 || direction > 1) fail("unknown direction ", direction);
  out.direction = static_cast<Direction>(direction);
  switch (h.any_hint_type()) {
    case dw::AnyHint::NONE:
      out.kind = HintKind::kNone;
      break;
    case dw::AnyHint::DmaDescriptorHint: {
      const auto* d = h.any_hint_as_DmaDescriptorHint();
      if (d == nullptr) fail("DMA hint without its descriptor");
      out.kind = HintKind::kDma;
      out.meta = read_meta(d->meta());
      out.offset_in_bytes = d->offset_in_bytes();
      out.size_in_bytes = d->size_in_bytes();
      if (out.offset_in_bytes < 0 || out.size_in_bytes < 0)
        fail("negative DMA window [", out.offset_in_bytes, " + ", out.size_in_bytes, ")");
      break;
    }
    case dw::AnyHint::InstructionHint: {
      const auto* d = h.any_hint_as_InstructionHint();
      if (d == nullptr) fail("instruction hint without its table");
      out.kind = HintKind::kInstruction;
      out.chunk_index = d->instruction_chunk_index();
      break;
    }
    case dw::AnyHint::InterruptHint: {
      const auto* d = h.any_hint_as_InterruptHint();
      if (d == nullptr) fail("interrupt hint without its table");
      out.kind = HintKind::kInterrupt;
      out.interrupt_type = static_cast<int16_t>(d->type());
      if (out.interrupt_type < 0 || out.interrupt_type > 3)
        fail("unknown interrupt type ", out.interrupt_type);
      break;
    }
    case dw::AnyHint::FenceHint:
      out.kind = HintKind::kFence;
      break;
    default:
      fail("unknown hint type ", static_cast<int>(h.any_hint_type()));
  }
  return out;
}

DataType read_data_type(dw::DataType t) {
  const auto v = static_cast<int16_t>(t);
  switch (v) {
    case 0:
    case 1:
    case 2:
    case 3:
    case 4:
    case 5:
    case 8:
    case 9:
      return static_cast<DataType>(v);
    default:
      fail("unknown data type ", v);
  }
}

std::vector<Range> read_shape(const dw::TensorShape* s) {
  std::vector<Range> out;
  if (s == nullptr || s->dimension() == nullptr) return out;
  for (const dw::Range* r : *s->dimension()) out.push_back(Range{r->start(), r->end()});
  return out;
}

Layer read_layer(const dw::Layer& l) {
  Layer out;
  out.name = to_string(l.name());
  out.size_bytes = l.size_bytes();
  out.y_dim = l.y_dim();
  out.x_dim = l.x_dim();
  out.z_dim = l.z_dim();
  if (out.size_bytes < 0 || out.y_dim < 0 || out.x_dim < 0 || out.z_dim < 0)
    fail("negative size or dimension");
  if (l.numerics() != nullptr) {
    out.zero_point = l.numerics()->zero_point();
    out.dequantization_factor = l.numerics()->dequantization_factor();
  }
  out.data_type = read_data_type(l.data_type());
  out.execution_count_per_inference = l.execution_count_per_inference();
  if (out.execution_count_per_inference < 1)
    fail("execution_count_per_inference ", out.execution_count_per_inference, " (must be >= 1)");
  out.cache_on_dram = l.cache_on_dram();
  out.shape = read_shape(l.shape());
  for (const Range& r : out.shape)
    if (r.end < r.start) fail("shape range [", r.start, ", ", r.end, "] ends before it starts");
  switch (l.any_layer_type()) {
    case dw::AnyLayer::OutputLayer: {
      out.is_output = true;
      const dw::OutputLayer* o = l.any_layer_as_OutputLayer();
      if (o != nullptr && o->layout() != nullptr) {
        const dw::OutputLayout& m = *o->layout();
        OutputLayout layout{to_vector<int32_t>(m.y_coordinate_to_linear_tile_id_map()),
                            to_vector<int32_t>(m.x_coordinate_to_linear_tile_id_map()),
                            to_vector<int32_t>(m.linearized_tile_byte_offset()),
                            to_vector<int32_t>(m.x_coordinate_to_local_byte_offset()),
                            to_vector<int32_t>(m.y_coordinate_to_local_y_offset()),
                            to_vector<int32_t>(m.x_coordinate_to_local_y_row_size())};
        // The relayout indexes these by y and x (driver.md 5.4).
        if (layout.y_coordinate_to_linear_tile_id_map.size() != static_cast<size_t>(out.y_dim) ||
            layout.y_coordinate_to_local_y_offset.size() != static_cast<size_t>(out.y_dim))
          fail("output layout has ", layout.y_coordinate_to_linear_tile_id_map.size(),
               " y entries for y_dim ", out.y_dim);
        if (layout.x_coordinate_to_linear_tile_id_map.size() != static_cast<size_t>(out.x_dim) ||
            layout.x_coordinate_to_local_byte_offset.size() != static_cast<size_t>(out.x_dim) ||
            layout.x_coordinate_to_local_y_row_size.size() != static_cast<size_t>(out.x_dim))
          fail("output layout has ", layout.x_coordinate_to_linear_tile_id_map.size(),
               " x entries for x_dim ", out.x_dim);
        out.output_layout = std::move(layout);
      }
      break;
    }
    case dw::AnyLayer::InputLayer:
    case dw::AnyLayer::NONE:
      break;
    default:
      fail("unknown layer kind ", static_cast<int>(l.any_layer_type()));
  }
  return out;
}

std::vector<Layer> read_layers(const flatbuffers::Vector<Offset<dw::Layer>>* layers,
                               const char* what) {
  std::vector<Layer> out;
  if (layers == nullptr) return out;
  for (flatbuffers::uoffset_t i = 0; i < layers->size(); ++i)
    out.push_back(with_context(cat(what, " ", i), [&] { return read_layer(*layers->Get(i)); }));
  return out;
}

Executable read_verified_executable(const dw::Executable& e) {
  Executable out;
  out.version = e.version();
  out.name = to_string(e.name());
  out.batch_size = e.batch_size();
  if (out.batch_size < 1) fail("batch_size ", out.batch_size, " (must be >= 1)");
  out.scratch_size_bytes = e.scratch_size_bytes();
  if (out.scratch_size_bytes < 0) fail("negative scratch_size_bytes ", out.scratch_size_bytes);
  if (e.instruction_bitstreams() != nullptr) {
    for (flatbuffers::uoffset_t i = 0; i < e.instruction_bitstreams()->size(); ++i)
      out.bitstreams.push_back(with_context(cat("bitstream ", i), [&] {
        return read_bitstream(*e.instruction_bitstreams()->Get(i));
      }));
  }
  out.parameters = to_bytes(e.parameters());
  if (e.dma_hints() != nullptr) {
    out.dma_hints.fully_deterministic = e.dma_hints()->fully_deterministic();
    if (const auto* hints = e.dma_hints()->hints()) {
      for (flatbuffers::uoffset_t i = 0; i < hints->size(); ++i)
        out.dma_hints.hints.push_back(
            with_context(cat("DMA hint ", i), [&] { return read_hint(*hints->Get(i)); }));
    }
  }
  out.input_layers = read_layers(e.input_layers(), "input layer");
  out.output_layers = read_layers(e.output_layers(), "output layer");
  out.chip = to_string(e.chip());
  // The 64-bit field superseded the 32-bit one; older compilers set only the latter.
  out.estimated_cycles =
      e.estimated_cycles_64bit() != 0 ? e.estimated_cycles_64bit() : int64_t{e.estimated_cycles()};
  out.used_narrow_memory_bytes_per_tile = e.used_narrow_memory_bytes_per_tile();
  const auto type = static_cast<int16_t>(e.type());
  if (type < 0 || type > 2) fail("unknown executable type ", type);
  out.type = static_cast<ExecutableType>(type);
  out.parameter_caching_token = e.parameter_caching_token();
  out.use_tpu_dram_for_parameters = e.use_tpu_dram_for_parameters();
  return out;
}

// ---------------------------------------------------------------------------------------------
// Writing

// Byte vectors that hold data the device or a nested reader uses in place get 16-byte alignment.
Offset<flatbuffers::Vector<uint8_t>> aligned_bytes(FlatBufferBuilder& b,
                                                   const std::vector<uint8_t>& v) {
  if (v.empty()) return 0;
  b.ForceVectorAlignment(v.size(), sizeof(uint8_t), 16);
  return b.CreateVector(v);
}

Offset<dw::Meta> write_meta(FlatBufferBuilder& b, const Meta& m) {
  const auto name = m.name.empty() ? 0 : b.CreateString(m.name);
  return dw::CreateMeta(b, static_cast<dw::Description>(m.desc), m.batch, name,
                        static_cast<dw::Position>(m.position));
}

Offset<dw::InstructionBitstream> write_bitstream(FlatBufferBuilder& b, const Bitstream& s) {
  std::vector<Offset<dw::FieldOffset>> offsets;
  for (const FieldOffset& f : s.field_offsets)
    offsets.push_back(dw::CreateFieldOffset(b, write_meta(b, f.meta), f.offset_bit));
  const auto offsets_v = offsets.empty() ? 0 : b.CreateVector(offsets);
  const auto data = aligned_bytes(b, s.data);
  return dw::CreateInstructionBitstream(b, data, offsets_v);
}

Offset<dw::DmaHint> write_hint(FlatBufferBuilder& b, const DmaHint& h) {
  Offset<void> value = 0;
  dw::AnyHint type = dw::AnyHint::NONE;
  switch (h.kind) {
    case HintKind::kNone:
      break;
    case HintKind::kDma:
      type = dw::AnyHint::DmaDescriptorHint;
      value =
          dw::CreateDmaDescriptorHint(b, write_meta(b, h.meta), h.offset_in_bytes, h.size_in_bytes)
              .Union();
      break;
    case HintKind::kInstruction:
      type = dw::AnyHint::InstructionHint;
      value = dw::CreateInstructionHint(b, h.chunk_index).Union();
      break;
    case HintKind::kInterrupt:
      type = dw::AnyHint::InterruptHint;
      value = dw::CreateInterruptHint(b, static_cast<dw::InterruptType>(h.interrupt_type)).Union();
      break;
    case HintKind::kFence:
      type = dw::AnyHint::FenceHint;
      value = dw::CreateFenceHint(b).Union();
      break;
  }
  return dw::CreateDmaHint(b, type, value, static_cast<dw::Direction>(h.direction));
}

Offset<dw::Layer> write_layer(FlatBufferBuilder& b, const Layer& l) {
  const auto name = b.CreateString(l.name);
  const auto numerics = dw::CreateNumericsConstants(b, l.zero_point, l.dequantization_factor);
  Offset<void> any = 0;
  if (l.is_output) {
    Offset<dw::OutputLayout> layout = 0;
    if (l.output_layout) {
      const OutputLayout& m = *l.output_layout;
      layout = dw::CreateOutputLayout(b, vec_or_null(b, m.y_coordinate_to_linear_tile_id_map),
                                      vec_or_null(b, m.x_coordinate_to_linear_tile_id_map),
                                      vec_or_null(b, m.linearized_tile_byte_offset),
                                      vec_or_null(b, m.x_coordinate_to_local_byte_offset),
                                      vec_or_null(b, m.y_coordinate_to_local_y_offset),
                                      vec_or_null(b, m.x_coordinate_to_local_y_row_size));
    }
    any = dw::CreateOutputLayer(b, layout).Union();
  } else {
    any = dw::CreateInputLayer(b).Union();
  }
  Offset<dw::TensorShape> shape = 0;
  if (!l.shape.empty()) {
    std::vector<dw::Range> dims;
    for (const Range& r : l.shape) dims.emplace_back(r.start, r.end);
    shape = dw::CreateTensorShape(b, b.CreateVectorOfStructs(dims));
  }
  return dw::CreateLayer(b, name, l.size_bytes, l.y_dim, l.x_dim, l.z_dim, numerics,
                         static_cast<dw::DataType>(l.data_type),
                         l.is_output ? dw::AnyLayer::OutputLayer : dw::AnyLayer::InputLayer, any,
                         l.execution_count_per_inference, l.cache_on_dram, shape);
}

Offset<flatbuffers::Vector<Offset<dw::Layer>>> write_layers(FlatBufferBuilder& b,
                                                            const std::vector<Layer>& layers) {
  std::vector<Offset<dw::Layer>> out;
  for (const Layer& l : layers) out.push_back(write_layer(b, l));
  return b.CreateVector(out);
}

// A nested flatbuffer stored as a string whose bytes start 16-byte aligned (CreateString adds a
// NUL after them, so len + 1 bytes follow the length word).
Offset<flatbuffers::String> aligned_string(FlatBufferBuilder& b, const std::vector<uint8_t>& v) {
  b.ForceVectorAlignment(v.size() + 1, sizeof(uint8_t), 16);
  return b.CreateString(reinterpret_cast<const char*>(v.data()), v.size());
}

}  // namespace

Executable read_executable(std::span<const uint8_t> bytes) {
  const detail::AlignedBytes aligned(bytes);
  return read_verified_executable(*verified_root<dw::Executable>(bytes, aligned, "executable"));
}

std::vector<uint8_t> write_executable(const Executable& e) {
  FlatBufferBuilder b(1 << 16);
  const auto parameters = aligned_bytes(b, e.parameters);
  std::vector<Offset<dw::InstructionBitstream>> streams;
  for (const Bitstream& s : e.bitstreams) streams.push_back(write_bitstream(b, s));
  const auto streams_v = b.CreateVector(streams);
  std::vector<Offset<dw::DmaHint>> hints;
  for (const DmaHint& h : e.dma_hints.hints) hints.push_back(write_hint(b, h));
  const auto hints_t =
      dw::CreateDmaHints(b, b.CreateVector(hints), e.dma_hints.fully_deterministic);
  const auto inputs = write_layers(b, e.input_layers);
  const auto outputs = write_layers(b, e.output_layers);
  const auto name = b.CreateString(e.name);
  const auto chip = e.chip.empty() ? 0 : b.CreateString(e.chip);
  // Both cycle fields: the 32-bit one for old readers when it fits, the 64-bit one for new ones.
  const bool fits32 = e.estimated_cycles >= INT32_MIN && e.estimated_cycles <= INT32_MAX;
  const auto cycles32 = fits32 ? static_cast<int32_t>(e.estimated_cycles) : 0;
  b.Finish(dw::CreateExecutable(b, e.version, name, 0, e.batch_size, e.scratch_size_bytes,
                                streams_v, parameters, hints_t, inputs, outputs, chip, cycles32,
                                e.used_narrow_memory_bytes_per_tile,
                                static_cast<dw::ExecutableType>(e.type), e.parameter_caching_token,
                                e.use_tpu_dram_for_parameters, e.estimated_cycles));
  return std::vector<uint8_t>(b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize());
}

Package read_package(std::span<const uint8_t> bytes, std::vector<std::string>* warnings) {
  auto warn = [&](std::string message) {
    if (warnings != nullptr) warnings->push_back(std::move(message));
  };
  const detail::AlignedBytes aligned(bytes);
  const dw::Package* p = verified_root<dw::Package>(bytes, aligned, "package");
  // libedgetpu only warns about a wrong identifier; so do we (driver.md 5.1 step 3).
  if (!detail::has_identifier(bytes, dw::PackageIdentifier()))
    warn("package: identifier is not \"DWN1\"");
  Package out;
  out.min_runtime_version = p->min_runtime_version();
  if (out.min_runtime_version > kMaxRuntimeVersion)
    fail("package needs runtime version ", out.min_runtime_version, "; the newest known is ",
         kMaxRuntimeVersion);
  if (out.min_runtime_version <= 9)
    warn(cat("package: min_runtime_version ", out.min_runtime_version,
             " predates the oldest valid runtime (10)"));
  out.signature = to_bytes(p->signature());
  out.keypair_version = p->keypair_version();
  out.compiler_version = to_string(p->compiler_version());
  out.virtual_chip_id = p->virtual_chip_id();
  if (out.virtual_chip_id == -1) fail("package is a multi-chip package (virtual_chip_id -1)");
  out.model_identifier = to_string(p->model_identifier());
  if (p->multi_chip_package() != nullptr && p->multi_chip_package()->size() != 0)
    warn("package: multi_chip_package entries are ignored");
  const auto* multi = p->serialized_multi_executable();
  if (multi == nullptr || multi->size() == 0) fail("package has no executables");
  const std::span<const uint8_t> multi_bytes(multi->data(), multi->size());
  const detail::AlignedBytes multi_aligned(multi_bytes);
  const auto* m =
      verified_root<dw::MultiExecutable>(multi_bytes, multi_aligned, "multi executable");
  if (m->serialized_executables() == nullptr || m->serialized_executables()->size() == 0)
    fail("multi executable holds no executables");
  for (flatbuffers::uoffset_t i = 0; i < m->serialized_executables()->size(); ++i) {
    const flatbuffers::String* s = m->serialized_executables()->Get(i);
    const std::span<const uint8_t> e(reinterpret_cast<const uint8_t*>(s->data()), s->size());
    out.executables.push_back(
        with_context(cat("executable ", i), [&] { return read_executable(e); }));
  }
  return out;
}

std::vector<uint8_t> write_package(const Package& package) {
  if (package.executables.empty()) fail("cannot write a package without executables");
  std::vector<uint8_t> multi;
  {
    FlatBufferBuilder b(1 << 16);
    std::vector<Offset<flatbuffers::String>> executables;
    for (const Executable& e : package.executables)
      executables.push_back(aligned_string(b, write_executable(e)));
    b.Finish(dw::CreateMultiExecutable(b, b.CreateVector(executables)));
    multi.assign(b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize());
  }
  FlatBufferBuilder b(multi.size() + 4096);
  const auto multi_v = aligned_bytes(b, multi);
  const auto signature = vec_or_null(b, package.signature);
  const auto compiler = b.CreateString(package.compiler_version);
  const auto identifier = b.CreateString(package.model_identifier);
  b.Finish(
      dw::CreatePackage(b, package.min_runtime_version, multi_v, signature, package.keypair_version,
                        compiler, package.virtual_chip_id, 0, identifier),
      dw::PackageIdentifier());
  return std::vector<uint8_t>(b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize());
}

}  // namespace tinycoral::container
