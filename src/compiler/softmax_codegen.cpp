// edgetpu_compiler 16.0's SOFTMAX -> FULLY_CONNECTED x2 -> CONCATENATION program, rebuilt from N
// and the quantization (softmax_codegen.h). Addresses are named by what they hold; the counts and
// offsets are written from N, the tile count T and the piece P = 64 bytes per tile. The fields that
// are only reproduced (constant in both oracles, meaning unknown) are named in docs/compiler.md.
#include "compiler/softmax_codegen.h"

#include <algorithm>
#include <bit>

#include "common/error.h"
#include "compiler/conv_codegen.h"
#include "compiler/emitter.h"
#include "compiler/program_parts.h"

namespace tinycoral::compiler {

using container::BufferKind;
using container::Half;

namespace {

constexpr int kPacket = 64;          // bytes of the smallest piece (P on up to 4 tiles)
constexpr int kRingPacket = 256;     // bytes per ring packet
constexpr int kStagingUnits = 2048;  // the parameter staging buffer, in units
constexpr int kFcBase = 0x0c;        // wide unit of the last FULLY_CONNECTED's weights
constexpr int kConcatBase = 0x04;
// When the FULLY_CONNECTED weights do not all fit tile 0 below the FIFO of streamed weights, the
// later ones are cached on tiles 1, 2... and streamed into it (bright_64x64).
constexpr int kStreamFifo = 0x1f7c;
// A streamed piece's rows (4 units each, from unit 2) end below the wide rows every tile sends
// and receives through during the softmax (the wide gather's sender row 0x1fe8 and the FIFOs above
// it): at most 2040 rows, 8160 weights. More are cached on several tiles in even pieces.
constexpr int kPieceRows = 2040;
constexpr int kStreamSlots = 32;  // wide unit of the concat's identity rows (aux row below)
// Wide rows of the ring transfers: where each step's packets arrive and leave from.
constexpr int kScatterRow = 0x2060, kGatherRow = 0x2078;  // gathers send from row - 0x10
constexpr int kWideScatter = 0x2000;  // the input FIFOs when a tile holds more than 64 bytes
constexpr int kWideGather = 0x1ff8;   // the first gather's row then (below those FIFOs)
static_assert(2 + 4 * kPieceRows <= kWideGather - 0x10, "streamed pieces below the gather rows");
constexpr int kMaxFifo = 0x2060, kBcastRow = 0x2058, kBcastSend = 0x2048;
constexpr int kExpRow = 0x2074, kSumFifo = 0x205c;
constexpr int kRecipRow = 0x2054, kRecipSend = 0x2044;
// The exponential's input domain ends here (the spline table below starts at e^-13.04 ~ 2^-18.8).
constexpr float kExpClampMin = -13.0380983f;
// The probabilities' scale: e q 2^-23 with the TFLite softmax output (1/256, -128); the stored
// float is 2^-23 (1 + 343 2^-23), one of its last bits is not derived yet (docs/compiler.md).
constexpr uint32_t kProbMultBits = 0x34000157;
constexpr float kInv65535 = 1.0f / 65535.0f;  // 16-bit fixed point of the exponentials

// The NLU splines (8 segments of degree-4 polynomials with 7 breakpoints): 65535 e^x on
// [-13.04, 0] and 65535 / sqrt(2 m) on [1, 4). Fixed function tables, the same in every program.
constexpr const char* kExpSpline =
    "s0c0=1839.66748 s0c1=630.215393 s0c2=81.3430786 s0c3=4.68099403 s0c4=0.101207271 "
    "s1c0=13928.3516 s1c1=6826.62012 s1c2=1282.03638 s1c3=108.85453 s1c4=3.51319098 "
    "s2c0=33057.7422 s2c1=20768.0449 s2c2=5117.17383 s2c3=580.745972 s2c4=25.4208126 "
    "s3c0=50335.9375 s3c1=38372.7578 s3c2=11888.1973 s3c3=1745.71692 s3c4=101.057716 "
    "s4c0=60827.9688 s4c1=53701.1719 s4c2=20356.8887 s4c3=3842.90942 s4c4=297.45401 "
    "s5c0=64842.3398 s5c1=62677.5781 s5c2=27987.3242 s5c3=6766.2959 s5c4=723.300598 "
    "s6c0=65526.3789 s6c1=65428.2031 s6c2=32277.0332 s6c3=9857.56348 s6c4=1593.34106 "
    "s7c0=65535 s7c1=65534.9492 s7c2=32765.3086 s7c3=10888.1211 s7c4=2503.77417 "
    "b0=-7.9868722 b1=-5.4805069 b2=-3.93264985 b3=-2.69854259 b4=-1.75761902 b5=-0.916955292 "
    "b6=-0.174221501 mode=3";
constexpr const char* kRsqrtSpline =
    "s0c0=109663.406 s0c1=-135128.844 s0c2=112302.266 s0c3=-49342.207 s0c4=8845.37012 "
    "s1c0=99786.1562 s1c1=-101767.539 s1c2=69965.3516 s1c3=-25417.1699 s1c4=3765.479 "
    "s2c0=89722.9844 s2c1=-73979.2031 s2c2=41119.7656 s2c3=-12077.0869 s2c4=1446.51477 "
    "s3c0=80423.6406 s3c1=-53271.8633 s3c2=23783.623 s3c3=-5609.96387 s3c4=539.539124 "
    "s4c0=71984.5547 s4c1=-38202.6172 s4c2=13666.2998 s4c3=-2583.14282 s4c4=199.096802 "
    "s5c0=64750.5469 s5c1=-27807.2246 s5c2=8050.91211 s5c3=-1231.8031 s5c4=76.8642654 "
    "s6c0=59222.9492 s6c1=-21285.252 s6c2=5160.38721 s6c3=-661.508301 s6c4=34.6030922 "
    "s7c0=59222.9492 s7c1=-21285.252 s7c2=5160.38721 s7c3=-661.508301 s7c4=34.6030922 "
    "b0=1.17444921 b1=1.45270121 b2=1.79680347 b3=2.25042224 b4=2.79945827 b5=3.43747544 "
    "b6=inf mode=3";

// "(inc x count)" repeated: a level that rewinds what `count` steps of 1 advanced.
std::string rewind(int advanced, int levels, const std::string& last = "") {
  std::string s;
  for (int i = 0; i < levels; ++i)
    s += cat("(", -advanced, " x 1", i + 1 == levels ? last : "", ")");
  return s;
}
// An op's 8-level walk of `count` steps of 1 (then its rewinds): in/out/par forms.
std::string steps(int count, const std::string& last) {
  return cat("(1 x ", count, ")") + rewind(count - 1, 7, last);
}
std::string steps2(int count, const std::string& last) {  // the MAC ops' in: (1 x c)(1 x 1)(1 x 1)
  return cat("(1 x ", count, ")(1 x 1)(1 x 1)") + rewind(count - 1, 5, last);
}
std::string steps3(int count, const std::string& last) {  // in/out: (1 x c)(1 x 1)(1 x 1)...
  return cat("(1 x ", count, ")(1 x 1)(1 x 1)(1 x 1)") + rewind(count - 1, 4, last);
}

std::string repeat(const std::string& s, int times) {
  std::string out;
  for (int i = 0; i < times; ++i) out += s;
  return out;
}

// ringProducer with its second counter (`r1`): how many packets this producer has sent to the
// same destination in the current exchange.
void send(Emitter& e, int from, int row, uint32_t dest, int ordinal, int r1) {
  e.add("ringprod", cat("tiles=", hex(tile_bit(from)), " addr=", hex(row),
                        " src=(1 x 1) sdims=1 cbuf=1 slots=1 mode=3 pcfg=20 r0.id=0x51 r0.val=",
                        ordinal, " r0.en_a=1 r0.en_b=1 r1.id=0x2d r1.val=", r1,
                        " r1.en_a=1 r1.en_b=1 dest=", hex(dest)));
}

// One piece of a gather to tile 0: tile `from` sends `words` words at its narrow word `from_at`
// from row `row` - 0x10; tile 0 stores them at word `at` from row `row`. A piece is one ring
// packet of up to 256 bytes, or `packets` whole packets. The i-th piece of the exchange (i from
// 0) waits on 0x8000 + ceil(i packets / 2), with the enable bit when i packets is even, and its
// consumer's credit is words i - 64 (the FC broadcast's rule; docs/compiler.md).
void gather_piece(Emitter& e, int from, int row, int at, int from_at, int words, int i,
                  int& ordinal, int r1) {
  const int packets = std::max(1, 4 * words / kRingPacket);
  const bool en1 = i * packets % 2 == 0;
  const int sync_val = (i * packets + 1) / 2;
  const int credit = words * i - 64;
  const int send_row = row - 0x10;
  if (packets == 1) {
    e.add("w2n",
          cat("tiles=0x1 w.addr=", hex(row), " w=(1 x 1) w.circ=1 w.rows=1 n.addr=", hex(at),
              " n=", narrow_walk(words), " n.lvl_mask=0x01 sync.en0=1 sync.id=14 sync.wait_lvl=1",
              en1 ? " sync.en1=1" : "", " sync.val=", hex(0x8000 + sync_val),
              " sync.en2=1 tail_en870=1"));
    ring_receive(e, 1, row, 1, credit);
    send(e, from, send_row, 1, ordinal++, r1);
    e.add("n2w", cat("tiles=", hex(tile_bit(from)), " n.addr=", hex(from_at),
                     " n=", narrow_walk(words), " n.lvl_mask=0x01 w.addr=", hex(send_row),
                     " w=(1 x 1) w.circ=1 w.rows=1 sync.en0=1 sync.f1=1 sync.id=16 "
                     "sync.wait_lvl=1 sync.en1=1 sync.val=0x0ffff sync.en2=1 sync.f45=1 "
                     "tail_lvl=1"));
    return;
  }
  const std::string rows = cat("(0 x ", packets, ")");
  e.add("w2n", cat("tiles=0x1 w.addr=", hex(row), " w=", rows, " w.rows=1 n.addr=", hex(at),
                   " n=", narrow_walk(words), " n.lvl_mask=0x01 sync.en0=1 sync.id=14",
                   en1 ? " sync.en1=1" : "", " sync.val=", hex(0x8000 + sync_val),
                   " sync.en2=1 tail_en870=1"));
  e.add("ringcons0", cat("tiles=0x1 addr=", hex(row), " dst=", rows,
                         " slots=1 mode=1 s_id=0x0b s_val=", credit, " s_cnt=1 s_en_b=1 s_y=1"));
  e.add("ringprod",
        cat("tiles=", hex(tile_bit(from)), " addr=", hex(send_row), " src=(1 x 1)", rows,
            " sdims=1 cbuf=1 slots=1 mode=3 pcfg=20 r0.id=0x51 r0.val=", ordinal++,
            " r0.en_a=1 r0.en_b=1 r1.id=0x2d r1.val=", r1, " r1.en_a=1 r1.en_b=1 dest=0x1"));
  e.add("n2w", cat("tiles=", hex(tile_bit(from)), " n.addr=", hex(from_at), " n=",
                   narrow_walk(words), " n.lvl_mask=0x01 w.addr=", hex(send_row), " w=", rows,
                   " w.rows=1 sync.en0=1 sync.id=16 sync.en1=1 sync.val=0x0ffff sync.en2=1 "
                   "sync.f45=1 tail_lvl=1"));
}

// A tile's narrowToWide of `words` words at narrow word `at` into its send row.
void send_piece(Emitter& e, uint32_t tiles, int at, int words, int row, bool en1, int sync_val) {
  e.add("n2w", cat("tiles=", hex(tiles), " n.addr=", hex(at), " n=", narrow_walk(words),
                   " n.lvl_mask=0x01 w.addr=", hex(row),
                   " w=(1 x 1) w.circ=1 w.rows=1 sync.en0=1 sync.f1=1 sync.id=16 sync.wait_lvl=1",
                   en1 ? " sync.en1=1" : "", " sync.val=", hex(sync_val),
                   " sync.en2=1 sync.f45=1 tail_lvl=1"));
}

// Tile 0 sends `words` words at narrow word `at` to every other tile, which stores them at the
// same word (the maximum, the reciprocal). Tile t's packet is the exchange's t-th.
void broadcast(Emitter& e, int tiles, int at, int words, int recv_row, int send_row, int& ordinal,
               bool f1) {
  for (int t = 1; t < tiles; ++t) {
    e.add("w2n", cat("tiles=", hex(tile_bit(t)), " w.addr=", hex(recv_row),
                     " w=(1 x 1) w.circ=1 w.rows=1 n.addr=", hex(at),
                     " n=", words == 1 ? std::string("(1 x 1)") : narrow_walk(words),
                     words == 1 ? "" : " n.lvl_mask=0x01", " sync.en0=1", f1 ? " sync.f1=1" : "",
                     " sync.id=14 sync.wait_lvl=1 sync.en1=1 sync.val=0x08000 sync.en2=1 "
                     "tail_en870=1"));
    ring_receive(e, tile_bit(t), recv_row, 1, -64);
    send(e, 0, send_row, tile_bit(t), ordinal++, t);
    const bool en1 = t == 1 || t % 2 == 1;
    const int val = t == 1 ? 0xffff : 0x8000 + (t - 2) / 2;
    if (words == 1) {
      e.add("n2w", cat("tiles=0x1 n.addr=", hex(at), " n=(1 x 1) w.addr=", hex(send_row),
                       " w=(1 x 1) w.circ=1 w.rows=1 sync.en0=1 sync.f1=1 sync.id=16 "
                       "sync.wait_lvl=1",
                       en1 ? " sync.en1=1" : "", " sync.val=", hex(val),
                       " sync.en2=1 sync.f45=1 tail_lvl=1"));
    } else {
      send_piece(e, 1, at, words, send_row, en1, val);
    }
  }
}

void sync_block(Emitter& e) {
  tile_fence(e, "units=0x3c6 signal=1");
  e.add("scsync", "tiles=0xffff tokwait=1 tmask=0xffff");
}

struct Geometry {
  int n = 0;      // positions
  int tiles = 0;  // T = min(16, N / 64)
  int p = 0;      // P = N / T bytes per tile
  // Where each FULLY_CONNECTED's weights are cached: one piece on tile 0 (read in place), or
  // pieces of at most kPieceRows rows on other tiles, streamed one after another.
  struct Piece {
    int tile = 0, base = 0, rows = 0;
  };
  std::vector<std::vector<Piece>> fc_pieces;
  bool streamed(size_t i) const { return fc_pieces[i].front().tile != 0; }
  bool wide = false;  // P > 64: the input in rows of 4 tiles, the first gather below them
  int gather_row = kGatherRow;
  uint32_t mask = 0;
  int units = 0;  // parameter units
  // After a CONV_2D chain in the same program (emit_conv_head): the input comes back from the
  // host's scratch buffer, and the parameters follow the chain's `param_bytes` in the stream.
  bool after_chain = false;
  std::vector<ConvHead::Band> bands;  // not empty: the chain's bands stay on the chip (on_chip)
  int64_t param_bytes = 0;
  int tile0_base = 0;  // wide units of tile 0 below the softmax's own (the chain's parameters)
};

// Whether every tile's piece (P bytes at its narrow byte P t) can come from the chain's bands over
// the ring, one packet a tile: each piece inside one band, and no band tile's piece over its band.
bool pieces_from_bands_fit(const Geometry& g, const ConvHead& head) {
  if (g.p > kRingPacket || g.p % 4 != 0) return false;
  for (int t = 0; t < g.tiles; ++t) {
    const int at = g.p * t;
    const bool inside = std::any_of(head.bands.begin(), head.bands.end(), [&](const auto& b) {
      return at >= b.first && at + g.p <= b.first + b.bytes && b.base % 4 == 0 &&
             (b.base + at - b.first) % 4 == 0;
    });
    if (!inside) return false;
  }
  for (const ConvHead::Band& b : head.bands)
    if (b.tile < g.tiles && g.p * b.tile < b.base + b.bytes && b.base < g.p * (b.tile + 1))
      return false;
  return true;
}

// The chain's output from its band tiles into every tile's piece (tile t's P bytes at its narrow
// word w t, where the host's image would have put them), one ring packet each: the on-chip
// hand-over in place of the host's scratch round trip. A band tile's k-th packet waits on its
// send row as tile 0's broadcast does.
void pieces_from_bands(Emitter& e, const Geometry& g, int& ordinal) {
  const int w = g.p / 4;
  std::vector<int> sent(16, 0);
  for (int t = 0; t < g.tiles; ++t) {
    const int at = g.p * t;
    const auto band = std::find_if(g.bands.begin(), g.bands.end(), [&](const auto& b) {
      return at >= b.first && at + g.p <= b.first + b.bytes;
    });
    if (band == g.bands.end())  // (pieces_from_bands_fit decides; this says if they disagree)
      fail("softmax: no band of the chain holds tile ", t, "'s piece at byte ", at);
    const int k = sent[static_cast<size_t>(band->tile)]++;
    e.add("w2n", cat("tiles=", hex(tile_bit(t)), " w.addr=", hex(kBcastRow),
                     " w=(1 x 1) w.circ=1 w.rows=1 n.addr=", hex(w * t), " n=", narrow_walk(w),
                     " n.lvl_mask=0x01 sync.en0=1 sync.id=14 sync.wait_lvl=1 sync.en1=1 "
                     "sync.val=0x08000 sync.en2=1 tail_en870=1"));
    ring_receive(e, tile_bit(t), kBcastRow, 1, -64);
    send(e, band->tile, kBcastSend, tile_bit(t), ordinal++, k + 1);
    send_piece(e, tile_bit(band->tile), (band->base + at - band->first) / 4, w, kBcastSend,
               k % 2 == 0, k == 0 ? 0xffff : 0x8000 + (k - 1) / 2);
  }
}

void emit_execution(Emitter& e, const Geometry& g, const SoftmaxFcLayer& l) {
  const int n = g.n, t_count = g.tiles, p = g.p, w = g.p / 4;
  int ordinal = 0;  // ring producers of the softmax part
  if (!g.bands.empty()) {
    pieces_from_bands(e, g, ordinal);
  } else if (g.after_chain) {  // the chain's bytes back from scratch, as the image would come
    e.reloc_movi(10, BufferKind::kScratch, Half::kUpper32);
    e.reloc_movi(11, BufferKind::kScratch, Half::kLower32);
  } else {
    program_start(e);
    tile_fence(e, "units=0x020");
    input_address(e, l.input_name);
  }

  if (g.bands.empty()) {
    // The input: N bytes from the host, one 64-byte piece per tile (tile t keeps it at word 16t,
    // where tile 0 gathers all pieces).
    const int in_units = n / 8;
    host_pop(e, n);
    const auto infeed = [&](uint32_t tiles, int row, int units) {
      e.add("infeed",
            cat("stream=1", row ? cat(" buf_off=", hex(row * units)) : "", " walk=",
                nest({{1, kActPassUnits}, {1 - kActPassUnits, 1}, {1 - kActPassUnits, 1}}),
                " k157=1 k160=1 av176=1 count_m1=", units - 1, " tail_en=1 count_neg=",
                hex(kActPassUnits - units), " f308=0x8 pop_wait=", hex(row * units + 1),
                " k336=1 f352=1 f391=2 dest=", hex(tiles), " f434=0xf lanes_m1=3"));
    };
    if (!g.wide) {
      // One 256-byte packet per row of up to 4 tiles: lane l = t mod 4 skips the 16l words before
      // its piece (rows after the first: a hypothesis, no oracle has more than 4 such tiles).
      for (int t = 0; t < t_count; ++t) {
        const int lane = t % 4;
        const std::string skip = lane == 0 ? ""
                                           : cat(" skip_en0=1 f543=1 skip_m1=", w * lane - 1,
                                                 " skip_end=", hex(w * lane - 1));
        e.add("w2n", cat("tiles=", hex(tile_bit(t)), " w.addr=", hex(kScatterRow),
                         " w=(1 x 1) n.addr=", hex(w * t), " n=", narrow_walk(w),
                         " n.lvl_mask=0x01 mode=1 fill_size=128", skip,
                         " sync.en0=1 sync.id=14 sync.wait_lvl=1 sync.en1=1 sync.val=0x08000 "
                         "sync.en2=1 sync.dec_lvl=1 sync.dec=-1 sync.dec_mode=3 ",
                         lane == 0 ? "tail_en870=1" : "tail_f871=1"));
      }
      for (int row = 0; row * 4 < t_count; ++row) {
        const uint32_t tiles = g.mask & (0xfu << (4 * row));
        ring_receive(e, tiles, kScatterRow, 1, -64);
        infeed(tiles, row, std::min(in_units, kRingPacket / 8));
      }
    } else {
      // Rows of 4 tiles: the row's packets land in consecutive FIFO rows from 0x2000; lane l reads
      // the rows holding its bytes l P .. l P + P - 1 (row l P / 256, its P / 256 rows or one),
      // skipping the words before them (bright_64x64: row l, no skip; P = 128, 512: hypotheses).
      for (int t = 0; t < t_count; ++t) {
        const int first = (t % 4) * p;
        const int skip = first % kRingPacket / 4;
        const std::string skip_fields =
            skip ? cat(" skip_en0=1 f543=1 skip_m1=", skip - 1, " skip_end=", hex(skip - 1)) : "";
        e.add("w2n",
              cat("tiles=", hex(tile_bit(t)),
                  " w.addr=", hex(kWideScatter + 4 * (first / kRingPacket)), " w=(1 x ",
                  std::max(1, p / kRingPacket), ") n.addr=", hex(w * t), " n=", narrow_walk(w),
                  " n.lvl_mask=0x01 mode=1 fill_size=128", skip_fields,
                  " sync.en0=1 sync.id=14 sync.wait_lvl=1 sync.en1=1 sync.val=0x08000 sync.en2=1 "
                  "sync.dec_lvl=1 sync.dec=-1 sync.dec_mode=3 ",
                  skip ? "tail_f871=1" : "tail_en870=1"));
      }
      // The row's 4P bytes are 4P / 256 ring packets walked through 4P / 64 slots: the walk's
      // short last pass leaves out the slots beyond the packets (gstride = 4 (slots - packets) + 1,
      // docs/chip.md), `grp` = packets - 1.
      const int slots = 4 * p / kPacket;
      const int packets = 4 * p / kRingPacket;
      for (int row = 0; row < t_count / 4; ++row) {
        e.add("ringcons0",
              cat("tiles=", hex(0xfu << (4 * row)), " addr=", hex(kWideScatter), " dst=(1 x ",
                  slots, ")", rewind(slots - 1, 3), " sdims=1 cbuf=1 slots=", slots,
                  " grp=", packets - 1, " gstride=", 4 * (slots - packets) + 1,
                  " mode=3 s_id=0x2b s_val=", -64 * slots, " s_cnt=", slots, " s_en_b=1 s_y=1"));
        infeed(0xfu << (4 * row), row, 4 * p / 8);
      }
    }
  }  // (else the pieces came from the chain's bands above)
  tile_fence(e, "units=0x3ff");
  tile_fence(e, "counters=0x1ffff units=0x3ff");
  tile_fence(e, "units=0x3ff");

  // Gather the pieces on tile 0 (tile t's at word 16t).
  for (int t = 1; t < t_count; ++t) {
    gather_piece(e, t, g.gather_row, w * t, w * t, w, t - 1, ordinal, 1);
  }
  sync_block(e);
  tile_fence(e, "counters=0x1ffff units=0x3ff");

  // The maximum (docs/chip_ops.md 6.1): one word per FIFO step into 4 rows, the per-lane
  // maximum at byte N, then the maximum of the 4 lanes at byte 2N.
  const int q = n / 4;  // words of the input
  e.add("n2w", cat("tiles=0x1 n=", narrow_walk(q), " n.lvl_mask=0x01 w.addr=", hex(kMaxFifo),
                   " w=(1 x 4)(-3 x ", n / 16,
                   ")(-3 x 1)(-3 x 1) w.lvl_mask=0x1 w.circ=1 w.rows=4 sync.en0=1 sync.f1=1 "
                   "sync.id=1 sync.wait_lvl=1 sync.en1=1 sync.val=0x0ffff sync.en2=1 sync.f45=1 "
                   "transpose=1"));
  const std::string max_tail =
      cat(" dp_mode=1 reduce_mask=0x03 out_ch_last=3 out_ch=3 mult=1 clamp_max=",
          f32_bits(l.byte_clamp_max));
  e.add("pool",
        cat("tiles=0x1 loops=(4)(", n / 16, ") out.base=", hex(n),
            " out=(1 x 1)(1 x 1)(1 x 1)(1 x 1)(0 x 1)(0 x 1)(0 x 1)(0 x 1 m3) out.tflags=0x3 "
            "par.base=0x60 par.sel=1 par=(1 x 4)(-3 x ",
            n / 16, ")", rewind(3, 6, " m1"), " par.tflags=0x40 par.fifo=0x4 psum=(0 x ", q,
            ") psum.tflags=0x0840 cfg0=0x060 cfg1=0x12d sync0=0x4000 sync1=0x4000 "
            "cfg2=0x06",
            max_tail));
  tile_fence(e, "units=0x001");
  e.add("n2w", cat("tiles=0x1 n.addr=", hex(q), " n=(1 x 1) w.addr=", hex(kMaxFifo),
                   " w=(1 x 1) w.circ=1 w.rows=1 sync.en0=1 sync.f1=1 sync.id=1 sync.wait_lvl=1 "
                   "sync.val=",
                   hex(0x8000 + n / 32), " sync.en2=1 sync.f45=1 tail_lvl=1"));
  e.add("pool",
        cat("tiles=0x1 loops=(4) out.base=", hex(2 * n),
            " out=(1 x 1)(1 x 1)(1 x 1)(1 x 1)(0 x 1)(0 x 1)(0 x 1)(0 x 1 m3) out.tflags=0x3 "
            "par.base=0x60 par.sel=1 par.hmode=1 par=(0 x 4 m1)",
            repeat("(-1 x 1 m1)", 7),
            " par.tflags=0x40 par.fifo=0x1 psum=(0 x 4) psum.tflags=0x0840 cfg0=0x060 "
            "cfg1=0x12d sync0=",
            hex(0x4000 + n / 64), " sync1=0x4000 cfg2=0x06", max_tail));
  tile_fence(e, "counters=0x1ffff units=0x3ff");
  tile_fence(e, "units=0x3ff");
  broadcast(e, t_count, n / 2, 1, kBcastRow, kBcastSend, ordinal, true);
  sync_block(e);
  tile_fence(e, "counters=0x1ffff units=0x3ff");
  tile_fence(e, "counters=0x1ffff units=0x3ff");

  // x - m + 255 on every tile (docs/chip_ops.md 6.2): m replicated into N/4 words at byte N,
  // the shift constant -m into the bias store, then the subtraction into byte 4N.
  const int scratch = 4 * n + 2 * p;  // the mesh rows of the 16-bit weight pairs
  e.add("mesh_n", cat("tiles=0xffff i.addr=", hex(2 * n + 4),
                      " i=(1 x 4)(-3 x 1)(-3 x 1)(-3 x 1) i.sdims=1 in_mode=3 fill_en=1 fill=0x1"));
  e.add("n2w", cat("tiles=0xffff n.addr=", hex(n / 2 + 1), " n=", narrow_walk(4),
                   " n.lvl_mask=0x01 w.addr=0x2064 w=(1 x 1) sync.id=5 sync.wait_lvl=1 sync.en1=1 "
                   "sync.en2=1 tail_lvl=1"));
  tile_fence(e, "units=0x3ff");
  e.add("op", cat("tiles=", hex(g.mask), " loops=(1)(", q, ") in.base=", hex(2 * n),
                  " in=(1 x 1)(0 x ", q,
                  ")(1 x 1)(0 x 1)(1 x 1)(0 x 1)(1 x 1)(0 x 1 m1) in.tflags=0x15 "
                  "out.base=",
                  hex(n), " out=", steps3(q, " m3"),
                  " out.tflags=0x3 par.base=0x64 par.sel=1 par=(1 x 1)(0 x ", q,
                  ")(0 x 1)(0 x 1)(0 x 1)(0 x 1)(0 x 1)(0 x 1 m1) psum=(0 x ", q,
                  ") psum.last=0x4 cfg2=0x06 out_ch_last=3 out_ch=3 mult=1 clamp_max=inf "
                  "clamp_min=-inf"));
  tile_fence(e, "counters=0x1ffff units=0x3ff");
  e.add("mesh_n", cat("tiles=0xffff i.addr=", hex(scratch),
                      " i=(1 x 8)(-7 x 1)(-7 x 1)(-7 x 1) i.sdims=1 in_mode=3 fill_en=1"));
  const std::string pairs_relay =
      cat(" n.addr=", hex(scratch / 4),
          " n=(1 x 4)(1 x 2)(-7 x 1)(-7 x 1)(-7 x 1)(-7 x 1) n.lvl_mask=0x03 w.addr=0x2078 "
          "w=(1 x 2)(-1 x 1)(-1 x 1)(-1 x 1) w.lvl_mask=0x1");
  e.add("n2w", cat("tiles=", hex(g.mask), pairs_relay,
                   " sync.id=5 sync.wait_lvl=2 sync.en1=1 sync.en2=1 tail_lvl=1"));
  tile_fence(e, "units=0x3ff");
  e.add("op", cat("tiles=", hex(g.mask), " in.base=", hex(n), " in.hmode=1 in=(0 x 1)(0 x 1)(", q,
                  " x 1)(0 x 1)(0 x 1)(0 x 1)(0 x 1)(0 x 1 m1) in.tflags=0x01 out.base=",
                  hex(4 * n + p), " out.hmode=1 out=(0 x 1)(0 x 1)(", w,
                  " x 1) out.tflags=0x1 par.base=0x78 par.sel=1 par.hmode=1 psum.base=0x6c "
                  "psum.sel=1 psum.hmode=1 cfg2=0x12 cfg3=6 w_zp=1 out_ch_last=3 out_ch=3 mult=1 "
                  "clamp_min=",
                  f32_bits(l.shift_clamp_min), " out_zp=255"));
  tile_fence(e, "counters=0x00002 units=0x3ff");
  tile_fence(e, "units=0x3ff");
  // The 16-bit weight pairs (2,1),(1,2),(1,1),(1,1) / (1,1),(1,1),(2,1),(1,2) by mesh fills.
  e.add("mesh_n",
        cat("tiles=0xffff i.addr=", hex(scratch), " i=(1 x 1) in_mode=3 fill_en=1 fill=0x10002"));
  e.add("mesh_e", cat("tiles=0xffff i.addr=", hex(scratch + 4),
                      " i=(1 x 1) in_mode=3 fill_en=1 fill=0x20001"));
  e.add("mesh_w",
        cat("tiles=0xffff i.addr=", hex(scratch + 8),
            " i=(1 x 4)(-3 x 1)(-3 x 1)(-3 x 1) i.sdims=1 in_mode=3 fill_en=1 fill=0x10001"));
  e.add("mesh_s", cat("tiles=0xffff i.addr=", hex(scratch + 0x18),
                      " i=(1 x 1) in_mode=3 fill_en=1 fill=0x10002"));
  e.add("mesh_n", cat("tiles=0xffff i.addr=", hex(scratch + 0x1c),
                      " i=(1 x 1) in_mode=3 fill_en=1 fill=0x20001"));
  e.add("n2w", cat("tiles=", hex(g.mask), pairs_relay,
                   " sync.en0=1 sync.f1=1 sync.id=3 sync.wait_lvl=2 sync.en1=1 sync.val=0x08000 "
                   "sync.en2=1 x589=0x0005190001000345 x653=0x1000100014440004 tail_lvl=1"));
  e.add("w2n", cat("tiles=", hex(g.mask),
                   " w.addr=0x206c w=(1 x 1)(0 x 2)(1 x 1) w.lvl_mask=0x5 n.addr=0x40 "
                   "n=(1 x 32)(-31 x 2)(-31 x 1)(-31 x 1)(-31 x 1)(-31 x 1) n.lvl_mask=0x01 mode=1 "
                   "fill_size=64 sync.en0=1 sync.f2=1 sync.wait_lvl=2 sync.val=0x08000 sync.en2=1 "
                   "sync.f45=1 tail_f867=1 tail_en870=1"));
  for (int t = 0; t < t_count; ++t) {
    e.add("op", cat("tiles=", hex(tile_bit(t)), " loops=(2)(", w, ")",
                    t ? cat(" in.base=", hex(p * t)) : "", " in.hmode=2 in=(0 x ", 2 * w, " m2)",
                    repeat(cat("(", (t_count - 1) * w, " x 1 m2)"), 3),
                    repeat(cat("(", -w, " x 1 m2)"), 3), "(", -w,
                    " x 1 m3) in.tflags=0x03 out.base=", hex(4 * n), " out=", steps3(w, " m3"),
                    " out.tflags=0x3 par.base=0x78 par.sel=1 par=(1 x 2)(-1 x ", w, ")",
                    rewind(1, 6, " m1"), " psum=(0 x 2)(0 x ", w,
                    ") psum.tflags=0x0840 cfg0=0x007 cfg1=0x14d sync0=0x4000 sync1=0x4000 "
                    "sync2=0x00a6 sync3=0x0080 sync4=0x0080 cfg2=0x16 w_zp=1 dp_mode=1 "
                    "reduce_mask=0x01 out_ch_last=3 out_ch=3 mult=1 clamp_min=",
                    f32_bits(l.shift_clamp_min),
                    " out_zp=255 "
                    "cfg4=1"));
  }
  tile_fence(e, "counters=0x1ffff units=0x3ff");
  tile_fence(e, "counters=0x1ffff units=0x3ff");
  tile_fence(e, "counters=0x1ffff units=0x3ff");

  // The exponentials: the identity row at 0x207c, the spline, 65535 e^(s (x - m)) as 16-bit
  // values, two words per input word, tile t's at byte 2P t.
  for (int b = 0; b < 4; ++b) {
    e.add("mesh_n", cat("tiles=0xffff i.addr=", hex(2 * n + 4 * b), " i=(1 x 1)",
                        b == 3 ? " in_mode=3" : "", " fill_en=1 fill=", hex(1u << (8 * b))));
  }
  e.add("n2w", cat("tiles=0xffff n.addr=", hex(n / 2), " n=", narrow_walk(4),
                   " n.lvl_mask=0x01 w.addr=0x207c w=(1 x 1) sync.en0=1 sync.f1=1 sync.id=5 "
                   "sync.wait_lvl=1 sync.en1=1 sync.en2=1 tail_lvl=1"));
  tile_fence(e, "counters=0x00007 units=0x001");
  e.add("nlu", cat("tiles=", hex(g.mask), " ", kExpSpline));
  for (int t = 0; t < t_count; ++t) {
    e.add("op", cat("tiles=", hex(tile_bit(t)), " loops=(", w, ") in.base=", hex(4 * n),
                    " in=(1 x 1)(", w, " x 1)(1 x ", w, ")", rewind(w - 1, 5, " m3"),
                    " in.tflags=0x01", t ? cat(" out.base=", hex(2 * p * t)) : "", " out=(1 x 2)(",
                    n / 2 - 1, " x 1)(1 x ", w, ")", rewind(2 * w - 1, 5, " m3"),
                    " out.tflags=0x1 par.base=0x7c par.sel=1 par=(0 x ", w, ") psum=(0 x ", w,
                    ") psum.tflags=0x0800 cfg0=0x025 cfg1=0x12d sync0=0x4000 sync1=0x4000 "
                    "cfg2=0x06 in_zp=255 out_ch_last=3 out_ch=3 nlu_mode=5 mult=",
                    f32_bits(l.exp_mult), " clamp_min=", f32_bits(kExpClampMin)));
  }
  tile_fence(e, "units=0x3ff");
  for (int t = 1; t < t_count; ++t) {
    gather_piece(e, t, kExpRow, 2 * w * t, 2 * w * t, 2 * w, t - 1, ordinal, 2);
  }
  sync_block(e);
  tile_fence(e, "counters=0x1ffff units=0x3ff");
  tile_fence(e, "counters=0x1ffff units=0x3ff");
  tile_fence(e, "counters=0x00007 units=0x001");

  // Sum and reciprocal on tile 0: S, r = 65535 / sqrt(2 S 2^-16) by the spline, r^2 2^-16,
  // packed into one word (docs/chip_ops.md 6.2).
  const int h = n / 2;  // words of exponentials
  e.add("nlu", cat("tiles=0x1 ", kRsqrtSpline));
  e.add("n2w", cat("tiles=0x1 n=", narrow_walk(h), " n.lvl_mask=0x01 w.addr=", hex(kSumFifo),
                   " w=(1 x 4)(-3 x ", n / 8,
                   ")(-3 x 1)(-3 x 1) w.lvl_mask=0x1 w.circ=1 w.rows=4 sync.en0=1 sync.f1=1 "
                   "sync.id=1 sync.wait_lvl=1 sync.en1=1 sync.val=0x0ffff sync.en2=1 sync.f45=1"));
  e.add("reduce", cat("tiles=0x1 loops=(4)(", n / 8, ") out.base=", hex(4 * n),
                      " out=(1 x 2)(1 x 1)(1 x 1)(1 x 1)", rewind(1, 4, " m3"),
                      " out.tflags=0x3 par.base=0x5c par.sel=1 par=(1 x 4)(-3 x ", n / 8, ")",
                      rewind(3, 6, " m1"), " par.tflags=0x40 par.fifo=0x4 psum=(0 x ", h,
                      ") psum.tflags=0x0840 cfg0=0x060 cfg1=0x12d sync0=0x4000 sync1=0x4000 "
                      "cfg2=0x16 dp_mode=1 reduce_mask=0x03 out_ch_last=3 out_ch=3 nlu_mode=7 "
                      "mult=",
                      f32_bits(kInv65535), " clamp_max=inf clamp_min=-inf"));
  for (int i = 0; i < 3; ++i) tile_fence(e, "counters=0x1ffff units=0x3ff");
  e.add("op", cat("tiles=0x1 loops=(2)(2) in.base=", hex(4 * n),
                  " in.hmode=2 in=(0 x 4 m2)(0 x 1 m2)(0 x 1 m2)(0 x 1 m2)(-2 x 1 m2)(-2 x 1 m2)"
                  "(-2 x 1 m2)(-2 x 1 m3) in.tflags=0x03 out.base=",
                  hex(2 * n),
                  " out=(1 x 2)(0 x 4)(0 x 1)(0 x 1)(0 x 1)(-4 x 1)(-4 x 1)(-4 x 1 m3) "
                  "out.tflags=0x7 par.base=0x5c par.sel=1 par.hmode=2 par=(0 x 2 m2)(-1 x 2 m2)",
                  repeat("(-1 x 1 m2)", 5),
                  "(-1 x 1 m1) par.tflags=0x40 par.fifo=0x1 psum.hmode=1 psum=(0 x 1)(0 x 4)",
                  repeat("(0 x 1)", 5),
                  "(0 x 1 m1) psum.tflags=0x0840 cfg0=0x060 cfg1=0x12d sync0=0x4000 sync1=0x4000 "
                  "cfg2=0x1e dp_mode=4 out_ch_last=3 out_ch=3 nlu_mode=4 mult=",
                  f32_bits(kInv65535), " clamp_max=32768"));
  e.add("n2w", cat("tiles=0x1 n.addr=", hex(n), " n=", narrow_walk(2),
                   " n.lvl_mask=0x01 w.addr=", hex(kSumFifo),
                   " w=(0 x 2) w.rows=1 sync.en0=1 sync.id=1 sync.en1=1 sync.val=0x0ffff "
                   "sync.en2=1 sync.f45=1"));
  tile_fence(e, "units=0x020");
  e.add("op", cat("tiles=0x1 loops=(4) in.base=", hex(2 * n), " in=", steps3(4, " m3"),
                  " in.tflags=0x03 out.base=", hex(4 * n), " out=", steps3(2, " m3"),
                  " out.tflags=0x3 par.base=0x7c par.sel=1 par.hmode=1 par=(0 x 4 m1)",
                  repeat("(-1 x 1 m1)", 7),
                  " par.tflags=0x40 psum=(0 x 4) psum.tflags=0x0840 cfg2=0x0e cfg3=6 dp_mode=2 "
                  "out_ch_last=3 out_ch=3 nlu_mode=4 mult=1 clamp_max=inf clamp_min=-inf"));
  tile_fence(e, "counters=0x02000 units=0x3ff");
  tile_fence(e, "counters=0x00002 units=0x3ff");
  tile_fence(e, "counters=0x1ffff units=0x3ff");
  tile_fence(e, "units=0x3ff");
  broadcast(e, t_count, n, 2, kRecipRow, kRecipSend, ordinal, false);
  sync_block(e);
  tile_fence(e, "counters=0x1ffff units=0x3ff");
  tile_fence(e, "counters=0x1ffff units=0x3ff");

  // The probabilities: the reciprocal copied into both halves of N/2 words, the exponentials
  // transposed in 16-bit pairs, e q 2^-23 per position at byte 4N + 4P + 4.
  e.add("mesh_n", cat("tiles=0xffff i.addr=", hex(4 * n + 8),
                      " i=(2 x 2)(-2 x 1)(-2 x 1)(-2 x 1) i.sdims=1 fill_en=1 fill=0x1"));
  e.add("mesh_n",
        cat("tiles=0xffff i.addr=", hex(4 * n + 12),
            " i=(2 x 2)(-2 x 1)(-2 x 1)(-2 x 1) i.sdims=1 in_mode=3 fill_en=1 fill=0x100"));
  e.add("n2w", cat("tiles=0xffff n.addr=", hex(n + 2), " n=", narrow_walk(4),
                   " n.lvl_mask=0x01 w.addr=0x2060 w=(1 x 1) sync.id=5 sync.wait_lvl=1 sync.en1=1 "
                   "sync.en2=1 tail_lvl=1"));
  tile_fence(e, "units=0x3ff");
  e.add("op", cat("tiles=", hex(g.mask), " loops=(1)(", h, ") in.base=", hex(4 * n),
                  " in=(1 x 1)(0 x ", h,
                  ")(2 x 1)(0 x 1)(2 x 1)(0 x 1)(2 x 1)(0 x 1 m1) "
                  "in.tflags=0x15 out.base=",
                  hex(2 * n), " out=", steps3(h, " m3"),
                  " out.tflags=0x3 par.base=0x60 par.sel=1 par=(1 x 1)(0 x ", h,
                  ")(0 x 1)(0 x 1)(0 x 1)(0 x 1)(0 x 1)(0 x 1 m1) psum=(0 x ", h,
                  ") psum.last=0x4 cfg2=0x06 out_ch_last=3 out_ch=3 mult=1 clamp_max=inf "
                  "clamp_min=-inf"));
  tile_fence(e, "counters=0x1ffff units=0x3ff");
  for (int t = 0; t < t_count; ++t) {
    e.add("n2w", cat("tiles=", hex(tile_bit(t)), t ? cat(" n.addr=", hex(2 * w * t)) : "",
                     " n=(2 x 2)(-1 x 2)(1 x ", w / 2, ")", rewind(2 * w - 1, 3),
                     " n.lvl_mask=0x07 w.addr=", hex(kExpRow), " w=(0 x ", w / 2,
                     ") w.rows=1 sync.en0=1 sync.id=1 sync.en1=1 sync.val=0x0ffff sync.en2=1 "
                     "sync.f45=1 transpose=1 f800=1 tail_lvl=2"));
  }
  const int prob_at = 4 * n + 4 * p + 4;
  e.add("op", cat("tiles=", hex(g.mask), " loops=(2)(", w / 2, ") in.base=", hex(2 * n),
                  " in=(1 x 1)(0 x ", w, ")", repeat(cat("(", h, " x 1)"), 3),
                  "(0 x 1)(0 x 1)(0 x 1 m1) in.tflags=0x07 out.base=", hex(prob_at),
                  " out=", steps3(w, " m3"),
                  " out.tflags=0x3 par.base=0x74 par.sel=1 par.hmode=2 par=(0 x 2 m2)(-1 x ", w / 2,
                  " m2)", repeat("(-1 x 1 m2)", 5),
                  "(-1 x 1 m1) par.tflags=0x40 par.fifo=0x1 psum=(0 x ", w,
                  ") psum.tflags=0x0800 cfg0=0x060 cfg1=0x12d sync0=0x4000 sync1=0x4000 "
                  "cfg2=0x1e dp_mode=1 out_ch_last=3 out_ch=3 mult=",
                  f32_bits(std::bit_cast<float>(kProbMultBits)), " clamp_max=255"));
  tile_fence(e, "counters=0x02000 units=0x3ff");
  tile_fence(e, "counters=0x00002 units=0x3ff");
  for (int i = 0; i < 3; ++i) tile_fence(e, "counters=0x1ffff units=0x3ff");
  for (int t = 0; t < t_count; ++t) {
    gather_piece(e, t, kExpRow, w * t, prob_at / 4, w, t, ordinal, 1);
  }
  tile_fence(e, "units=0x3ff signal=1");
  wait_tokens(e);
  tile_fence(e, "counters=0x1ffff units=0x3ff");
  e.add("scsync", "sunits=0x0c");
  tile_fence(e, "counters=0x1ffff units=0x3ff");

  // The FULLY_CONNECTED layers on tile 0, one output word each at byte N + 4i.
  const int fcs = static_cast<int>(l.weights.size());
  int streamed = 0;  // weight packets streamed from other tiles
  for (int i = 0; i < fcs; ++i) {
    if (i > 0) {
      tile_fence(e, "counters=0x1ffff units=0x3ff signal=1");
      wait_tokens(e);
      tile_fence(e, "counters=0x1ffff units=0x3ff");
      e.add("scsync", cat("tiles=0xffff smask=0x020 thr5=", ordinal, " wait=0x020 sunits=0x0c"));
      tile_fence(e, "counters=0x20000 units=0x3ff signal=1");
      wait_tokens(e);
      e.add("scsync", "sunits=0x0c");
      tile_fence(e, "counters=0x1ffff units=0x3ff");
    }
    const bool from_fifo = g.streamed(size_t(i));
    const std::string stage = cat(" cfg2=0x07 w_zp=128 dp_mode=", from_fifo ? 2 : 1,
                                  " reduce_mask=", from_fifo ? "0x03" : "0x01",
                                  " out_ch_last=3 out_ch=3 mult=", f32_bits(l.mult[size_t(i)]),
                                  " clamp_max=", f32_bits(l.clamp_max),
                                  " clamp_min=", f32_bits(l.clamp_min), " out_zp=", l.out_zp);
    const std::string out =
        cat(" in.tflags=0x01 out.base=", hex(n + 4 * i),
            " out=(1 x 1)(2 x 1)(1 x 1)(0 x 1)(0 x 1)(0 x 1)(0 x 1)(0 x 1 m3) out.tflags=0x1");
    if (!from_fifo) {
      e.add("op", cat("tiles=0x1 loops=(", q, ") in=", steps2(q, " m3"), out,
                      " par.base=", hex(g.fc_pieces[size_t(i)].front().base),
                      " par=", steps(q, " m1"), " psum=(0 x ", q, ") cfg0=0x065", stage));
    } else {
      // Weights cached on another tile, streamed to tile 0's FIFO of kStreamSlots rows: q
      // steps as kStreamSlots x q / kStreamSlots (dp 2, both loops reduced).
      const int fills = q / kStreamSlots;
      tile_fence(e, "units=0x3ff");
      e.add("ringcons1", cat("tiles=0x1 addr=", hex(kStreamFifo), " dst=(1 x ", kStreamSlots, ")(",
                             1 - kStreamSlots, " x ", fills, ")", rewind(kStreamSlots - 1, 2),
                             " sdims=1 cbuf=1 slots=", kStreamSlots,
                             " mode=3 s_id=0x21 s_val=-1 s_en_a=1 s_en_b=1 s_y=1"));
      e.add("op", cat("tiles=0x1 loops=(", kStreamSlots, ")(", fills, ") in=(1 x ", kStreamSlots,
                      ")(", q - kStreamSlots + 1, " x 1)(1 x ", fills, ")", rewind(q - 1, 5, " m3"),
                      out, " par.base=", hex(kStreamFifo), " par=(1 x ", kStreamSlots, ")(",
                      1 - kStreamSlots, " x ", fills, ")", rewind(kStreamSlots - 1, 6, " m1"),
                      " par.tflags=0x40 par.fifo=", hex(kStreamSlots), " psum=(0 x ", kStreamSlots,
                      ")(0 x ", fills, ") cfg0=0x065 cfg1=0x12f sync0=0x4000 sync1=0x4000", stage));
      int previous = -1;
      for (const Geometry::Piece& piece : g.fc_pieces[size_t(i)]) {
        if (previous >= 0) {  // the previous piece has left its tile before the next one starts
          e.add("sync", cat("tiles=", hex(tile_bit(previous)), " units=0x3ff signal=1"));
          e.add("scsync",
                cat("tiles=0xffff tokwait=1 tmask=", hex(tile_bit(previous)), " sunits=0x0c"));
        }
        previous = piece.tile;
        e.add("ringprod", cat("tiles=", hex(tile_bit(piece.tile)), " src=(1 x ", piece.rows, ")",
                              rewind(piece.rows - 1, 3),
                              " sdims=1 pcfg=4 r0.id=0x32 r0.en_a=1 r0.en_b=1 to_c1=1 dest=0x1"));
      }
      streamed += q;
    }
    tile_fence(e, "counters=0x1ffff units=0x3ff");
    tile_fence(e, "units=0x3ff");
    sync_block(e);
  }
  tile_fence(e, "counters=0x1ffff units=0x3ff signal=1");
  wait_tokens(e);
  tile_fence(e, "counters=0x1ffff units=0x3ff");
  if (streamed > 0) {  // the scalar core counts the streamed weight packets
    e.add("scsync", cat("tiles=0xffff smask=0x040 thr6=", streamed, " wait=0x040 sunits=0x0c"));
    tile_fence(e, "counters=0x40000 units=0x3ff signal=1");
    wait_tokens(e);
  }
  tile_fence(e, "units=0x3ff");
  tile_fence(e, "units=0x3ff");
  tile_fence(e, "counters=0x1ffff units=0x3ff");
  tile_fence(e, "counters=0x1ffff units=0x3ff");

  // The CONCATENATION: the FC outputs relayed to narrow word 0, then an identity
  // FULLY_CONNECTED (its zero bias row loaded first) into word `fcs`.
  int concat_ordinal = 0;
  gather_piece(e, 0, kGatherRow, 0, n / 4, fcs, 0, concat_ordinal, 1);
  tile_fence(e, "units=0x3ff signal=1");
  wait_tokens(e);
  tile_fence(e, "counters=0x1ffff units=0x3ff");
  e.add("scsync", "sunits=0x0c");
  tile_fence(e, "counters=0x1ffff units=0x3ff");
  e.add("w2n", (g.tile0_base ? cat("tiles=0x1 w.addr=", hex(g.tile0_base), " ")
                             : std::string("tiles=0x1 ")) +
                   "w=(1 x 1) w.lvl_mask=0x1 n.addr=0x40 n=(1 x 32)(33 x 1)(-31 x 1)(-31 x 1)"
                   "(-31 x 1)(-31 x 1) n.lvl_mask=0x03 mode=2 fill_size=64 sync.en0=1 sync.f2=1 "
                   "sync.wait_lvl=2 sync.en1=1 sync.val=0x0ffff sync.en2=1 sync.f45=1 tail_f867=1 "
                   "tail_en870=1");
  e.add("op", cat("tiles=0x1 loops=(", fcs, ") in=", steps2(fcs, " m3"),
                  " in.tflags=0x01 out.base=", hex(4 * fcs),
                  " out=(1 x 1)(1 x 1)(1 x 1)(0 x 1)(0 x 1)(0 x 1)(0 x 1)(0 x 1 m3) out.tflags=0x1 "
                  "par.base=",
                  hex(g.tile0_base + kConcatBase), " par=", steps(fcs, " m1"), " psum=(0 x ", fcs,
                  ") cfg0=0x065 cfg1=0x12c sync0=0x4000 sync1=0x4000 cfg2=0x07 in_zp=", l.out_zp,
                  " dp_mode=1 reduce_mask=0x01 out_ch_last=3 out_ch=3 mult=1 clamp_max=",
                  f32_bits(l.clamp_max), " clamp_min=", f32_bits(l.clamp_min), " out_zp=", l.out_zp,
                  " cfg4=1"));
  tile_fence(e, "counters=0x1ffff units=0x3ff");
  tile_fence(e, "counters=0x1ffff units=0x3ff signal=1");
  wait_tokens(e);
  tile_fence(e, "units=0x3ff signal=1");
  wait_tokens(e);

  // The output: one 8-byte unit through the scalar core.
  const int out_bytes = (fcs + 7) / 8 * 8;
  output_address(e, l.output_name);
  e.add("n2w", cat("tiles=0x1 n.addr=", hex(fcs), " n=(1 x ", out_bytes / 8, ")",
                   " w.addr=", hex(kGatherRow),
                   " w=(1 x 1) w.circ=1 w.rows=1 sync.en0=1 sync.f1=1 sync.id=16 sync.wait_lvl=1 "
                   "sync.en1=1 sync.val=0x0ffff sync.en2=1 sync.f45=1 tail_lvl=1"));
  descriptor(e, 5, 4, 6, out_bytes, 3);
  e.add("outfeed", cat("walk=(1 x ", out_bytes / 8, ") k173=3 f222=0x7f"));
  send(e, 0, kGatherRow, 0x10000, concat_ordinal++, 1);
  tile_fence(e, "counters=0x1ffff units=0x3ff");
  e.add("scsync", cat("tiles=0xffff smask=0x020 thr5=", concat_ordinal, " wait=0x020 sunits=0x0c"));
  tile_fence(e, "counters=0x20000 units=0x3ff signal=1");
  wait_tokens(e);
  tile_fence(e, "units=0x3ff signal=1 f109=3");
  wait_tokens(e);
  interrupt(e, 5, 4, 6);
}

container::Bitstream execution_program(const Geometry& g, const SoftmaxFcLayer& l) {
  Emitter e;
  emit_execution(e, g, l);
  return e.finish();
}

void emit_caching(Emitter& e, const Geometry& g, const SoftmaxFcLayer& l) {
  if (g.after_chain) {  // (the chain's loads began the program; s1/s0 hold the parameters)
    e.add("bundle", cat("s_op=0x21 s_x=3 s_y=1 imm=", g.param_bytes));
  } else {
    tile_fence(e, "b43=1 counters=0x7ffff units=0x3ff signal=1");
    e.add("scsync", "tiles=0xffff smask=0x1ff tokwait=1 tmask=0xffff sunits=0x1f");
    e.reloc_movi(1, BufferKind::kParameter, Half::kLower32);
    e.reloc_movi(0, BufferKind::kParameter, Half::kUpper32);
    e.add("bundle", "s_op=0x0f s_x=3 imm=1");
  }
  e.add("bundle", "s_op=0x0f s_x=2 imm=0");
  descriptor(e, 3, 2, 4, int64_t{64} * g.units, 2);
  const Passes pop = passes_of(g.units, kParPassUnits);
  const int rows = std::min(g.units / 2, 1024);  // 128-byte rows, capped
  const bool b183 = g.units % 2 == 0 || g.units >= 2048;
  e.add("pop",
        cat("walk=",
            nest({{1, kParPassUnits}, {1 - kParPassUnits, pop.count}, {1 - kParPassUnits, 1}}),
            " k121=1 k124=1 par136=1", pop.fields(), " k174=1 par177=1 k178=1 b183=", b183 ? 1 : 0,
            " rows_neg=", hex(0x8000 - rows), " k199=1 k215=1"));
  // Each FULLY_CONNECTED's N/4 weight rows (the first at the highest unit), then the concat's.
  const int fcs = static_cast<int>(l.weights.size());
  int staged = 0;
  const auto infeed = [&](int units, uint32_t tile) {
    const Passes p = passes_of(units, kParPassUnits);
    const int off = staged % kStagingUnits;
    e.add("infeed",
          cat(off ? cat("buf_off=", hex(off), " ") : "", "walk=",
              nest({{1, kParPassUnits}, {1 - kParPassUnits, p.count}, {1 - kParPassUnits, 1}}),
              " k157=1 k160=1 par172=1", p.fields(), " f308=0x8 par314=1 pop_wait=",
              hex(staged + 1), " k336=1 f352=1 f391=2 dest=", hex(tile), " f434=0xf"));
    staged += units;
  };
  for (int i = 0; i < fcs; ++i) {
    for (const Geometry::Piece& piece : g.fc_pieces[size_t(i)]) {
      const uint32_t tile = tile_bit(piece.tile);
      e.add("ringcons0", cat("tiles=", hex(tile), " addr=", hex(2 + piece.base), " dst=(1 x ",
                             piece.rows, ")", rewind(piece.rows - 1, 3), " sdims=1"));
      infeed(piece.rows, tile);
    }
  }
  e.add("ringcons0",
        cat("tiles=0x1 addr=", hex(2 + g.tile0_base + kConcatBase), " dst=(1 x ", fcs, ")(",
            1 - fcs, " x 1)(", 1 - fcs, " x 1)(", 1 - fcs, " x 1) sdims=1 aux_en0=1 aux_en1=1",
            // (the aux block, the concat's bias row, at wide 0 unless a chain's rows are there)
            g.tile0_base ? cat(" aux_addr0=", hex(g.tile0_base)) : std::string()));
  infeed(1 + fcs, 1);
  tile_fence(e, "b43=1 units=0x3ff signal=1 f109=3");
  wait_tokens(e);
  interrupt(e, 3, 2, 4);
}

container::Bitstream caching_program(const Geometry& g, const SoftmaxFcLayer& l) {
  Emitter e;
  emit_caching(e, g, l);
  return e.finish();
}

}  // namespace

std::string softmax_fc_unsupported(const SoftmaxFcLayer& layer) {
  const int n = layer.n;
  // P = 64 on 1-4 rows of tiles; wide: 16 tiles whose pieces are whole ring packets or halves.
  const bool narrow = n % kPacket == 0 && (n <= 4 * kPacket || (n % kRingPacket == 0 && n <= 1024));
  const int p = n / 16;
  const bool wide = n % 2048 == 0 && n <= 16384 && (p % kRingPacket == 0 || kRingPacket % p == 0);
  if (!narrow && !wide) {
    return cat(
        "a SOFTMAX over ", n,
        " positions: the generator covers 64, 128, 192, 256, 512, 768 and 1024 (64 bytes per "
        "tile) and 2048, 4096, 8192, 12288 and 16384 (16 tiles)");
  }
  return "";
}

std::vector<uint8_t> softmax_fc_parameters(const SoftmaxFcLayer& layer) {
  std::vector<uint8_t> out;
  for (const std::vector<int8_t>& w : layer.weights) {
    for (size_t u = 0; u < w.size() / 4; ++u) {
      for (int b = 0; b < 4; ++b) out.push_back(static_cast<uint8_t>(w[4 * u + size_t(b)] + 128));
      out.insert(out.end(), 12, 128);  // the zero point of the unused columns 1-3
      out.insert(out.end(), 48, 0);
    }
  }
  out.insert(out.end(), 64, 0);  // the concat's bias row
  for (size_t i = 0; i < layer.weights.size(); ++i) {
    std::vector<uint8_t> unit(64, 0);
    unit[4 * i] = 1;  // int32 1: input i to column i
    out.insert(out.end(), unit.begin(), unit.end());
  }
  return out;
}

}  // namespace tinycoral::compiler

