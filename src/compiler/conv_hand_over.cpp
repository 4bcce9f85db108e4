// The hand-over between two stages (conv_hand_over.h): the senders' bands cut into transfers
// (SenderCut), the schedules that send them in rounds (in_turns, gathered) and the instructions
// of a round (send). Every schedule is counted, and only the one of fewest words emitted.
//
// A transfer goes piece by piece (up to 256 bytes of one row, or whole packets of several rows):
// a narrowToWide into the sender's ring row and a ring producer to all its receivers, a ring
// consumer into a FIFO row of its own and a wideToNarrow into the interior of the padded image on
// each receiver (the host image's form, stream_input in conv_input.cpp).
#include "compiler/conv_hand_over.h"

#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "compiler/conv_packets.h"
#include "compiler/fields.h"
#include "compiler/program_parts.h"
#include "compiler/tile_batch.h"

namespace tinycoral::compiler::conv {

bool whole_image_receivers(const Stage& to) {
  return !to.halo_in && std::all_of(to.tiles.begin(), to.tiles.end(),
                                    [&](const Plan& t) { return t.layers[to.first].full; });
}

uint32_t row_readers(const Plan& src, const Stage& to, int y) {
  uint32_t mask = 0;
  for (const Plan& t : to.tiles) {
    const LayerPlan& lp = t.layers[to.first];
    if (to.halo_in && t.tile == src.tile) continue;  // (its own rows are there already)
    if (lp.cin != lp.l->cin && (src.g1 <= t.g0 || t.g1 <= src.g0)) continue;
    if (y >= lp.need_top && y < lp.need_top + lp.need_rows) mask |= tile_bit(t.tile);
  }
  return mask;
}

namespace {

// A receiver's side of a transfer.
struct Write {
  uint32_t tile = 0;  // the receiver's bit
  int at = 0;         // narrow byte address of the walk's start
  Levels walk;        // its narrow walk (words)
};

// `bytes` from narrow byte `from_at` of the sender to the tiles in `mask`, each writing them with
// its walk: `packets` >= 2 packets (the softmax gather's multi-packet form: k fills of one FIFO
// row, the last fill possibly short), else one packet of up to 256 bytes.
struct Transfer {
  int src = 0;        // sending tile
  uint32_t mask = 0;  // receiving tiles
  int from_at = 0, bytes = 0, packets = 0;
  std::vector<Write> writes;  // per receiver, in tile order
  // The sender's narrow walk (words) when not `bytes` in a row (overlapping, below).
  Levels read;
};

// What a round sends: items of one transfer, or all-gathers (`gathered`, below): transfers
// (parts) of several senders, or several of one, to the same receivers, in order, which the
// receivers take with one consumer and one wideToNarrow each. `steps[w]`: the walk levels from
// one part's write to the next's on the item's w-th receiver (none for one transfer).
struct Item {
  std::vector<const Transfer*> parts;
  std::vector<Levels> steps;
};
// A round's items have other receivers (and, gathered, other senders) and one form (packets >= 2
// or not). The round shares one FIFO row (each tile has its own wide memory), so the receivers'
// wideToNarrows and consumers and the senders' narrowToWides that differ only in their tile go
// out as one instruction (a split layer's slices handing over to the next split layer: one
// instead of one per slice).
using Round = std::vector<Item>;

bool multi_packet(const Round& round) { return round.front().parts.front()->packets >= 2; }

// ---- The transfers -------------------------------------------------------------------------

// One sender's band of layer i - 1's output (rows of the receivers' image i) cut into transfers.
// A sender computing some output groups of a split layer holds `slice` bytes of each pixel,
// channels from `ch0`: each receiver writes them into its pixels (whole pixels per packet or whole
// packets per pixel, `splittable`), from byte `off(t)` of each pixel - a receiver keeping a slice
// of the channels (a split depthwise layer) holds the sender's inside its own (`nests`).
class SenderCut {
 public:
  SenderCut(const Plan& src, const Stage& to, bool pricing, std::vector<Transfer>& out,
            bool per_receiver = false, RowRange rows = {})
      : src_(src),
        to_(to),
        i_(to.first),
        pricing_(pricing),
        out_(out),
        row_bytes_(src.out_row),
        slice_(src.out_ch),
        ch0_(src.g1 > 0 ? src.g0 * kColumns : 0),
        per_receiver_(per_receiver),
        rows_(rows) {
    full_ = whole_image_receivers(to);
    whole_rows_ =
        std::none_of(to.tiles.begin(), to.tiles.end(), [&](const Plan& t) { return sliced(t); });
    in_place_ = to.halo_in && std::any_of(to.tiles.begin(), to.tiles.end(),
                                          [&](const Plan& t) { return t.tile == src.tile; });
  }

  void cut() {
    if (const uint32_t mask = same_pixels()) {
      send_band(mask);
      return;
    }
    if (const uint32_t mask = gapless_readers()) {
      send_band(mask);
      return;
    }
    const LayerPlan& band = src_.layers[i_ - 1];
    // (The band's rows in rows_ only: a hand-over in two pieces, swap_split in conv_row_split.cpp.)
    const int oa = std::max(band.oa, rows_.first), ob = std::min(band.ob, rows_.end);
    if (per_receiver_ && !src_.pixel_band() && !in_place_) {
      // Each receiver's rows of the band on their own, rows that several read sent to each.
      for (const Plan& t : to_.tiles) {
        const LayerPlan& lp = t.layers[i_];
        send_runs(std::max(oa, lp.need_top), std::min(ob, lp.need_top + lp.need_rows),
                  tile_bit(t.tile));
      }
      return;
    }
    // A pixel band (Plan::pa, pb) computed its first and last rows only in part: those parts go
    // alone, the rows between as any band's.
    int ya = oa, yb = ob, last_piece = 0;
    if (src_.pixel_band()) {
      const int w = band.l->ow, bytes = row_bytes_ / w;
      if (src_.pa > ya * w) {
        send_piece(ya, (src_.pa - ya * w) * bytes,
                   (std::min(src_.pb, (ya + 1) * w) - ya * w) * bytes);
        ++ya;
      }
      if (yb > ya && src_.pb < yb * w) {
        --yb;  // the last row goes as a piece, after the whole rows
        last_piece = (src_.pb - yb * w) * bytes;
      }
    }
    send_runs(ya, yb);
    if (last_piece > 0) send_piece(yb, 0, last_piece);
  }

 private:
  // Rows from one row on that go in one transfer (packets > 0), or one row in pieces.
  struct Run {
    int rows = 1, packets = 0;
    uint32_t mask = 0;
  };

  // The receivers that read row y (a receiver computing some groups of a split depthwise layer
  // reads only their channels).
  uint32_t readers(int y) const { return row_readers(src_, to_, y); }
  bool sliced(const Plan& t) const { return src_.g1 > 0 && slice_ != t.layers[i_].cin; }
  int off(const Plan& t) const {
    const LayerPlan& lp = t.layers[i_];
    return ch0_ - (lp.cin != lp.l->cin ? t.g0 * kColumns : 0);
  }
  Levels slice_walk(const Plan& t, int bytes, int rows) const {
    return Levels{
        {1, slice_ / 4}, {t.layers[i_].cin / 4, bytes / slice_}, {t.layers[i_].row_words(), rows}};
  }

