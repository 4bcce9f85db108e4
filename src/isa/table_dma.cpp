// Opcode table, tile data-movement group: ring bus 0x10-0x12 (4 words), narrowToWide 0x13 and
// wideToNarrow 0x14 (7 words), mesh bus 0x15-0x18 (6 words). Field positions:
// isa.md 2.0(b), 2.5-2.7.
#include <string>

#include "isa/table_builder.h"

namespace tinycoral::isa::detail {
namespace {

// The ring/mesh descriptor (isa.md 2.6): address, 4 (increment, count) levels, staging geometry.
// `at` is its first bit (60 for ring and mesh outbound, 265 for mesh inbound).
void ring_descriptor(Layout& l, const std::string& name, const std::string& prefix, uint16_t at,
                     const std::string& unit) {
  const auto r = [at](int rel) { return static_cast<uint16_t>(at + rel); };
  l.hex(prefix + "addr", at, 18, name + ": start address");
  l.nest(name, prefix, {r(18), 17, r(35), 16, 0, 0, 33, 4}, unit);
  l.u(prefix + "sdims", r(150), 4, name + ": staging dims (1 plain, 2^levels - 1 multi-level)");
  l.u(prefix + "cbuf", r(154), 2, name + ": 1 = circular staging buffer");
  l.u(prefix + "slots", r(156), 11, name + ": staging slots");
  l.rsv(r(167), 6);
  l.u(prefix + "grp", r(173), 10, name + ": packets in this group - 1 (partial last packet)");
}

// A 41-bit ring-producer sync record (isa.md 2.6): id = op<<5 | counter.
void producer_record(Layout& l, const std::string& r, uint16_t at) {
  const auto b = [at](int rel) { return static_cast<uint16_t>(at + rel); };
  l.hex(r + ".id", at, 7, r + ": op<<5 | sync counter (isa.md 2.12)");
  l.s(r + ".val", b(7), 16, r + ": counter value");
  l.u(r + ".en_a", b(23), 1, r + ": enable a");
  l.hex(r + ".x", b(24), 15, r + ": unknown");
  l.u(r + ".en_b", b(39), 1, r + ": enable b");
  l.u(r + ".y", b(40), 1, r + ": unknown");
}

// A 41-bit mesh sync record (isa.md 2.7): id = counter<<1 | op.
void mesh_record(Layout& l, const std::string& r, uint16_t at) {
  const auto b = [at](int rel) { return static_cast<uint16_t>(at + rel); };
  l.hex(r + ".id", at, 6, r + ": counter<<1 | op (isa.md 2.12)");
  l.s(r + ".val", b(6), 18, r + ": counter value ((count<<2) | levels in relays)");
  l.u(r + ".en_a", b(24), 1, r + ": enable a");
  l.hex(r + ".x", b(25), 15, r + ": unknown");
  l.u(r + ".en_b", b(40), 1, r + ": enable b");
}

OpcodeDecl ring_producer() {
  Layout l(kRingProducer, "ringprod", 4, Unit::kTile, true,
           "ring bus producer: send 256-B packets from wide memory to tiles or the scalar core");
  l.tile_header(46, 14);
  ring_descriptor(l, "src", "", 60, "256-B rows");
  l.rsv(243, 92);
  l.u("mode", 335, 2, "3 output to scalar core, 1 tile-to-tile forward, 0 parameter broadcast");
  l.u("pcfg", 337, 6, "20 output, 0 forward, 4/12 parameter broadcast");
  producer_record(l, "r0", 343);
  producer_record(l, "r1", 384);
  producer_record(l, "r2", 425);
  l.u("to_c1", 466, 1, "1 = packets go to ringConsumer1 (0x12)");
  l.hex("dest", 467, 17, "multicast bitmap: bit t = tile t, bit 16 = scalar core (outfeed)");
  l.rsv(484, 28);
  return l.take();
}

OpcodeDecl ring_consumer(uint8_t opcode, std::string mnemonic, std::string summary) {
  Layout l(opcode, std::move(mnemonic), 4, Unit::kTile, true, std::move(summary));
  l.tile_header(46, 14);
  ring_descriptor(l, "dst", "", 60, "256-B rows");
  l.rsv(243, 6);
  l.u("gstride", 249, 18, "multi-packet groups: 4(c - p) + 1, else 0");
  l.u("aux_en0", 267, 1, "aux pair 0 enable (caching and parameter consumers)");
  l.hex("aux_addr0", 268, 18, "aux address 0 (caching FC: first bias row)");
  l.u("aux_rows0_m1", 286, 14, "rows of each group's aux block - 1 (per-channel: 2)");
  l.hex("aux_addr1", 300, 18, "aux address 1 (caching FC: last bias row)");
  l.u("aux_en1", 318, 1, "aux pair 1 enable");
  l.u("aux_f319", 319, 1, "1 in the per-channel (16.0) programs, else 0; meaning unknown");
  l.rsv(320, 15);
  l.u("mode", 335, 2, "3 infeed-fed or parameter, 1 fed by a tile producer");
  l.rsv(337, 2);
  l.hex("s_id", 339, 7, "sync record: op<<5 | counter");
  l.s("s_val", 346, 16, "sync record value (-64c execution inputs, -1 weight FIFO)");
  l.u("s_en_a", 362, 1, "sync record enable a");
  l.rsv(363, 5);
  l.u("s_cnt", 368, 10, "packets in the stream");
  l.u("s_en_b", 378, 1, "sync record enable b");
  l.u("s_y", 379, 1, "sync record flag y");
  l.rsv(380, 132);
  return l.take();
}

// The sync block shared by 0x13 (at 543) and 0x14 (at 611), isa.md 2.5.
void wn_sync_head(Layout& l, uint16_t at) {
  const auto b = [at](int rel) { return static_cast<uint16_t>(at + rel); };
  l.u("sync.en0", at, 1, "sync: enable 0 (always 1)");
  l.u("sync.f1", b(1), 1, "sync: flag 1");
  l.u("sync.f2", b(2), 1, "sync: flag 2 (1 = last record / bias load)");
  l.rsv(b(3), 1);
  l.u("sync.id", b(4), 5, "sync: counter waited on (isa.md 2.12), 0 none");
  l.u("sync.wait_lvl", b(9), 3, "sync: loop level of the wait");
  l.u("sync.en1", b(12), 1, "sync: enable 1 (always 1)");
  l.hex("sync.val", b(13), 19, "sync: value (0x8000 FIFO reads, 0xffff cached bias)");
  l.u("sync.f32", b(32), 3, "sync: 1, 2 or 4 in some gen2020/SSD wideToNarrow copies; unknown");
  l.rsv(b(35), 9);
  l.u("sync.en2", b(44), 1, "sync: enable 2 (always 1)");
  l.u("sync.f45", b(45), 1, "sync: 1 when sync.id = 0");
}

OpcodeDecl narrow_to_wide() {
  Layout l(kNarrowToWide, "n2w", 7, Unit::kTile, true,
           "narrowToWide: tile-local copy from narrow memory (words) to wide memory (rows)");
  l.tile_header(46, 14);
  l.rsv(60, 2);
  l.hex("n.addr", 62, 16, "narrow source address, 4-byte words");
  l.nest("n", "n.", {78, 17, 95, 16, 0, 0, 33, 6}, "words");
  l.hex("n.lvl_mask", 276, 6, "narrow levels with a non-zero stride");
  l.rsv(282, 20);
  l.hex("relay_last", 302, 24,
        "maxpool relay partial last group record (seen 0x20001 0x440007 0x84000f 0xc10027)");
  l.rsv(326, 9);
  l.hex("w.addr", 335, 14, "wide destination address, 64-B units");
  l.rsv(349, 4);
  l.nest("w", "w.", {353, 17, 370, 16, 0, 0, 33, 4}, "256-B rows");
  l.hex("w.lvl_mask", 485, 4, "wide levels in use");
  l.u("w.circ", 489, 1, "wide: circular addressing");
  l.rsv(490, 1);
  l.u("w.rows", 491, 11, "wide: FIFO depth in rows (0 = linear)");
  l.hex("w.last", 502, 41, "MUL feed partial last round record");
  wn_sync_head(l, 543);
  l.hex("x589", 589, 64, "record of unknown meaning (classifier and LSTM copies)");
  l.hex("x653", 653, 64, "record of unknown meaning (continues x589)");
  l.rsv(717, 3);
  l.hex("x720", 720, 36, "record of unknown meaning (gen2020/2021 MobileNet classifier copies)");
  l.rsv(756, 43);
  l.u("transpose", 799, 1, "1 = transposing write (maxpool relay)");
  l.u("f800", 800, 1, "1 in some gen2021/16.0 copies; meaning unknown");
  l.u("tail_lvl", 801, 2, "active narrow loop levels (guess)");
  l.u("f803", 803, 1, "1 in some gen2020 copies; meaning unknown");
  l.rsv(804, 92);
  return l.take();
}

OpcodeDecl wide_to_narrow() {
  Layout l(kWideToNarrow, "w2n", 7, Unit::kTile, true,
           "wideToNarrow: tile-local copy from wide memory (rows) to narrow memory (words)");
  l.tile_header(46, 14);
  l.hex("w.addr", 60, 14, "wide source address, 64-B units");
  l.rsv(74, 4);
  l.nest("w", "w.", {78, 17, 95, 16, 0, 0, 33, 4}, "256-B rows");
  l.hex("w.lvl_mask", 210, 4, "bit 1 = wide stride 1 non-zero; bit 0 = mode non-zero");
  l.u("w.circ", 214, 1, "wide: circular addressing");
  l.rsv(215, 1);
  l.u("w.rows", 216, 11, "wide: FIFO depth in rows (0 = linear)");
  l.hex("w.stream", 227, 40, "streamed input record (grp at 233, gstride at 249)");
  l.hex("n.addr", 267, 16, "narrow destination address, 4-byte words");
  l.nest("n", "n.", {283, 17, 300, 16, 0, 0, 33, 6}, "words");
  l.hex("n.lvl_mask", 481, 6, "narrow levels with a non-zero stride");
  l.u("mode", 487, 2, "0 ring receive, 1 FIFO with sub-row selection, 2 parameters to bias store");
  l.u("fill_size", 489, 18, "bytes per FIFO entry in 2-byte units");
  l.u("head_words_m1", 507, 16, "circular inputs: words before the FIFO wrap - 1");
  l.u("head_en", 523, 1, "circular inputs: head/tail split enable");
  l.hex("head_tail", 524, 18, "byte count of the tail after the wrap");
  l.u("skip_en0", 542, 1, "1 iff the chunk starts inside a 256-B row");
  l.u("f543", 543, 1, "1 in some gen2021/16.0 copies; meaning unknown");
  l.u("skip_en1", 544, 1, "1 iff the chunk starts inside a 256-B row");
  l.rsv(545, 1);
  l.hex("skip_base", 546, 16, "narrow base of the whole destination (words) when skipping");
  l.u("skip_m1", 562, 16, "words skipped at the start of the wide data - 1");
  l.hex("skip_end", 578, 16, "skip_base + skip_m1");
  l.rsv(594, 17);
  wn_sync_head(l, 611);
  l.rsv(657, 5);
  l.u("sync.dec_lvl", 662, 2, "sync: level of the credit return");
  l.rsv(664, 1);
  l.s("sync.dec", 665, 17, "sync: credit returned (-1 for FIFO inputs)");
  l.rsv(682, 15);
  l.u("sync.dec_mode", 697, 2, "sync: 3 when sync.dec is non-zero");
  l.rsv(699, 168);
  l.u("tail_f867", 867, 1, "1 for mode 2 (bias load)");
  l.rsv(868, 2);
  l.u("tail_en870", 870, 1, "always 1");
  l.u("tail_f871", 871, 1, "1 for circular streaming");
  l.u("tail_f872", 872, 1, "1 in some gen2020 copies; meaning unknown");
  l.rsv(873, 23);
  return l.take();
}

OpcodeDecl mesh(uint8_t opcode, std::string mnemonic, std::string direction) {
  Layout l(opcode, std::move(mnemonic), 6, Unit::kTile, true,
           "mesh bus, data moves " + direction +
               ": outbound half sends local narrow data, inbound half writes what arrives");
  l.tile_header(46, 14);
  ring_descriptor(l, "o", "o.", 60, "4-byte elements");
  l.rsv(243, 6);
  l.u("o.gstride", 249, 16, "outbound partial last packet: 4(4 - r) + 1");
  ring_descriptor(l, "i", "i.", 265, "4-byte elements");
  l.rsv(448, 6);
  l.u("i.gstride", 454, 16, "inbound partial last packet: 4(4 - r) + 1");
  l.rsv(470, 3);
  l.u("out_mode", 473, 2, "3 / 0, meaning unknown");
  l.u("f475", 475, 2, "1 or 2 in gen2020 programs, 0 in later ones; meaning unknown");
  l.u("in_mode", 477, 3, "3 FC inbound/relays/fills, 2 levels + 1 halo, 0 receivers");
  for (int k = 0; k < 5; ++k) {
    mesh_record(l, "s" + std::to_string(k), static_cast<uint16_t>(480 + 41 * k));
  }
  l.rsv(685, 42);
  l.u("fill_en", 727, 1, "1 = the inbound half writes `fill` instead of receiving");
  l.hex("fill", 728, 32, "constant pattern written by the inbound half");
  l.rsv(760, 8);
  return l.take();
}

}  // namespace

void add_dma_opcodes(std::vector<OpcodeDecl>& out) {
  out.push_back(ring_producer());
  out.push_back(ring_consumer(kRingConsumer0, "ringcons0",
                              "ring bus consumer 0: receive packets into wide memory"));
  out.push_back(ring_consumer(kRingConsumer1, "ringcons1",
                              "ring bus consumer 1: receive packets into a wide weight FIFO"));
  out.push_back(narrow_to_wide());
  out.push_back(wide_to_narrow());
  out.push_back(mesh(kMeshSouth, "mesh_s", "south (tile t to t+4)"));
  out.push_back(mesh(kMeshWest, "mesh_w", "west (tile t to t-1)"));
  out.push_back(mesh(kMeshNorth, "mesh_n", "north (tile t to t-4)"));
  out.push_back(mesh(kMeshEast, "mesh_e", "east (tile t to t+1)"));
}

}  // namespace tinycoral::isa::detail
