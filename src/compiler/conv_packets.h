// What one ring transfer of activations can carry (the host's image rows, conv_input.cpp, and
// the hand-overs between stages, conv_hand_over.cpp): packets of up to 256 bytes, and when a
// transfer's last packet may be short by the wideToNarrow's rules.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "compiler/conv_plan.h"

namespace tinycoral::compiler::conv {

// Walk levels (stride, count), innermost first (strided_walk's input).
using Levels = std::vector<std::pair<int64_t, int64_t>>;

inline int packets_of(int bytes) { return (bytes + kPiece - 1) / kPiece; }

// Whether `bytes` of rows of `row_bytes` can go as packets whose last is short: rows over a packet
// (as many rows as packets would read as one row's words per fill, the wideToNarrow's short-row
// form) and words that do not split evenly over the packets (the same form for any walk).
inline bool ends_inside_a_packet(int row_bytes, int bytes) {
  return row_bytes > kPiece && bytes % kPiece != 0 && bytes % 4 == 0 &&
         (bytes / 4) % packets_of(bytes) != 0;
}

// Whether `rows` whole rows of `row_bytes` go as one multi-packet transfer whose last packet may
// be short, by the wideToNarrow's rule (docs/chip.md "A wideToNarrow that takes less than a row
// per wide step"): its walk {a row's words, rows} hands over a shorter share of each fill only
// when its outer level iterates once per fill and the words split evenly into shares under 64
// words. Finer than ends_inside_a_packet, which keeps whole packets whenever the words split
// evenly (v1 1.0's 15 rows of 672 bytes: 2,520 words in 40 packets of 63 - but 15 outer
// iterations for 40 fills, so the rows stream whole).
inline bool rows_in_one_transfer(int row_bytes, int rows) {
  const int bytes = rows * row_bytes, packets = packets_of(bytes), words = bytes / 4;
  if (row_bytes % 4 != 0 || packets < 2 || packets > kHandOverPackets) return false;
  return !(words % packets == 0 && words / packets < kPiece / 4 && std::max(rows, 1) == packets);
}

// Whether a transfer of `bytes` in packets_of(bytes) fills, the last short, reaches the narrow
// walk `walk` (words; innermost first) whole, by the wideToNarrow's rule (docs/chip.md "A
// wideToNarrow that takes less than a row per wide step"): the walk takes only a share of each
// fill when the words split evenly into shares under 64 words and its outer levels, multiplied
// from the outermost inwards until they reach the fills, iterate once per fill.
// rows_in_one_transfer is this for the walk {a row's words, rows}.
inline bool streams_whole(const Levels& walk, int bytes) {
  const int64_t packets = packets_of(bytes), words = bytes / 4;
  if (bytes % 4 != 0 || packets < 2 || packets > kHandOverPackets) return false;
  if (words % packets != 0 || words / packets >= kPiece / 4) return true;
  int64_t outer = 1;
  for (size_t d = walk.size(); d-- > 1 && outer < packets;)
    if (walk[d].second > 1) outer *= walk[d].second;
  return outer != packets;
}

}  // namespace tinycoral::compiler::conv