  // Whether m rows may go as one transfer whose last packet is short.
  // Rows over a packet may end inside one (the last fill short). Rows that end inside a packet
  // also by the wideToNarrow's own rule (rows_in_one_transfer, as the host's image runs;
  // streams_whole for receivers writing a slice of each pixel): a 1,344-byte row of v2's 56 x 56
  // x 24 bands as one transfer of 6 packets, the last short (gen2021 PoseNet word 6657 sends 960
  // bytes as fills of 256, 256, 256 and 192), not 5 and a short rest; two of PoseNet's 1,984-byte
  // slice rows (31 pixels of 64 channels) into a head band as one of 16 packets, not four. Not
  // while pricing: the search then picks layouts the simulator runs slower (v1 0.5 1.300, 1.0
  // 3.614, v2 4.232 against 1.276, 3.611 and 4.174 ms; with the all-gathers priced too, v1 0.25
  // and 0.5 ran faster, 0.681 and 1.271, but v2 4.226).
  bool inside(int m) const {
    if (ends_inside_a_packet(row_bytes_, m * row_bytes_)) return true;
    if (pricing_ || (m * row_bytes_) % kPiece == 0) return false;
    if (whole_rows_) return rows_in_one_transfer(row_bytes_, m);
    return std::all_of(to_.tiles.begin(), to_.tiles.end(), [&](const Plan& t) {
      return !sliced(t) ? rows_in_one_transfer(row_bytes_, m)
                        : streams_whole(slice_walk(t, row_bytes_, m), m * row_bytes_);
    });
  }

  // Several whole rows for the same tiles (contiguous in the sender's output) go in one transfer
  // when they make 2 to kHandOverPackets packets (inside) or, short rows, fit one packet; each
  // receiver drops them into its image's rows with a 2-level walk.
  // (Written in place, the rows lie in the sender's padded image: one row a transfer; a sender
  // that is no receiver's, its output as usual.)
  // (`only`: the receivers the run may go to, all by default.)
  Run run_at(int y, int end, uint32_t only = ~0u) const {
    Run run{1, inside(1) ? packets_of(row_bytes_) : 0, readers(y) & only};
    if (in_place_) return run;
    uint32_t together = run.mask;
    for (int m = 2; y + m <= end && m * row_bytes_ <= kHandOverPackets * kPiece &&
                    (full_ || (readers(y + m - 1) & only) == run.mask);
         ++m) {
      together |= readers(y + m - 1) & only;
      if ((m * row_bytes_ % kPiece == 0 && m * row_bytes_ >= 2 * kPiece) || inside(m)) {
        run = {m, packets_of(m * row_bytes_), together};
      } else if (run.packets == 0 && m * row_bytes_ <= kPiece) {
        run = {m, 1, together};
      }
    }
    return run;
  }

  // A transfer to the tiles in `mask`, receiver t writing from narrow byte narrow(t) with the
  // walk walk(t).
  void add(int from_at, int bytes, int packets, uint32_t mask, const auto& narrow,
           const auto& walk) {
    Transfer t{src_.tile, mask, from_at, bytes, packets, {}};
    for (const Plan& r : to_.tiles)
      if (mask & tile_bit(r.tile)) t.writes.push_back({tile_bit(r.tile), narrow(r), walk(r)});
    out_.push_back(std::move(t));
  }

  int from_at(int y) const {
    if (in_place_)
      for (const Plan& t : to_.tiles)
        if (t.tile == src_.tile)
          return t.layers[i_].pixel(y - t.layers[i_].top, t.layers[i_].l->pad_left);
    return src_.out_base + (y - src_.layers[i_ - 1].oa) * src_.out_row;
  }

  void send_rows(int y, const Run& run) {
    add(
        from_at(y), run.rows * row_bytes_, run.packets, run.mask,
        [&](const Plan& t) {
          const LayerPlan& lp = t.layers[i_];
          return lp.pixel(y - lp.top, lp.l->pad_left) + off(t);
        },
        [&](const Plan& t) {
          if (sliced(t)) return slice_walk(t, row_bytes_, run.rows);
          return Levels{{1, row_bytes_ / 4}, {t.layers[i_].row_words(), run.rows}};
        });
  }

  // A pixel band handing over to a stage in the same pixel bands: the receivers that compute the
  // sender's pixels (all of them exactly those), else 0. Its pixels, one run in its output and
  // in their gapless rows (pixel_stage), go to them alone as one run of bytes, not as rows and
  // pieces of rows that the neighbouring bands also take.
  uint32_t same_pixels() const {
    if (!src_.pixel_band() || to_.halo_in || in_place_) return 0;
    if (src_.g1 > 0 && kPiece % slice_ != 0) return 0;
    uint32_t mask = 0;
    for (const Plan& t : to_.tiles) {
      if (!t.pixel_band()) return 0;
      if (t.pb <= src_.pa || t.pa >= src_.pb) continue;
      if (t.pa != src_.pa || t.pb != src_.pb) return 0;
      mask |= tile_bit(t.tile);
    }
    return mask;
  }
  // Rows [ya, yb) in runs (run_at) to their readers among `only`: whole packets as rows, the
  // rest as pieces.
  void send_runs(int ya, int yb, uint32_t only = ~0u) {
    for (int y = ya; y < yb;) {
      const Run run = run_at(y, yb, only);
      if (run.mask != 0) {
        if (run.packets > 0)
          send_rows(y, run);
        else
          send_pieces(y, run.mask);
      }
      y += run.rows;
    }
  }
  // A pixel band handing over to receivers that each read all of its rows and keep them
  // gapless (no padding, every pixel's bytes the sender's): its pixels are one run in their
  // images too, so they go to them as one run (the pool after v2's pixel stages: one transfer
  // a sender, not pieces of its first and last rows and its whole rows). The readers, else 0.
  uint32_t gapless_readers() const {
    if (!src_.pixel_band() || to_.halo_in || in_place_) return 0;
    if (src_.g1 > 0 && kPiece % slice_ != 0) return 0;
    const LayerPlan& band = src_.layers[i_ - 1];
    const int w = band.l->ow, ya = src_.pa / w, yb = (src_.pb - 1) / w + 1;
    uint32_t mask = 0;
    for (int y = ya; y < yb; ++y) mask |= readers(y);
    for (const Plan& t : to_.tiles) {
      if (!(mask & tile_bit(t.tile))) continue;
      const LayerPlan& lp = t.layers[i_];
      if (lp.need_top > ya || lp.need_top + lp.need_rows < yb || lp.wp != w || lp.extra != 0 ||
          lp.l->pad_left != 0 || lp.cin * w != row_bytes_)
        return 0;
    }
    return mask;
  }

  void send_band(uint32_t mask) {
    const LayerPlan& band = src_.layers[i_ - 1];
    const int w = band.l->ow, px = row_bytes_ / w;
    // (Gapless rows: the band's pixels run on from one row into the next, so a slice's pixel
    // index wraps at the row's width.)
    send_run({src_.pa / w, src_.pa % w, w}, from_at(band.oa) + (src_.pa - band.oa * w) * px, mask,
             0, (src_.pb - src_.pa) * px);
  }

  // Bytes [from, to) of row y (a pixel band's part of a row) to the tiles that read the row.
  void send_piece(int y, int from, int to) {
    if (const uint32_t mask = readers(y)) send_pieces(y, mask, from, to);
  }

  // One row (bytes [from, to) of it).
  void send_pieces(int y, uint32_t mask, int from = 0, int to = -1) {
    send_run({y, 0, 0}, from_at(y), mask, from, to < 0 ? row_bytes_ : to);
  }

