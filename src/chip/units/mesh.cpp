// The mesh moves (0x15 south, 0x16 west, 0x17 north, 0x18 east): the outbound half sends narrow
// words to the neighbour tile's queue for the same direction, the inbound half writes the words
// that arrived (or a fill value); a relay forwards what it receives (docs/chip.md "Unit semantics
// used").
#include <algorithm>
#include <array>
#include <cstring>
#include <unordered_map>

#include "chip/units/tile_work.h"

namespace tinycoral::chip {

bool VirtualEdgeTpu::Impl::run_mesh(TileWork& t) {
  Tile& tile = t.tile;
  const auto& m = std::get<MeshInstr>(t.item.decoded);
  const size_t dir = isa::mesh_direction(t.item.opcode);
  auto& in_q = t.ts.mesh_in[dir];
  const bool receive = m.in_active && !m.fill_en;
  if (m.out_ttu.steps() > units::kMaxMeshSteps || m.in_ttu.steps() > units::kMaxMeshSteps)
    t.fail(cat("walks more than ", units::kMaxMeshSteps, " elements"));
  // Element offsets of both halves, without the words a short last piece leaves out (the
  // same on every tile and every run: kept in the program).
  ItemFacts& facts = t.w.program->facts[t.w.item];
  if (!facts.mesh_known) {
    if (m.out_active)
      facts.mesh_out = units::mesh_offsets(m.out_ttu, m.out_short, m.out_piece_level);
    if (m.in_active || m.fill_en)
      facts.mesh_in = units::mesh_offsets(m.in_ttu, m.in_short, m.in_piece_level);
    if (!facts.mesh_out.empty() && !facts.mesh_in.empty() &&
        facts.mesh_out.size() != facts.mesh_in.size()) {
      std::unordered_map<int64_t, int64_t> written_at;  // byte address -> last inbound step
      for (size_t k = 0; k < facts.mesh_in.size(); ++k)
        written_at[int64_t{m.in_addr} + 4 * facts.mesh_in[k]] = static_cast<int64_t>(k);
      for (int64_t off : facts.mesh_out) {
        const auto it = written_at.find(int64_t{m.out_addr} + 4 * off);
        facts.mesh_wait.push_back(it == written_at.end() ? -1 : it->second);
      }
    }
    facts.mesh_known = true;
  }
  const std::vector<int64_t>& outs = facts.mesh_out;
  const std::vector<int64_t>& ins = facts.mesh_in;
  const uint64_t in_steps = ins.size();
  if (receive && in_q.size() < in_steps) return false;
  const int neighbour = mesh_neighbour(t.w.tile, t.item.opcode);
  // Both halves' addresses are checked once (their offsets' extremes), statistics are added in
  // bulk: the words themselves move in tight loops.
  auto check_half = [&](const std::vector<int64_t>& offsets, uint32_t addr) {
    if (offsets.empty()) return;
    const auto [lo, hi] = std::minmax_element(offsets.begin(), offsets.end());
    if (int64_t{addr} + 4 * *lo < 0 || int64_t{addr} + 4 * *hi + 4 > kNarrowBytes)
      t.fail(cat("mesh narrow addresses ", int64_t{addr} + 4 * *lo, "..", int64_t{addr} + 4 * *hi,
                 " outside ", kNarrowBytes, " bytes"));
  };
  check_half(outs, m.out_addr);
  check_half(ins, m.in_addr);
  tile.stats.narrow_bytes_read += 4 * uint64_t{outs.size()};
  tile.stats.narrow_bytes_written += 4 * in_steps;
  stats.mesh_bytes += 4 * uint64_t{outs.size()};
  if (neighbour < 0)
    stats.mesh_bytes_dropped_at_edge += 4 * uint64_t{outs.size()};
  else
    buffered_bytes += 4 * uint64_t{outs.size()};
  if (receive) buffered_bytes -= 4 * in_steps;
  std::deque<uint32_t>* const to = neighbour < 0 ? nullptr : &tile_state[neighbour].mesh_in[dir];
  uint8_t* const out_base = tile.narrow.data() + m.out_addr;
  uint8_t* const in_base = tile.narrow.data() + m.in_addr;
  // Words go out through a buffer appended to the neighbour's queue at the end, and come in
  // through an iterator erased up to at the end (nothing else runs in between): no deque
  // operation per word.
  thread_local std::vector<uint32_t> sent;
  sent.clear();
  auto in_next = in_q.begin();
  auto send = [&](uint32_t word) { sent.push_back(word); };
  auto read_out = [&](int64_t off) {
    uint32_t v;
    std::memcpy(&v, out_base + 4 * off, 4);
    return v;
  };
  auto write_in = [&](int64_t off) {
    const uint32_t v = receive ? *in_next++ : m.fill;
    std::memcpy(in_base + 4 * off, &v, 4);
  };
  if (!outs.empty() && in_steps > 0 && outs.size() == in_steps) {
    // A relay: each received word may be the one it forwards (docs/chip.md "Mesh").
    for (uint64_t k = 0; k < in_steps; ++k) {
      write_in(ins[k]);
      send(read_out(outs[k]));
    }
  } else if (!outs.empty() && in_steps > 0) {
    // A relay that adds its own data (the gather before MobileNet's average pool: tile 1
    // sends its 4 positions and the 8 it receives from tile 2): an outbound word whose address
    // the inbound half writes is sent after it arrived.
    uint64_t received = 0;
    auto receive_through = [&](uint64_t step) {
      for (; received <= step && received < in_steps; ++received) write_in(ins[received]);
    };
    for (size_t j = 0; j < outs.size(); ++j) {
      if (facts.mesh_wait[j] >= 0) receive_through(static_cast<uint64_t>(facts.mesh_wait[j]));
      send(read_out(outs[j]));
    }
    receive_through(in_steps - 1);
  } else {
    for (int64_t off : outs) send(read_out(off));
    for (int64_t off : ins) write_in(off);
  }
  if (receive) in_q.erase(in_q.begin(), in_next);
  t.taken = receive ? in_steps : 0;
  t.sent = sent.size();
  if (to) to->insert(to->end(), sent.begin(), sent.end());
  if (buffered_bytes > options.max_buffered_bytes)
    t.fail(cat("more than ", options.max_buffered_bytes, " bytes wait in mesh links"));
  charge();
  return true;
}

}  // namespace tinycoral::chip
