// Shared program pieces of the code generators (program_parts.h).
#include "compiler/program_parts.h"

#include <charconv>

#include "common/error.h"
#include "compiler/fields.h"

namespace tinycoral::compiler {

void append_decimal(std::string& out, int64_t value) {
  char buf[24];
  const char* end = std::to_chars(buf, buf + sizeof buf, value).ptr;
  out.append(buf, static_cast<size_t>(end - buf));
}

void descriptor(Emitter& e, int lo, int hi, int base, int64_t size, int tag) {
  e.add("bundle", cat("s_op=0x0f s_x=", base, " imm=", lo));
  e.add("bundle", cat("s_op=0x0f s_x=", base + 1, " imm=", hi));
  e.add("bundle", cat("v_op=0x0a vs_reg=", base));
  e.add("bundle",
        cat("v_op=0x0a v_offset=1 vs_reg=", base + 1, " s_op=0x2f s_x=", base + 2, " imm=", size));
  e.add("bundle",
        cat("v_op=0x0a v_offset=2 vs_reg=", base + 2, " s_op=0x2f s_x=", base + 3, " imm=", tag));
  e.add("bundle", cat("v_op=0x0a v_offset=3 vs_reg=", base + 3));
  e.add("bundle", "v_op=0x0c");
}

void interrupt(Emitter& e, int lo, int hi, int base) {
  e.add("bundle", cat("s_op=0x2f s_x=", hi));
  e.add("bundle", cat("s_op=0x2f s_x=", lo));
  descriptor(e, lo, hi, base, 0, 4);
}

std::string Passes::fields() const {
  if (last == pass) return " count_neg=0x0";
  return cat(" count_m1=", last - 1, " tail_en=1 count_neg=", hex(pass - last));
}

Passes passes_of(int units, int pass) {
  Passes p;
  p.pass = pass;
  p.count = (units + pass - 1) / pass;
  p.last = units - pass * (p.count - 1);
  return p;
}

void tile_fence(Emitter& e, const std::string& fields) { e.add("sync", "tiles=0xffff " + fields); }
void wait_tokens(Emitter& e) { e.add("scsync", "tiles=0xffff tokwait=1 tmask=0xffff sunits=0x0c"); }

void program_start(Emitter& e) {
  tile_fence(e, "counters=0x7ffff units=0x3ff signal=1");
  e.add("scsync", "tiles=0xffff smask=0x1ff tokwait=1 tmask=0xffff sunits=0x1f");
  e.reloc_movi(1, container::BufferKind::kParameter, container::Half::kLower32);
  e.reloc_movi(0, container::BufferKind::kParameter, container::Half::kUpper32);
  e.reloc_movi(3, container::BufferKind::kScratch, container::Half::kLower32);
  e.reloc_movi(2, container::BufferKind::kScratch, container::Half::kUpper32);
  e.add("scsync", "smask=0x005 sunits=0x0c");
  tile_fence(e, "units=0x3ff signal=1");
  wait_tokens(e);
}

void input_address(Emitter& e, const std::string& name) {
  e.reloc_movi(10, container::BufferKind::kInput, container::Half::kUpper32, name);
  e.reloc_movi(11, container::BufferKind::kInput, container::Half::kLower32, name);
  e.add("scsync", "smask=0x004 value=0x1fff sunits=0x0c");
  e.add("scsync", "smask=0x001 sunits=0x0c");
}

void output_address(Emitter& e, const std::string& name) {
  e.reloc_movi(10, container::BufferKind::kOutput, container::Half::kUpper32, name);
  e.reloc_movi(11, container::BufferKind::kOutput, container::Half::kLower32, name);
  e.add("bundle", "s_op=0x0f s_x=5 imm=11");
  e.add("bundle", "s_op=0x0f s_x=4 imm=10");
}

namespace {
constexpr int kPacketBytes = 256;  // one ring packet
}  // namespace

void pop_more(Emitter& e, int64_t bytes) {
  const Passes passes = passes_of(static_cast<int>(bytes / 8), kActPassUnits);
  e.add("pop",
        cat("stream=1 walk=",
            nest({{1, kActPassUnits}, {1 - kActPassUnits, passes.count}, {1 - kActPassUnits, 1}}),
            " k121=1 k124=1 av140=1", passes.fields(), " k174=1 k178=1 k199=1 k215=1"));
}

void host_pop(Emitter& e, int64_t bytes) { host_pop(e, bytes, bytes); }

void host_pop(Emitter& e, int64_t bytes, int64_t first) {
  pop_more(e, first);
  e.add("bundle", "s_op=0x0f s_x=5 imm=11");
  e.add("bundle", "s_op=0x0f s_x=4 imm=10");
  descriptor(e, 5, 4, 6, bytes, 1);
}

void host_to_narrow(Emitter& e, uint32_t mask, int fifo, int n_addr, int bytes, int offset) {
  const int packets = (bytes + kPacketBytes - 1) / kPacketBytes;
  e.add("w2n", cat("tiles=", hex(mask), " w.addr=", hex(fifo), " w=(1 x ", packets,
                   ") n.addr=", hex(n_addr / 4), " n=", strided_walk({{1, bytes / 4}}, 6),
                   " n.lvl_mask=0x01 mode=1 fill_size=128 sync.en0=1 sync.id=14 "
                   "sync.wait_lvl=1 sync.en1=1 sync.val=0x08000 sync.en2=1 sync.dec_lvl=1 "
                   "sync.dec=-1 sync.dec_mode=3 tail_en870=1"));
  e.add("ringcons0",
        cat("tiles=", hex(mask), " addr=", hex(fifo), " dst=(1 x ", packets, ")(", 1 - packets,
            " x 1)(", 1 - packets, " x 1)(", 1 - packets, " x 1) sdims=1 cbuf=1 slots=", packets,
            " mode=3 s_id=0x2b s_val=", -64 * packets, " s_cnt=", packets, " s_en_b=1 s_y=1"));
  e.add("infeed",
        cat("stream=1", offset % kActPassUnits ? cat(" buf_off=", hex(offset % kActPassUnits)) : "",
            " walk=", nest({{1, kActPassUnits}, {1 - kActPassUnits, 1}, {1 - kActPassUnits, 1}}),
            " k157=1 k160=1 av176=1 count_m1=", bytes / 8 - 1, " tail_en=1 count_neg=",
            hex(kActPassUnits - bytes / 8), " f308=0x8 pop_wait=", hex((offset + 1) & 0xffff),
            " k336=1 f352=1 f391=2 dest=", hex(mask), " f434=0xf lanes_m1=3"));
}

std::string narrow_walk(int words) {
  std::string out;
  out.reserve(96);
  out += "(1 x ";
  append_decimal(out, words);
  out += ')';
  for (int k = 0; k < 5; ++k) {
    out += '(';
    append_decimal(out, -(words - 1));
    out += " x 1)";
  }
  return out;
}

std::string strided_walk(const std::vector<std::pair<int64_t, int64_t>>& stride_count, int levels,
                         std::string_view last_mode) {
  std::string out;
  out.reserve(static_cast<size_t>(levels) * 16 + last_mode.size());
  append_strided_walk(out, stride_count, levels, last_mode);
  return out;
}

void append_strided_walk(std::string& out,
                         const std::vector<std::pair<int64_t, int64_t>>& stride_count, int levels,
                         std::string_view last_mode) {
  int k = 0;
  for_each_walk_level(stride_count, levels, [&](int64_t inc, int64_t count) {
    out += '(';
    append_decimal(out, inc);
    out += " x ";
    append_decimal(out, count);
    if (++k == levels) out += last_mode;
    out += ')';
  });
}

std::string byte_walk(std::vector<std::pair<int64_t, int64_t>> stride_count, int mode7,
                      int* hmode) {
  while (stride_count.size() < 8) stride_count.push_back({0, 1});
  std::vector<int64_t> field(8), low(8);
  int64_t inner = 0;
  for (size_t k = 0; k < 8; ++k) {
    const int64_t inc = stride_count[k].first - inner;
    inner += stride_count[k].first * (stride_count[k].second - 1);
    field[k] = inc >= 0 ? inc / 4 : -((-inc + 3) / 4);
    low[k] = inc - 4 * field[k];
  }
  *hmode = static_cast<int>(low[0]);
  std::string s;
  for (size_t k = 0; k < 8; ++k) {
    const int64_t mode = k + 1 < 8 ? low[k + 1] : mode7;
    s += cat("(", field[k], " x ", stride_count[k].second, mode ? cat(" m", mode) : "", ")");
  }
  return s;
}

void ring_send(Emitter& e, int from, int row, uint32_t dest, int ordinal) {
  // r0.val is a signed 16-bit field: a program holding several layers (issue 14 D.2b) counts its
  // producers on from one ordinal.
  if (ordinal < 0 || ordinal > 32767)
    fail("ring producer ", ordinal, " of one program: the ordinal is a 16-bit signed field");
  Fields f(e);
  f("tiles=")
      .hex(tile_bit(from))(" addr=")
      .hex(static_cast<uint64_t>(row))(
          " src=(1 x 1) sdims=1 cbuf=1 slots=1 mode=3 pcfg=20 r0.id=0x51 r0.val=")
      .dec(ordinal)(" r0.en_a=1 r0.en_b=1 r1.id=0x2d r1.val=1 r1.en_a=1 r1.en_b=1 dest=")
      .hex(dest);
  e.add("ringprod", std::move(f).take());
}

void outfeed_to_scalar(Emitter& e, int rows) {
  e.add("outfeed", cat("walk=(1 x 64)(-63 x ", rows,
                       ")(-63 x 1) walk.inc3=2057 k173=1 k178=1 k182=1 k214=1 f222=0x3f"));
}

void rows_to_scalar(Emitter& e, int from, int unit, int rows, int pieces, int step) {
  e.add("ringprod", cat("tiles=", hex(tile_bit(from)), " addr=", hex(unit), " src=(1 x ", rows, ")",
                        pieces > 1 ? cat("(", step - rows + 1, " x ", pieces, ") sdims=3")
                                   : std::string(" sdims=1"),
                        " pcfg=4 dest=0x10000"));
}

void ring_receive(Emitter& e, uint32_t tiles, int row, int slots, int s_val) {
  e.add("ringcons0", cat("tiles=", hex(tiles), " addr=", hex(row), " dst=(1 x 1)",
                         slots > 1 ? " sdims=1" : "", " cbuf=1 slots=", slots,
                         " mode=3 s_id=0x2b s_val=", s_val, " s_cnt=", slots, " s_en_b=1 s_y=1"));
}

container::Layer boundary_layer(const std::string& name, int y, int x, int z, int32_t zp,
                                float scale, bool output, bool is_signed) {
  container::Layer l;
  l.name = name;
  l.size_bytes = y * x * z;
  l.y_dim = y;
  l.x_dim = x;
  l.z_dim = z;
  l.zero_point = zp;
  l.dequantization_factor = scale;
  l.data_type =
      is_signed ? container::DataType::kSignedFixedPoint8 : container::DataType::kFixedPoint8;
  l.is_output = output;
  return l;
}

container::Layer boundary_layer(const std::string& name, int size, int32_t zp, float scale,
                                bool output, bool is_signed) {
  return boundary_layer(name, 1, 1, size, zp, scale, output, is_signed);
}

container::DmaHint dma_hint(container::BufferKind kind, container::Direction dir,
                            const std::string& name, int size) {
  container::DmaHint h;
  h.kind = container::HintKind::kDma;
  h.direction = dir;
  h.meta.desc = kind;
  h.meta.name = name;
  h.size_in_bytes = size;
  return h;
}

container::DmaHint instruction_hint() {
  container::DmaHint h;
  h.kind = container::HintKind::kInstruction;
  return h;
}

container::DmaHint interrupt_hint() {
  container::DmaHint h;
  h.kind = container::HintKind::kInterrupt;
  h.direction = container::Direction::kOutfeed;
  return h;
}

container::Executable execution_executable(container::Bitstream program) {
  container::Executable eo;
  eo.name = "model";
  eo.chip = "beagle";
  eo.type = container::ExecutableType::kExecutionOnly;
  eo.bitstreams.push_back(std::move(program));
  return eo;
}

container::DmaHints execution_hints(const std::string& input, int in_bytes,
                                    const std::string& output, int out_bytes) {
  container::DmaHints h;
  h.fully_deterministic = true;
  h.hints = {
      instruction_hint(),
      dma_hint(container::BufferKind::kInput, container::Direction::kInfeed, input, in_bytes),
      dma_hint(container::BufferKind::kOutput, container::Direction::kOutfeed, output, out_bytes),
      interrupt_hint()};
  return h;
}

container::Executable caching_executable(container::Bitstream program,
                                         std::vector<uint8_t> parameters) {
  container::Executable pc;
  pc.name = "Unknown";
  pc.chip = "beagle";
  pc.type = container::ExecutableType::kParameterCaching;
  pc.bitstreams.push_back(std::move(program));
  pc.dma_hints.fully_deterministic = true;
  pc.dma_hints.hints = {instruction_hint(),
                        dma_hint(container::BufferKind::kParameter, container::Direction::kInfeed,
                                 "", static_cast<int>(parameters.size())),
                        interrupt_hint()};
  pc.parameters = std::move(parameters);
  return pc;
}

uint64_t caching_token(const std::vector<uint8_t>& parameters) {
  uint64_t h = 1469598103934665603ull;
  for (uint8_t b : parameters) h = (h ^ b) * 1099511628211ull;
  return h;
}

}  // namespace tinycoral::compiler