  // Where a run of the sender's pixels starts in the receivers' image: row y, column x; `wrap`:
  // the width at which a slice's pixels go on in the next row (0: they stay in row y).
  struct RunStart {
    int y, x, wrap;
  };
  // Bytes [from, to) of the sender's run that starts at byte `src`: whole 256-byte packets up to
  // kHandOverPackets at a time (whole slices, where the receivers take slices of more than a
  // packet), the rest as one short packet.
  void send_run(RunStart start, int src, uint32_t mask, int from, int to) {
    for (int at = from, bytes = 0; at < to; at += bytes) {
      int whole = std::min(kHandOverPackets, (to - at) / kPiece);
      if (src_.g1 > 0 && slice_ > kPiece) whole -= whole % (slice_ / kPiece);
      bytes = whole >= 2 ? whole * kPiece : std::min(kPiece, to - at);
      add(
          src + at, bytes, whole >= 2 ? whole : 1, mask,
          [&](const Plan& t) {
            const LayerPlan& lp = t.layers[i_];
            if (sliced(t)) {
              const int x = start.x + at / slice_;
              const int y = start.wrap > 0 ? start.y + x / start.wrap : start.y;
              return lp.pixel(y - lp.top, lp.l->pad_left + (start.wrap > 0 ? x % start.wrap : x)) +
                     off(t);
            }
            return lp.pixel(start.y - lp.top, lp.l->pad_left + start.x) + at;
          },
          [&](const Plan& t) {
            if (sliced(t)) return slice_walk(t, bytes, 1);
            return whole >= 2 ? Levels{{1, bytes / 4}}
                              : Levels{{1, bytes / 4}, {t.layers[i_].row_words(), 1}};
          });
    }
  }

