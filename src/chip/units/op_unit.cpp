// The op unit (0x01-0x03): finds the op's class (ops::classify, chip/tile.h) and runs it as a
// whole over the tile's memories, handling the two ways an op's inputs stream while it runs on the
// chip: weights refilled through a FIFO row, and image rows handed over through a narrow staging.
#include <algorithm>
#include <cstring>

#include "chip/ops/fifo_rounds.h"
#include "chip/units/tile_work.h"

namespace tinycoral::chip {
namespace {

// An op whose `in` walk re-reads a narrow staging at every iteration of its outermost loop (stride
// 0; gen2020 MobileNet word 50 copies image rows 0..30 from the staging at 4356) takes one
// staging chunk per iteration: on the chip the op and the wideToNarrow hand the staging over row
// by row. Running as a whole, the op replays the wideToNarrow's chunk history instead: one pass of
// the loop per chunk, with the chunk put back into the staging first.
struct StagedLoop {
  const std::vector<std::vector<uint8_t>>* chunks = nullptr;
  int loop = -1;
  int64_t staging = 0;  // bytes
};
int outermost_level(const OpTtu& t) {
  for (int k = 7; k >= 0; --k)
    if (t.cnt[k] != 0) return k;
  return -1;
}
StagedLoop staged_loop(const Tile& tile, const OpInstr& op) {
  if (tile.staging.empty() || !units::op_uses(op.in)) return {};
  int loop = -1;
  for (int k = 7; k >= 0 && loop < 0; --k)
    if (op.loops[k] != 0) loop = k;
  const int level = outermost_level(op.in);
  if (loop <= 0 || level < 0 || op.in.cnt[level] != op.loops[loop] || op.in.strides()[level] != 0)
    return {};
  const int64_t lo = op.in.min_address(), hi = op.in.max_address();
  for (const auto& [word, chunks] : tile.staging) {
    if (chunks.size() < uint64_t{op.loops[loop]} + 1) continue;
    const int64_t begin = 4 * int64_t{word};
    if (lo < begin || hi >= begin + static_cast<int64_t>(chunks.front().size())) continue;
    // Only while slot 0 still holds the last chunk the wideToNarrow put there: once another
    // instruction wrote over the staging, an op reading it again reads that data (DeepLab word
    // 3488 reads the ADD output at narrow 0, where the image rows were staged long before; its
    // two output groups re-read the same input, which looked like a staged loop).
    const auto& last_in_slot0 = chunks[(chunks.size() - 1) & ~size_t{1}];
    if (!std::equal(last_in_slot0.begin(), last_in_slot0.end(), tile.narrow.begin() + begin))
      continue;
    return {&chunks, loop, begin};
  }
  return {};
}
// The same op restricted to pass `pass` of its outermost loop; false when a walk does not follow
// that loop with its own outermost level (then the op cannot be split). A walk may merge that loop
// with the loops inside it into one level of k times its count when its stride is the same along
// them (PoseNet word 50: loops (.., 4, 22), `par` and `psum` walk one level of 88): a pass then
// covers k of that level's steps.
bool restrict_to_pass(OpInstr& part, const OpInstr& op, int loop, uint32_t pass) {
  part.loops[loop] = 0;
  const uint64_t passes = uint64_t{op.loops[loop]} + 1;
  for (auto [dst, src] : {std::pair{&part.in, &op.in},
                          {&part.out, &op.out},
                          {&part.par, &op.par},
                          {&part.psum, &op.psum}}) {
    const int level = outermost_level(*src);
    if (level < 0) continue;
    const uint64_t steps = uint64_t{src->cnt[level]} + 1;
    if (steps % passes != 0) return false;
    const uint64_t k = steps / passes;
    dst->cnt[level] = static_cast<uint32_t>(k - 1);
    dst->base = src->base + static_cast<int64_t>(pass * k) * src->strides()[level];
  }
  return true;
}

}  // namespace

bool VirtualEdgeTpu::Impl::run_op_unit(TileWork& t) {
  Tile& tile = t.tile;
  const auto& decoded = std::get<OpInstr>(t.item.decoded);
  const OpClass* cls = ops::classify(decoded);
  if (!cls || !cls->run)
    t.fail(cat("unknown op class (", describe_op_class(decoded), "): not simulated"));
  const uint64_t macs_before = tile.stats.macs;
  // Weights refilled while the op runs: an op without the FIFO field whose rows were written
  // once per iteration of its outer loops (0.5/160 word 751: 2 output groups through the same
  // 16 rows, consumer 740 writes each row twice) reads them as a FIFO, one fill per group.
  OpInstr streamed = decoded;
  if (decoded.par_fifo == 0 && cls->par_fifo_fills) {
    streamed.par_fifo = 1;
    const uint32_t fills = cls->par_fifo_fills(streamed);
    const int64_t first = decoded.par.min_address() / 4, last = decoded.par.max_address() / 4;
    bool refilled = fills > 1 && decoded.par.min_address() >= 0;
    for (int64_t row = first; refilled && row <= last; ++row) {
      const FifoRow* r = tile.fifo_rows.find(static_cast<uint32_t>(row));
      refilled = r && r->fills.size() >= fills;
    }
    if (!refilled) streamed.par_fifo = 0;
  }
  const OpInstr& op = streamed;
  if (cls->par_fifo_fills && op.par_fifo != 0)
    if (const uint32_t fills = cls->par_fifo_fills(op); fills > 0)
      for (int64_t row = op.par.min_address() / 4, last = op.par.max_address() / 4; row <= last;
           ++row)
        if (row >= 0)
          units::drop_stale_fills(tile, static_cast<uint32_t>(row),
                                  ops::fifo_fills_of_row(op, fills, row));
  const StagedLoop staged = staged_loop(tile, op);
  OpInstr part = op;
  if (staged.chunks && restrict_to_pass(part, op, staged.loop, 0)) {
    // The staging keeps what the wideToNarrow left in it for the ops after this one (PoseNet
    // word 237 copies the last image row, chunk 22, after word 50 replayed chunks 0-21).
    const size_t slot_bytes = staged.chunks->front().size();
    const std::vector<uint8_t> left(
        tile.narrow.begin() + staged.staging,
        tile.narrow.begin() + staged.staging + static_cast<std::ptrdiff_t>(slot_bytes));
    for (uint32_t pass = 0; pass <= op.loops[staged.loop]; ++pass) {
      restrict_to_pass(part, op, staged.loop, pass);
      const auto& chunk = (*staged.chunks)[pass];
      std::memcpy(tile.narrow.data() + staged.staging, chunk.data(), chunk.size());
      OpEnv env(tile, part);
      cls->run(part, env);
    }
    std::memcpy(tile.narrow.data() + staged.staging, left.data(), left.size());
  } else {
    OpEnv env(tile, op);
    cls->run(op, env);
  }
  stats.macs += tile.stats.macs - macs_before;
  t.macs = tile.stats.macs - macs_before;
  charge(1 + (tile.stats.macs - macs_before) / 4096);
  if (cls->par_fifo_fills) {
    const uint32_t fills = cls->par_fifo_fills(op);
    if (fills > 0) {
      const int64_t first = op.par.min_address() / 4, last = op.par.max_address() / 4;
      for (int64_t row = first; row <= last; ++row) {
        FifoRow* r = tile.fifo_rows.find(static_cast<uint32_t>(row));
        if (!r) continue;
        const uint32_t taken = ops::fifo_fills_of_row(op, fills, row);
        for (uint32_t k = 0; k < taken && !r->fills.empty(); ++k) r->fills.pop_front();
        r->consumed += taken;
      }
    }
  }
  return true;
}

}  // namespace tinycoral::chip