namespace tinycoral::compiler {

namespace {

// Places the FULLY_CONNECTED weights: all on tile 0 above `tile0_base` when they fit below the
// stream FIFO (bright_16x16); else the first there if it fits (bright_64x64) and the others, in
// even pieces of at most kPieceRows rows, on the tiles `busy` leaves free, streamed into tile 0's
// FIFO. Returns why not when the free tiles run out.
std::string place_weights(Geometry& g, int fc_count, int tile0_base, uint32_t busy) {
  const int n = g.n, q = n / 4;
  g.tile0_base = tile0_base;
  g.fc_pieces.assign(size_t(fc_count), {});
  const bool resident = tile0_base + kFcBase + fc_count * n <= kStreamFifo;
  int tile = 1;
  for (int i = 0; i < fc_count; ++i) {
    auto& pieces = g.fc_pieces[size_t(i)];
    if (resident) {  // the last FULLY_CONNECTED at kFcBase, each earlier one N units above
      pieces.push_back({0, tile0_base + kFcBase + (fc_count - 1 - i) * n, q});
      continue;
    }
    if (i == 0 && tile0_base + kFcBase + n <= kStreamFifo) {
      pieces.push_back({0, tile0_base + kFcBase, q});
      continue;
    }
    const int count = (q + kPieceRows - 1) / kPieceRows;
    for (int k = 0; k < count; ++k) {
      while (tile < 16 && (busy >> tile & 1u)) ++tile;
      if (tile == 16) {
        return cat("the FULLY_CONNECTED weights after the SOFTMAX (", fc_count, " x ", n,
                   ") need more free tiles than the 15 beside tile 0 minus the CONV_2D chain's");
      }
      pieces.push_back({tile++, 0, q / count + (k < q % count ? 1 : 0)});
    }
  }
  return "";
}

Geometry geometry_of(const SoftmaxFcLayer& layer) {
  Geometry g;
  g.n = layer.n;
  g.tiles = std::min(16, layer.n / kPacket);
  g.p = layer.n / g.tiles;
  g.wide = g.p > kPacket;
  g.gather_row = g.wide ? kWideGather : kGatherRow;
  g.mask = first_tiles(g.tiles);
  const int fc_count = static_cast<int>(layer.weights.size());
  g.units = fc_count * layer.n / 4 + 1 + fc_count;
  return g;
}

// Both executables from the two programs and the parameters (`input`: the host's image layer).
SoftmaxPrograms programs_of(const Geometry& g, const SoftmaxFcLayer& layer,
                            container::Bitstream execution, container::Bitstream caching,
                            std::vector<uint8_t> parameters, container::Layer input) {
  const int fcs = static_cast<int>(layer.weights.size());
  SoftmaxPrograms out;
  container::Executable& eo = out.execution = execution_executable(std::move(execution));
  const int in_bytes = input.size_bytes;
  const std::string input_name = input.name;
  eo.input_layers.push_back(std::move(input));
  const int out_bytes = (fcs + 7) / 8 * 8;
  container::Layer y = boundary_layer(layer.output_name, fcs, layer.out_zp, layer.out_scale, true,
                                      layer.signed_output);
  y.size_bytes = out_bytes;
  // As the FC's layout with one group of 4 columns (the ops' out_ch 3) on tile 0.
  constexpr int kColumns = 4;
  const int columns = (fcs + kColumns - 1) / kColumns * kColumns;
  container::OutputLayout layout;
  for (int t = 0; t < 16; ++t)
    layout.linearized_tile_byte_offset.push_back(std::min(t * kColumns, columns));
  layout.y_coordinate_to_linear_tile_id_map = {0};
  layout.x_coordinate_to_linear_tile_id_map = {0};
  layout.x_coordinate_to_local_byte_offset = {0};
  layout.y_coordinate_to_local_y_offset = {0};
  layout.x_coordinate_to_local_y_row_size = {columns};
  y.output_layout = layout;
  y.shape = {{0, 0}, {0, fcs - 1}};
  eo.output_layers.push_back(std::move(y));
  eo.used_narrow_memory_bytes_per_tile = 4 * layer.n + 4 * g.p + 4 + g.p;
  eo.dma_hints = execution_hints(input_name, in_bytes, layer.output_name, out_bytes);
  const container::Executable& pc = out.caching =
      caching_executable(std::move(caching), std::move(parameters));
  eo.parameter_caching_token = out.caching.parameter_caching_token = caching_token(pc.parameters);
  return out;
}

}  // namespace

SoftmaxPrograms generate_softmax_fc(const SoftmaxFcLayer& layer) {
  if (const std::string why = softmax_fc_unsupported(layer); !why.empty()) fail(why);
  Geometry g = geometry_of(layer);
  if (const std::string why = place_weights(g, int(layer.weights.size()), 0, 1u); !why.empty())
    fail(why);
  return programs_of(g, layer, execution_program(g, layer), caching_program(g, layer),
                     softmax_fc_parameters(layer),
                     boundary_layer(layer.input_name, layer.n, layer.in_zp, layer.in_scale, false,
                                    layer.signed_input));
}

std::optional<SoftmaxPrograms> generate_conv_softmax(const ConvChain& chain,
                                                     const SoftmaxFcLayer& layer,
                                                     std::string& why) {
  why = softmax_fc_unsupported(layer);
  if (!why.empty()) return std::nullopt;
  Emitter execution, caching;
  Geometry g = geometry_of(layer);
  const std::optional<ConvHead> head = emit_conv_head(
      chain, execution, caching, why,
      [&](const ConvHead& h) { return h.out_bytes == layer.n && pieces_from_bands_fit(g, h); });
  if (!head) return std::nullopt;
  if (head->out_bytes != layer.n) {
    why = "the SOFTMAX does not read the CONV_2D chain's whole output";
    return std::nullopt;
  }
  g.after_chain = true;
  if (head->on_chip) g.bands = head->bands;
  g.param_bytes = static_cast<int64_t>(head->cached.size());
  // FULLY_CONNECTED weights cached on other tiles go to tiles the chain leaves free (they would
  // overwrite its parameters); tile 0's go above the chain's rows (rounded to a row).
  const int tile0_base = (head->tiles & 1u) ? (head->param_units + 3) / 4 * 4 : 0;
  why = place_weights(g, int(layer.weights.size()), tile0_base, head->tiles | 1u);
  if (!why.empty()) return std::nullopt;
  emit_execution(execution, g, layer);
  emit_caching(caching, g, layer);
  std::vector<uint8_t> parameters = head->cached;
  const std::vector<uint8_t> own = softmax_fc_parameters(layer);
  parameters.insert(parameters.end(), own.begin(), own.end());
  const ConvLayer& first = chain.layers.front();
  SoftmaxPrograms out =
      programs_of(g, layer, execution.finish(), caching.finish(), std::move(parameters),
                  boundary_layer(chain.input_name, first.h, first.w, first.cin, first.in_zp,
                                 first.in_scale, false, chain.signed_input));
  // The round trip through scratch is the device's own request (descriptors it reports, as in
  // Google's LSTM, whose hints stop the same way): the hints send the instructions and the image
  // and say they are not all; the scratch bytes, the output and the end follow as requested.
  out.execution.used_narrow_memory_bytes_per_tile =
      std::max(out.execution.used_narrow_memory_bytes_per_tile, head->narrow_end);
  if (head->on_chip) return out;  // (the hints of a program without requests)
  out.execution.scratch_size_bytes = layer.n;
  container::DmaHints& hints = out.execution.dma_hints;
  hints.fully_deterministic = false;
  hints.hints.resize(2);
  return out;
}

}  // namespace tinycoral::compiler