  const Plan& src_;
  const Stage& to_;
  size_t i_;
  bool pricing_;
  std::vector<Transfer>& out_;
  int row_bytes_, slice_, ch0_;
  bool full_ = false, whole_rows_ = false;
  bool per_receiver_ = false;  // each receiver's rows cut on their own
  RowRange rows_;
  bool in_place_ = false;  // the sender wrote its rows into the receivers' image on its own tile
};

std::vector<Transfer> transfers_of(const Stage& from, const Stage& to, bool pricing,
                                   bool per_receiver = false,
                                   const std::vector<RowRange>& rows = {}) {
  std::vector<Transfer> transfers;
  for (size_t k = 0; k < from.tiles.size(); ++k)
    SenderCut(from.tiles[k], to, pricing, transfers, per_receiver,
              rows.empty() ? RowRange{} : rows[k])
        .cut();
  return transfers;
}

// ---- Schedules in turns ----------------------------------------------------------------------

// The transfers (indices) of each sender in order (senders in order of their first transfer),
// and those each receiver takes.
struct Queues {
  std::vector<std::vector<size_t>> by_sender;
  std::array<std::vector<size_t>, kTiles> by_receiver;
};

Queues queues_of(const std::vector<Transfer>& transfers) {
  Queues q;
  std::vector<int> sender_of(kTiles, -1);
  for (size_t k = 0; k < transfers.size(); ++k) {
    const auto src = static_cast<size_t>(transfers[k].src);
    if (sender_of[src] < 0) {
      sender_of[src] = static_cast<int>(q.by_sender.size());
      q.by_sender.emplace_back();
    }
    q.by_sender[static_cast<size_t>(sender_of[src])].push_back(k);
    for (int r = 0; r < kTiles; ++r)
      if (transfers[k].mask & tile_bit(r)) q.by_receiver[static_cast<size_t>(r)].push_back(k);
  }
  return q;
}

// Which senders a round offers a place first: in tile order, the senders with the most transfers
// left first, or those whose next transfer has the shape (packets, first receiver's write) most
// of the senders' next transfers have (their wideToNarrows and consumers merge).
enum class Senders { kInTileOrder, kLongestFirst, kCommonShapeFirst };

std::vector<size_t> senders_in(Senders order, const std::vector<Transfer>& transfers,
                               const Queues& q, const std::vector<size_t>& next_of_sender) {
  std::vector<size_t> senders(q.by_sender.size());
  for (size_t s = 0; s < senders.size(); ++s) senders[s] = s;
  auto left = [&](size_t s) { return q.by_sender[s].size() - next_of_sender[s]; };
  if (order == Senders::kLongestFirst)
    std::stable_sort(senders.begin(), senders.end(),
                     [&](size_t a, size_t b) { return left(a) > left(b); });
  if (order == Senders::kCommonShapeFirst) {
    // (References: this compares every pair of senders, and a copied walk is an allocation.)
    static const Levels kNoWalk;
    auto shape = [&](size_t s) {
      const Transfer& t = transfers[q.by_sender[s][next_of_sender[s]]];
      return std::tuple<int, int, const Levels&>{
          t.packets, t.writes.empty() ? 0 : t.writes.front().at,
          t.writes.empty() ? kNoWalk : t.writes.front().walk};
    };
    std::vector<size_t> alike(senders.size(), 0);
    for (size_t a = 0; a < senders.size(); ++a)
      for (size_t b = 0; b < senders.size() && left(a) > 0; ++b)
        if (left(b) > 0 && shape(a) == shape(b)) ++alike[a];
    std::stable_sort(senders.begin(), senders.end(),
                     [&](size_t a, size_t b) { return alike[a] > alike[b]; });
  }
  return senders;
}

// Rounds that each take the next transfer of every sender whose receivers no other transfer of
// the round has, all of one form; per sender the transfers keep their order. `in_order`: per
// receiver too (the order they were made in). Without it a receiver takes them in any order -
// every transfer writes bytes of its image no other transfer writes (each row or channel slice
// comes from the one sender that computed it) - so a band pipeline's senders each handing rows
// to their neighbours go in a few rounds, not one round per sender; with it, rounds of transfers
// of one shape (which merge into fewer instructions) can come out fewer instructions in all.
std::vector<Round> in_turns(const std::vector<Transfer>& transfers, const Queues& q, bool in_order,
                            Senders order = Senders::kInTileOrder) {
  std::vector<Round> rounds;
  std::vector<size_t> next_of_sender(q.by_sender.size(), 0);
  std::array<size_t, kTiles> next_of_receiver{};
  // Whether transfer k is each of its receivers' next.
  auto next_for_receivers = [&](size_t k) {
    for (int r = 0; r < kTiles; ++r) {
      const auto queue = static_cast<size_t>(r);
      if ((transfers[k].mask & tile_bit(r)) && q.by_receiver[queue][next_of_receiver[queue]] != k)
        return false;
    }
    return true;
  };
  for (size_t sent = 0; sent < transfers.size();) {
    Round round;
    uint32_t receivers = 0;
    for (size_t s : senders_in(order, transfers, q, next_of_sender)) {
      if (next_of_sender[s] == q.by_sender[s].size()) continue;
      const size_t k = q.by_sender[s][next_of_sender[s]];
      const Transfer& t = transfers[k];
      const bool ready = (t.mask & receivers) == 0 &&
                         (round.empty() || multi_packet(round) == (t.packets >= 2)) &&
                         (!in_order || next_for_receivers(k));
      if (!ready) continue;
      round.push_back({{&t}, {}});
      receivers |= t.mask;
      ++next_of_sender[s];
      for (int r = 0; r < kTiles; ++r)
        if (t.mask & tile_bit(r)) ++next_of_receiver[static_cast<size_t>(r)];
    }
    sent += round.size();
    rounds.push_back(std::move(round));
  }
  return rounds;
}

// ---- All-gathers ----------------------------------------------------------------------------
// The transfers of several senders to the same receivers go in one round as one item (send,
// below): the receivers' consumer takes all their packets, in the order the producers are issued
// (docs/chip.md "Producers that send to tiles run in program order"), as fills of one FIFO row,
// and their wideToNarrow walks one part's write after the other, one or two walk levels more.
// The fills must be whole packets (a part's short last fill would leave a gap in the stream) or
// one short packet per part: the wideToNarrow's short-row form, one iteration of the outer
// levels per fill (DeepLab gen2021 word 9628). A transfer ending inside a packet goes as its
// whole packets and the short rest where every receiver's walk is runs of equal length at one
// stride (an unpadded image: the pointwise layer after a split depthwise).

// A walk as n runs of `run` words, `stride` words apart.
struct Runs {
  int64_t run = 0, stride = 0, n = 1;
};

std::optional<Runs> runs_of(const Levels& walk) {
  Levels l;
  for (const auto& level : walk)
    if (level.second > 1) l.push_back(level);
  if (l.empty() || l[0].first != 1) return std::nullopt;
  Runs r{l[0].second, l[0].second, 1};
  size_t k = 1;
  for (; k < l.size() && l[k].first == r.run; ++k) r.run *= l[k].second;
  r.stride = r.run;
  if (k < l.size()) r.stride = l[k].first, r.n = l[k++].second;
  for (; k < l.size() && l[k].first == r.stride * r.n; ++k) r.n *= l[k].second;
  if (k < l.size()) return std::nullopt;
  return r;
}

// A transfer ending inside a packet as two parts, its whole packets and the short rest, into
// `parts` (false when a receiver's walk does not cut there).
bool split_tail(const Transfer& t, std::vector<Transfer>& parts) {
  if (t.packets < 2 || t.bytes % kPiece == 0) return false;
  const int whole = t.bytes / kPiece * kPiece;
  Transfer head = t, rest = t;
  head.bytes = whole;
  head.packets = whole / kPiece;
  rest.from_at += whole;
  rest.bytes -= whole;
  rest.packets = 1;
  for (size_t w = 0; w < t.writes.size(); ++w) {
    const std::optional<Runs> r = runs_of(t.writes[w].walk);
    const int64_t words = whole / 4;
    if (!r) return false;
    if (r->stride == r->run || r->n == 1) {
      head.writes[w].walk = {{1, words}};
      rest.writes[w].walk = {{1, r->run * r->n - words}};
      rest.writes[w].at += whole;
    } else {
      if (words % r->run != 0) return false;
      const int64_t n = words / r->run;
      head.writes[w].walk = {{1, r->run}, {r->stride, n}};
      rest.writes[w].walk = {{1, r->run}, {r->stride, r->n - n}};
      rest.writes[w].at += static_cast<int>(4 * r->stride * n);
    }
  }
  parts.push_back(std::move(head));
  parts.push_back(std::move(rest));
  return true;
}

// A transfer ending inside a packet as whole packets: its words as two halves of half the
// packets' words each, the second ending at the transfer's end, so that the words between them go
// twice (and land twice where they belong): B words in P packets as [0, 32 P) and [B - 32 P, B).
// The same packets (P = ceil(B / 64)), one producer, and parts that gather like whole ones.
// Nothing where a receiver's walk (runs of equal length at one stride) does not cut at the halves.
std::optional<Transfer> overlapping(const Transfer& t) {
  if (t.packets < 2 || t.bytes % kPiece == 0 || t.bytes % 4 != 0 || !t.read.empty())
    return std::nullopt;
  const int64_t words = t.bytes / 4, half = t.packets * kPiece / 8, back = words - half;
  if (back <= 0) return std::nullopt;
  Transfer whole = t;
  whole.bytes = t.packets * kPiece;
  whole.read = {{1, half}, {back, 2}};
  for (Write& w : whole.writes) {
    const std::optional<Runs> r = runs_of(w.walk);
    if (!r) return std::nullopt;
    if (r->stride == r->run || r->n == 1) {
      w.walk = {{1, half}, {back, 2}};
      continue;
    }
    if (half % r->run != 0) return std::nullopt;
    w.walk = {{1, r->run}, {r->stride, half / r->run}, {r->stride * (back / r->run), 2}};
  }
  return whole;
}

// Parts of one shape (receivers, size, walks) gather when their places on every receiver step
// regularly: one level (a, a + d, a + 2d ...) or two (c steps of d1, those c2 times d2). The
// steps per receiver, or nothing.
std::optional<std::vector<Levels>> steps_of(const std::vector<const Transfer*>& ps) {
  const size_t k = ps.size();
  const Transfer& t = *ps.front();
  if (k * static_cast<size_t>(t.packets) > static_cast<size_t>(kHandOverPackets))
    return std::nullopt;
  // Inner count: where the first receiver's step changes.
  size_t c = 1;
  auto at = [&](size_t j, size_t w) { return int64_t{ps[j]->writes[w].at}; };
  while (c < k && at(c, 0) - at(c - 1, 0) == at(1, 0) - at(0, 0)) ++c;
  if (k % c != 0) return std::nullopt;
  std::vector<Levels> out;
  for (size_t w = 0; w < t.writes.size(); ++w) {
    const int64_t d1 = at(1, w) - at(0, w), d2 = at(c % k, w) - at(0, w);
    for (size_t j = 0; j < k; ++j)
      if (at(j, w) !=
          at(0, w) + static_cast<int64_t>(j % c) * d1 + static_cast<int64_t>(j / c) * d2)
        return std::nullopt;
    if (d1 % 4 != 0 || d2 % 4 != 0 || d1 == 0) return std::nullopt;
    Levels steps{{d1 / 4, static_cast<int64_t>(c)}};
    if (c < k) steps.push_back({d2 / 4, static_cast<int64_t>(k / c)});
    size_t levels = steps.size();
    for (size_t l = 0; l < t.writes[w].walk.size(); ++l)
      levels += l == 0 || t.writes[w].walk[l].second > 1 ? 1 : 0;
    if (levels > 6) return std::nullopt;
    out.push_back(std::move(steps));
  }
  return out;
}

// The items of `parts`: parts that cannot gather alone, then per shape all its parts in one item
// when they step regularly, else runs of consecutive parts that do.
std::vector<Item> gather_items(const std::vector<Transfer>& parts) {
  std::vector<std::vector<const Transfer*>> shapes;
  std::map<std::string, size_t> shape_of;
  std::vector<Item> items;
  for (const Transfer& p : parts) {
    if (!(p.packets == 1 && p.bytes < kPiece) && p.bytes != p.packets * kPiece) {
      items.push_back({{&p}, {}});
      continue;
    }
    // (A key, not text: equal where the shapes' texts would be.)
    Fields key(Fields::Form::kKey);
    key.dec(p.mask).dec(p.packets).dec(p.bytes);
    for (const Write& w : p.writes) key.dec(w.tile).walk(w.walk, 6);
    auto [it, fresh] = shape_of.emplace(std::move(key).take(), shapes.size());
    if (fresh) shapes.emplace_back();
    shapes[it->second].push_back(&p);
  }
  for (std::vector<const Transfer*>& ps : shapes) {
    std::stable_sort(ps.begin(), ps.end(), [](const Transfer* a, const Transfer* b) {
      return a->writes.front().at < b->writes.front().at;
    });
    if (ps.size() > 1)
      if (auto steps = steps_of(ps)) {
        items.push_back({ps, std::move(*steps)});
        continue;
      }
    for (size_t j = 0; j < ps.size();) {
      Item item{{ps[j]}, {}};
      for (++j; j < ps.size(); ++j) {
        std::vector<const Transfer*> more = item.parts;
        more.push_back(ps[j]);
        auto steps = steps_of(more);
        if (!steps) break;
        item = {std::move(more), std::move(*steps)};
      }
      items.push_back(std::move(item));
    }
  }
  return items;
}

// Rounds of items: the largest first, each round items of other receivers and senders.
std::vector<Round> rounds_of(std::vector<Item> items) {
  std::stable_sort(items.begin(), items.end(),
                   [](const Item& a, const Item& b) { return a.parts.size() > b.parts.size(); });
  std::vector<Round> rounds;
  std::vector<bool> done(items.size(), false);
  for (size_t left = items.size(); left > 0;) {
    Round round;
    uint32_t receivers = 0, senders = 0;
    for (size_t q = 0; q < items.size(); ++q) {
      if (done[q]) continue;
      const Item& item = items[q];
      uint32_t from = 0;
      for (const Transfer* p : item.parts) from |= tile_bit(p->src);
      const bool multi = item.parts.front()->packets >= 2;
      if ((item.parts.front()->mask & receivers) || (from & senders) ||
          (!round.empty() && multi_packet(round) != multi))
        continue;
      round.push_back(item);
      receivers |= item.parts.front()->mask;
      senders |= from;
      done[q] = true;
      --left;
    }
    rounds.push_back(std::move(round));
  }
  return rounds;
}

// The all-gather schedule; `parts` keeps the transfers its items point to. Without `split` a
// transfer ending inside a packet goes alone (as in turns) while the others gather: one producer
// for it instead of two, better where its parts would not gather (v2's row bands into a split
// depthwise layer: a band of 3.5 packets on each side of the receivers' band edge; 95 words
// instead of 139).
// How the gathered schedule takes a transfer ending inside a packet: split, whole, or as whole
// packets overlapping (else split).
enum class Tails { kSplit, kWhole, kOverlapping };

std::vector<Round> gathered(const std::vector<Transfer>& transfers, std::vector<Transfer>& parts,
                            Tails tails = Tails::kSplit) {
  parts.reserve(2 * transfers.size());  // (the items point into it)
  for (const Transfer& t : transfers) {
    if (tails == Tails::kOverlapping)
      if (std::optional<Transfer> whole = overlapping(t)) {
        parts.push_back(std::move(*whole));
        continue;
      }
    if (tails == Tails::kWhole || !split_tail(t, parts)) parts.push_back(t);
  }
  return rounds_of(gather_items(parts));
}

// ---- A round's instructions ------------------------------------------------------------------

// The narrow walk of a gather's w-th receiver: one part's walk, its levels of one iteration
// dropped, then the steps from part to part (one transfer's is its write's walk).
Levels gather_walk(const Item& item, size_t w) {
  const Transfer& t = *item.parts.front();
  Levels walk;
  for (const auto& level : t.writes[w].walk)
    if (level.second > 1 || walk.empty()) walk.push_back(level);
  walk.insert(walk.end(), item.steps[w].begin(), item.steps[w].end());
  return walk;
}

// The receivers' side: a wideToNarrow from FIFO row `fifo` on each, then a ring consumer into it.
void receive(Emitter& e, const Round& round, int fifo) {
  {
    TileBatch writes(e);
    for (const Item& item : round) {
      const Transfer& t = *item.parts.front();
      const int fills = static_cast<int>(item.parts.size()) * t.packets;
      for (size_t w = 0; w < t.writes.size(); ++w) {
        // (One part's walk is its write's: read in place, the common case, not copied.)
        const Levels joined = item.parts.size() == 1 ? Levels{} : gather_walk(item, w);
        const Levels& walk = item.parts.size() == 1 ? t.writes[w].walk : joined;
        // (A gather's walk names its levels, as Google's do: DeepLab gen2021 word 9628.)
        Fields fields(writes);
        fields("w.addr=").hex(static_cast<uint64_t>(fifo));
        if (fills >= 2)
          fields(" w=(0 x ").dec(fills)(") w.rows=1");
        else
          fields(" w=(1 x 1)");
        fields(" n.addr=").hex(static_cast<uint64_t>(t.writes[w].at / 4))(" n=").walk(walk, 6);
        fields(" n.lvl_mask=");
        if (item.parts.size() > 1)
          fields.hex((1u << walk.size()) - 1);
        else
          fields("0x01");
        fields(fills >= 2 ? " sync.en0=1 sync.id=14 sync.en1=1 "
                            "sync.val=0x08000 sync.en2=1 tail_en870=1"
                          : " mode=1 fill_size=128 sync.en0=1 sync.id=14 "
                            "sync.wait_lvl=1 sync.en1=1 sync.val=0x08000 sync.en2=1 "
                            "sync.dec_lvl=1 sync.dec=-1 sync.dec_mode=3 tail_en870=1");
        writes.add(t.writes[w].tile, "w2n", std::move(fields).take());
      }
    }
  }
  TileBatch consumers(e);
  for (const Item& item : round) {
    const Transfer& t = *item.parts.front();
    const int fills = static_cast<int>(item.parts.size()) * t.packets;
    Fields fields(consumers);
    fields("addr=").hex(static_cast<uint64_t>(fifo));
    if (fills >= 2)
      fields(" dst=(0 x ")
          .dec(fills)(") slots=1 mode=1 s_id=0x0b s_val=-64 s_cnt=1 s_en_b=1 s_y=1");
    else
      fields(" dst=(1 x 1) cbuf=1 slots=1 mode=3 s_id=0x2b s_val=-64 s_cnt=1 s_en_b=1 s_y=1");
    consumers.add(t.mask, "ringcons0", std::move(fields).take());
  }
}

// The senders' narrowToWides of `sent` (parts of different senders) into their ring rows.
// The sender's narrow walk: `bytes` in a row, or its levels (each with a non-zero stride).
void sender_walk(Fields& fields, const Transfer& t) {
  if (t.read.empty()) {
    fields(" n=").narrow_walk(t.bytes / 4)(" n.lvl_mask=0x01");
    return;
  }
  fields(" n=").walk(t.read, 6)(" n.lvl_mask=").hex((1u << t.read.size()) - 1);
}

// A sender's narrowToWide of its whole transfer into wide row `row`, waiting on the credits of
// counter `credits` (whoever reads the row gives them back): its ring row (RING_WRITE, a producer
// reads it) or a FIFO row it copies through on its own tile (WIDE_TO_NARROW, its wideToNarrow).
constexpr int kRingWriteCredits = 16, kWideToNarrowCredits = 11;
std::string into_row(const TileBatch& batch, const Transfer& t, int row, int credits) {
  Fields fields(batch);
  fields("n.addr=").hex(static_cast<uint64_t>(t.from_at / 4));
  sender_walk(fields, t);
  fields(" w.addr=")
      .hex(static_cast<uint64_t>(row))(" w=(0 x ")
      .dec(t.packets)(") w.rows=1 sync.en0=1 sync.id=")
      .dec(credits)(" sync.en1=1 sync.val=0x0ffff sync.en2=1 sync.f45=1 tail_lvl=1");
  return std::move(fields).take();
}

void narrow_to_wide(Emitter& e, const std::vector<const Transfer*>& sent, bool multi) {
  TileBatch reads(e);
  for (const Transfer* t : sent) {
    if (multi) {
      reads.add(tile_bit(t->src), "n2w", into_row(reads, *t, kRingFifo, kRingWriteCredits));
      continue;
    }
    Fields fields(reads);
    fields("n.addr=")
        .hex(static_cast<uint64_t>(t->from_at / 4))(" n=")
        .narrow_walk(t->bytes / 4)(" n.lvl_mask=0x01 w.addr=")
        .hex(kRingFifo)(
            " w=(1 x 1) w.circ=1 w.rows=1 sync.en0=1 sync.f1=1 sync.id=16 "
            "sync.wait_lvl=1 sync.en1=1 sync.val=0xffff sync.en2=1 sync.f45=1 "
            "tail_lvl=1");
    reads.add(tile_bit(t->src), "n2w", std::move(fields).take());
  }
}

// A transfer's ring producer from its sender's ring row to its receivers.
void produce(Emitter& e, const Transfer& t, bool multi, int& ordinal) {
  if (!multi) {
    ring_send(e, t.src, kRingFifo, t.mask, ordinal++);
    return;
  }
  Fields f(e);
  f("tiles=")
      .hex(tile_bit(t.src))(" addr=")
      .hex(kRingFifo)(" src=(1 x 1)(0 x ")
      .dec(t.packets)(") sdims=1 cbuf=1 slots=1 mode=3 pcfg=20 r0.id=0x51 r0.val=")
      .dec(ordinal++)(" r0.en_a=1 r0.en_b=1 r1.id=0x2d r1.val=1 r1.en_a=1 r1.en_b=1 dest=")
      .hex(t.mask);
  e.add("ringprod", std::move(f).take());
}

// The senders' side in runs of parts of different senders (a gather may take several parts of
// one sender: each goes through the sender's ring row after the one before, as in successive
// rounds), the producers in the order the receivers take the parts. (A multi-packet producer
// waits for its narrowToWide, issued after it; a one-packet one follows it.)
void send_parts(Emitter& e, const Round& round, int& ordinal) {
  const bool multi = multi_packet(round);
  std::vector<const Transfer*> order;
  for (const Item& item : round) order.insert(order.end(), item.parts.begin(), item.parts.end());
  std::vector<const Transfer*> sent;
  for (size_t at = 0; at < order.size();) {
    sent.clear();
    for (uint32_t from = 0; at < order.size() && !(from & tile_bit(order[at]->src)); ++at) {
      from |= tile_bit(order[at]->src);
      sent.push_back(order[at]);
    }
    if (!multi) narrow_to_wide(e, sent, multi);
    for (const Transfer* t : sent) produce(e, *t, multi, ordinal);
    if (multi) narrow_to_wide(e, sent, multi);
  }
}

// A multi-packet transfer whose only receiver is its sender (a tile moving its own rows to where
// the next stage keeps them).
bool to_itself(const Item& item) {
  const Transfer& t = *item.parts.front();
  return item.parts.size() == 1 && t.packets >= 2 && t.mask == tile_bit(t.src);
}

// Such transfers copied on their tiles instead of over the ring: a narrowToWide of the sender's
// walk into FIFO row `fifo`, then the wideToNarrow of the receiver's walk out of it, one fill a
// packet as the ring consumer would have left them (Google's local copy, DeepLab gen2021 words
// 9438-9445, tile 0's at 9424-9431 with a head: the narrowToWide waits on WIDE_TO_NARROW
// credits, the wideToNarrow on NARROW_TO_WIDE). No ring producer, no ring consumer; the copies of
// several tiles with the same walks go out once.
void copy_locally(Emitter& e, const std::vector<const Transfer*>& copies, int fifo) {
  {
    TileBatch reads(e);
    for (const Transfer* t : copies)
      reads.add(tile_bit(t->src), "n2w", into_row(reads, *t, fifo, kWideToNarrowCredits));
  }
  TileBatch writes(e);
  for (const Transfer* t : copies) {
    const Write& w = t->writes.front();
    Fields fields(writes);
    fields("w.addr=")
        .hex(static_cast<uint64_t>(fifo))(" w=(0 x ")
        .dec(t->packets)(") w.rows=1 n.addr=")
        .hex(static_cast<uint64_t>(w.at / 4))(" n=")
        .walk(w.walk, 6)(
            " n.lvl_mask=0x01 sync.en0=1 sync.f1=1 sync.id=13 sync.en1=1 "
            "sync.val=0x08000 sync.en2=1 tail_en870=1");
    writes.add(w.tile, "w2n", std::move(fields).take());
  }
}

// A round's instructions through FIFO row `fifo`: `copies` on their tiles, the rest over the ring.
void send_round(Emitter& e, const std::vector<const Transfer*>& copies, const Round& ring, int fifo,
                int& ordinal) {
  if (!copies.empty()) copy_locally(e, copies, fifo);
  if (ring.empty()) return;
  receive(e, ring, fifo);
  send_parts(e, ring, ordinal);
}

// A round through FIFO row `piece` (a fence after every kInputRows rows: each row's writer runs
// once per fence region). Its transfers to their own senders are copied on the tile where that
// takes fewer words (a copy's instructions do not join those of the ring's receivers and senders
// on other tiles).
void send(Emitter& e, const Round& round, int& piece, int& ordinal) {
  if (piece > 0 && piece % kInputRows == 0) tile_fence(e, "counters=0x1ffff units=0x3ff");
  const int fifo = kInputFifo + 4 * (piece++ % kInputRows);
  std::vector<const Transfer*> copies;
  Round ring;
  for (const Item& item : round)
    if (to_itself(item))
      copies.push_back(item.parts.front());
    else
      ring.push_back(item);
  if (!copies.empty()) {
    Emitter with = Emitter::counting(), without = Emitter::counting();
    // (Each trial counts from the round's first ordinal; only the chosen one moves it on. A
    // counting `e` takes the chosen trial's count instead of counting the round a third time.)
    int with_ordinal = ordinal, without_ordinal = ordinal;
    send_round(with, copies, ring, fifo, with_ordinal);
    send_round(without, {}, round, fifo, without_ordinal);
    const bool copied = with.words() < without.words();
    if (e.only_counts()) {
      e.add_counted(copied ? with : without);
      ordinal = copied ? with_ordinal : without_ordinal;
      return;
    }
    if (copied) {
      send_round(e, copies, ring, fifo, ordinal);
      return;
    }
  }
  send_round(e, {}, round, fifo, ordinal);
}

void emit_rounds(Emitter& e, const std::vector<Round>& rounds, int& ordinal) {
  int piece = 0;
  for (const Round& round : rounds) send(e, round, piece, ordinal);
  tile_fence(e, "counters=0x1ffff units=0x3ff");
}

// `rounds` counted on an emitter of their own from `ordinal` (which moves on past them).
Emitter counted(const std::vector<Round>& rounds, int& ordinal) {
  Emitter count = Emitter::counting();
  emit_rounds(count, rounds, ordinal);
  return count;
}

// The seven schedules of one cut of the rows into `schedules`: in turns (receivers in order, in
// any order, longest senders first, common shapes first) and gathered (tails split, whole,
// overlapping; their items point into `parts`).
void add_schedules(std::vector<std::vector<Round>>& schedules, const std::vector<Transfer>& t,
                   const Queues& q, std::array<std::vector<Transfer>, 3>& parts) {
  schedules.push_back(in_turns(t, q, true));
  schedules.push_back(in_turns(t, q, false));
  schedules.push_back(in_turns(t, q, false, Senders::kLongestFirst));
  schedules.push_back(in_turns(t, q, false, Senders::kCommonShapeFirst));
  schedules.push_back(gathered(t, parts[0]));
  schedules.push_back(gathered(t, parts[1], Tails::kWhole));
  schedules.push_back(gathered(t, parts[2], Tails::kOverlapping));
}

// The live ScheduleWordsCheck (tests only; checked once a hand-over).
thread_local ScheduleWordsCheck* schedule_check = nullptr;

}  // namespace

ScheduleWordsCheck::ScheduleWordsCheck() {
  if (schedule_check) fail("two ScheduleWordsChecks at once");
  schedule_check = this;
}

ScheduleWordsCheck::~ScheduleWordsCheck() { schedule_check = nullptr; }

// ---- Counts kept (HandOverCounts) ----------------------------------------------------------

// A hand-over's count and what it was counted from: `pricing` and every field of every transfer
// (each vector led by its length, so that two different lists never spell the same key).
struct HandOverCounts::Memo {
  struct Entry {
    std::vector<int64_t> key;
    Emitter count;      // the hand-over counted alone (Emitter::add_counted)
    int producers = 0;  // the ring producers it issued (how far it moves the ordinal)
  };
  bool verify = false;
  size_t hits = 0, kept = 0;
  std::unordered_map<uint64_t, std::vector<Entry>> entries;  // by the key's hash
};

namespace {

thread_local HandOverCounts::Memo* live_hand_over_counts = nullptr;

std::vector<int64_t> count_key(bool pricing, const std::vector<Transfer>& transfers) {
  std::vector<int64_t> key{pricing ? 1 : 0, static_cast<int64_t>(transfers.size())};
  auto levels = [&](const Levels& walk) {
    key.push_back(static_cast<int64_t>(walk.size()));
    for (const auto& [inc, count] : walk) {
      key.push_back(inc);
      key.push_back(count);
    }
  };
  for (const Transfer& t : transfers) {
    key.insert(key.end(), {t.src, t.mask, t.from_at, t.bytes, t.packets});
    levels(t.read);
    key.push_back(static_cast<int64_t>(t.writes.size()));
    for (const Write& w : t.writes) {
      key.insert(key.end(), {w.tile, w.at});
      levels(w.walk);
    }
  }
  return key;
}

uint64_t hash_of(const std::vector<int64_t>& key) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const int64_t v : key) {
    h ^= static_cast<uint64_t>(v);
    h *= 0x100000001b3ull;
    h ^= h >> 32;
  }
  return h;
}

}  // namespace

HandOverCounts::HandOverCounts(bool verify) {
  if (live_hand_over_counts) return;
  memo_ = std::make_unique<Memo>();
  memo_->verify = verify;
  live_hand_over_counts = memo_.get();
}

HandOverCounts::~HandOverCounts() {
  if (memo_) live_hand_over_counts = nullptr;
}

size_t HandOverCounts::hits() const { return memo_ ? memo_->hits : 0; }
size_t HandOverCounts::kept() const { return memo_ ? memo_->kept : 0; }

namespace {

// The hand-over of `transfers` (transfers_of(from, to, pricing, false, rows)) into `e`.
// On a counting emitter it reads nothing but `transfers`, `pricing` and the ordinal, which only
// the ring producers' fields take (a counting emitter builds none): what HandOverCounts relies on.
// Priced, the search's layouts keep the receivers' order: priced with the shortest schedule, it
// picks layouts the simulator runs slower (v1 1.0: 4.021 against 3.964 ms); the final program
// takes the shortest schedule on the layout the search picked.
void emit_hand_over(Emitter& e, const Stage& from, const Stage& to,
                    const std::vector<Transfer>& transfers, int& ordinal, bool pricing,
                    const std::vector<RowRange>& rows) {
  const Queues queues = queues_of(transfers);
  if (pricing) {
    emit_rounds(e, in_turns(transfers, queues, true), ordinal);
    return;
  }
  // (The gathered schedules' items point into `parts` and `own_parts`.)
  std::array<std::vector<Transfer>, 3> parts, own_parts;
  std::vector<std::vector<Round>> schedules;
  add_schedules(schedules, transfers, queues, parts);
  // The same schedules of each receiver's rows cut on their own (a row several receivers read
  // goes to each: more producers, but a receiver's rows from one sender in one transfer, and
  // fewer rounds and receiver sets).
  // (Not where the two cuts are the same transfers, as where no row has two readers; and only
  // for the program itself: the counts that choose the slides, slid_stages, keep the cut by
  // readers - every test-data program comes out the same either way, at about a third less
  // compile time for v2.)
  const std::vector<Transfer> own =
      e.only_counts() ? std::vector<Transfer>{} : transfers_of(from, to, false, true, rows);
  auto same = [](const Transfer& a, const Transfer& b) {
    return a.src == b.src && a.mask == b.mask && a.from_at == b.from_at && a.bytes == b.bytes &&
           a.packets == b.packets;
  };
  if (!e.only_counts() &&
      !std::equal(own.begin(), own.end(), transfers.begin(), transfers.end(), same))
    add_schedules(schedules, own, queues_of(own), own_parts);
  size_t best = 0;
  uint32_t fewest = 0;
  // (A counting `e` takes the chosen schedule's count, as `send` does its trials', instead of
  // counting it again: its instructions need nothing of what `e` counted before.)
  Emitter best_count = Emitter::counting();
  int best_ordinal = ordinal;
  for (size_t k = 0; k < schedules.size(); ++k) {
    int after = ordinal;
    Emitter count = counted(schedules[k], after);
    const uint32_t words = count.words();
    if (schedule_check) {
      Emitter written;
      int written_ordinal = ordinal;
      emit_rounds(written, schedules[k], written_ordinal);
      schedule_check->words.emplace_back(words, written.words());
    }
    if (k == 0 || words < fewest) {
      best = k;
      fewest = words;
      best_count = std::move(count);
      best_ordinal = after;
    }
  }
  if (e.only_counts()) {
    e.add_counted(best_count);
    ordinal = best_ordinal;
    return;
  }
  emit_rounds(e, schedules[best], ordinal);
}

}  // namespace

void hand_over(Emitter& e, const Stage& from, const Stage& to, int& ordinal, bool pricing,
               const std::vector<RowRange>& rows) {
  const std::vector<Transfer> transfers = transfers_of(from, to, pricing, false, rows);
  HandOverCounts::Memo* memo = live_hand_over_counts;
  if (!memo || !e.only_counts() || schedule_check) {
    emit_hand_over(e, from, to, transfers, ordinal, pricing, rows);
    return;
  }
  // (Counted alone from this hand-over's first ordinal; `e` then takes the count, as `send` does
  // its trials'.)
  auto count = [&](int& producers) {
    Emitter c = Emitter::counting();
    int after = ordinal;
    emit_hand_over(c, from, to, transfers, after, pricing, rows);
    producers = after - ordinal;
    return c;
  };
  std::vector<int64_t> key = count_key(pricing, transfers);
  std::vector<HandOverCounts::Memo::Entry>& bucket = memo->entries[hash_of(key)];
  for (const HandOverCounts::Memo::Entry& entry : bucket)
    if (entry.key == key) {
      if (memo->verify) {
        int producers = 0;
        const Emitter again = count(producers);
        if (again.words() != entry.count.words() || producers != entry.producers)
          fail("hand_over: a kept count differs from the hand-over's (", entry.count.words(),
               " words, ", entry.producers, " producers against ", again.words(), ", ", producers,
               ")");
      }
      ++memo->hits;
      e.add_counted(entry.count);
      ordinal += entry.producers;
      return;
    }
  int producers = 0;
  Emitter counted = count(producers);
  e.add_counted(counted);
  ordinal += producers;
  ++memo->kept;
  bucket.push_back({std::move(key), std::move(counted), producers});
}

namespace {

// The receivers of a stage whose tiles all keep the whole image (LayerPlan::full; not written in
// place, not in rounds, not slid yet), and per tile the bytes of its region it touches: the rows
// its first layer reads and every hand-over write. Empty when the stage is not such a stage.
struct Receivers {
  std::vector<uint32_t> masks;               // the transfers' receiver sets
  std::vector<std::pair<int, int>> touched;  // per tile of the stage, [first, end) bytes
};

std::optional<Receivers> receivers_of(const Stage& from, const Stage& to) {
  const size_t i = to.first;
  if (to.halo_in || to.tiles.size() < 2) return std::nullopt;
  for (const Plan& t : to.tiles)
    if (!t.layers[i].full || t.rounds > 1 || t.layers[i].slide != 0) return std::nullopt;
  Receivers r;
  for (const Plan& t : to.tiles) {
    const LayerPlan& lp = t.layers[i];
    const int row0 = lp.pixel(lp.need_top - lp.top, 0) - lp.extra * lp.cin;
    r.touched.push_back({row0, row0 + lp.need_rows * lp.row_words() * 4});
  }
  for (const Transfer& t : transfers_of(from, to, false)) {
    r.masks.push_back(t.mask);
    for (const Write& w : t.writes)
      for (size_t k = 0; k < to.tiles.size(); ++k) {
        if (w.tile != tile_bit(to.tiles[k].tile)) continue;
        int64_t end = w.at + 4;
        for (const auto& [stride, count] : w.walk) end += 4 * stride * (count - 1);
        r.touched[k].first = std::min(r.touched[k].first, w.at);
        r.touched[k].second = std::max(r.touched[k].second, static_cast<int>(end));
      }
  }
  return r;
}

}  // namespace

std::vector<int> slide_full_images(const Stage& from, const Stage& to) {
  const size_t i = to.first;
  const std::optional<Receivers> receivers = receivers_of(from, to);
  if (!receivers) return {};
  const auto& touched = receivers->touched;
  // The receiver sets: tiles joined by the transfers they take together.
  std::vector<size_t> set(to.tiles.size());
  for (size_t k = 0; k < set.size(); ++k) set[k] = k;
  auto root = [&](size_t k) {
    while (set[k] != k) k = set[k];
    return k;
  };
  for (const uint32_t mask : receivers->masks) {
    std::optional<size_t> first;
    for (size_t k = 0; k < to.tiles.size(); ++k) {
      if (!(mask & tile_bit(to.tiles[k].tile))) continue;
      if (!first)
        first = root(k);
      else
        set[root(k)] = *first;
    }
  }
  // Per set its tiles in order and the rows they read, [top, bottom): every row a set receives
  // is one some tile of it reads (SenderCut sends a row to the tiles that read it).
  struct Rows {
    std::vector<size_t> tiles;
    int top = 0, bottom = 0;
  };
  std::map<size_t, Rows> sets;
  for (size_t k = 0; k < to.tiles.size(); ++k) {
    const LayerPlan& lp = to.tiles[k].layers[i];
    auto [it, fresh] = sets.try_emplace(root(k));
    Rows& r = it->second;
    r.top = fresh ? lp.need_top : std::min(r.top, lp.need_top);
    r.bottom = fresh ? lp.need_top + lp.need_rows : std::max(r.bottom, lp.need_top + lp.need_rows);
    r.tiles.push_back(k);
  }
  if (sets.size() < 2) return {};
  std::vector<int> slides(to.tiles.size(), 0);
  bool any = false;
  // A set slides when its tiles read what another set's do, each at its own offset, and that set
  // lies lower in the image: then its rows sit, slid, where those of the lowest such set do.
  auto same_pattern = [&](const Rows& a, const Rows& b) {
    if (a.tiles.size() != b.tiles.size() || a.bottom - a.top != b.bottom - b.top) return false;
    for (size_t k = 0; k < a.tiles.size(); ++k) {
      const LayerPlan& x = to.tiles[a.tiles[k]].layers[i];
      const LayerPlan& y = to.tiles[b.tiles[k]].layers[i];
      if (x.need_top - a.top != y.need_top - b.top || x.need_rows != y.need_rows ||
          x.ob - x.oa != y.ob - y.oa)
        return false;
    }
    return true;
  };
  for (const auto& [k, r] : sets) {
    const Rows* lowest = &r;
    for (const auto& [j, q] : sets)
      if (q.top > lowest->top && same_pattern(r, q)) lowest = &q;
    if (lowest == &r) continue;
    const int rows = lowest->top - r.top;
    const bool inside = std::all_of(r.tiles.begin(), r.tiles.end(), [&](size_t t) {
      const LayerPlan& lp = to.tiles[t].layers[i];
      const int slide = rows * lp.row_words() * 4;
      return lp.row_words() * 4 == lp.wp * lp.cin && touched[t].first + slide >= lp.in_base &&
             touched[t].second + slide <= lp.in_base + lp.in_bytes();
    });
    if (!inside) continue;
    for (size_t t : r.tiles) slides[t] = rows * to.tiles[t].layers[i].row_words() * 4;
    any = true;
  }
  if (!any) slides.clear();
  return slides;
}

std::vector<int> align_full_images(const Stage& from, const Stage& to) {
  const size_t i = to.first;
  const std::optional<Receivers> receivers = receivers_of(from, to);
  if (!receivers) return {};
  // Row `at` of the region: each tile's first read row; the lowest that keeps every tile's
  // touched bytes at or above the region's start, if it keeps them below its end too.
  const LayerPlan& any = to.tiles.front().layers[i];
  const int row_bytes = any.row_words() * 4, rows = any.in_bytes() / row_bytes;
  int at = 0;
  std::vector<int> first(to.tiles.size());
  for (size_t k = 0; k < to.tiles.size(); ++k) {
    const LayerPlan& lp = to.tiles[k].layers[i];
    if (lp.wp * lp.cin != row_bytes || lp.in_bytes() != any.in_bytes()) return {};
    first[k] = lp.need_top - lp.top;
    const int lo = (receivers->touched[k].first - lp.in_base) / row_bytes;
    at = std::max(at, first[k] - lo);
  }
  for (size_t k = 0; k < to.tiles.size(); ++k) {
    const LayerPlan& lp = to.tiles[k].layers[i];
    const int end = receivers->touched[k].second - lp.in_base + (at - first[k]) * row_bytes;
    if (end > rows * row_bytes) return {};
  }
  std::vector<int> slides(to.tiles.size());
  for (size_t k = 0; k < to.tiles.size(); ++k) slides[k] = (at - first[k]) * row_bytes;
  return slides;
}

}  // namespace tinycoral::compiler::conv
