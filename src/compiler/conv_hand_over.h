// The hand-over between two stages of a CONV_2D chain (conv_codegen.h, docs/compiler.md
// "All-gather hand-overs"): every tile of a stage sends its band of the stage's last output (rows
// of the next layer's input) over the ring to the tiles of the next stage whose bands read them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "compiler/conv_plan.h"
#include "compiler/emitter.h"

namespace tinycoral::compiler::conv {

// The receivers of `to` that read row y of its first image (rows of `src`'s band): a receiver
// computing some groups of a split depthwise layer reads only their channels, and written in
// place (Stage::halo_in) the sender's own tile has its rows already.
uint32_t row_readers(const Plan& src, const Stage& to, int y);

// Whether the hand-over into `to` goes to receivers that all keep the whole image (LayerPlan::
// full, not written in place): then rows that several of them read go to all of them in one
// transfer, each writing every row of it, so a receiver gets rows besides the ones it reads.
bool whole_image_receivers(const Stage& to);

// Rows [first, end) of a sender's band.
struct RowRange {
  int first = 0, end = 1 << 30;
};

// The hand-over from the tiles of `from` into the first image of `to` (layer to.first), appended
// to `e`; `ordinal` counts the program's ring producers. `pricing` (the placement search prices a
// candidate layout): each receiver takes its transfers in the order they were made and rows end
// inside a packet only where they must (the forms the search's layouts were tuned with); else the
// schedule of fewest instruction words of all. `rows` (per tile of `from`, empty: all): only
// those rows of each band (not of pixel bands).
void hand_over(Emitter& e, const Stage& from, const Stage& to, int& ordinal, bool pricing,
               const std::vector<RowRange>& rows = {});

// For tests of that choice: while one lives (on its thread), hand_over with `pricing` false also
// writes every schedule it weighs with an emitter of its own, and `words` gets per schedule the
// words it counted (the choice's) and the words written. Programs and choices stay the same.
class ScheduleWordsCheck {
 public:
  ScheduleWordsCheck();
  ~ScheduleWordsCheck();
  ScheduleWordsCheck(const ScheduleWordsCheck&) = delete;
  ScheduleWordsCheck& operator=(const ScheduleWordsCheck&) = delete;
  std::vector<std::pair<uint32_t, uint32_t>> words;
};

// While one lives (on its thread: the placement search's, make_layout), a hand-over on a counting
// emitter keeps its count, and a later one with the same transfers (every field of each, in order)
// and the same `pricing` takes it instead of counting them again: most hand-overs the search
// prices lie between stages its candidate did not change (v2: hand_over was 40% of a compile).
// The transfers are all that the count reads of the two stages (conv_hand_over.cpp), so the key is
// them, compared whole, not the plans. One made while another lives does nothing (the outer one
// keeps counting). `verify` (tests): each hit is counted again and must agree.
class HandOverCounts {
 public:
  explicit HandOverCounts(bool verify = false);
  ~HandOverCounts();
  HandOverCounts(const HandOverCounts&) = delete;
  HandOverCounts& operator=(const HandOverCounts&) = delete;
  // Hand-overs that took a kept count, and counts kept.
  size_t hits() const;
  size_t kept() const;
  struct Memo;  // (conv_hand_over.cpp's)

 private:
  std::unique_ptr<Memo> memo_;  // null where another one lives
};

// Receivers that keep the whole image (LayerPlan::full) fall into sets that take the same
// transfers; where two sets read rows of the same pattern at different places (v2's 14 x 14
// stages: tiles 0-6 take the image's upper rows, 7-13 its lower), each set but the one lowest in
// the image keeps its rows slid up its region (LayerPlan::slide) so that its rows sit where that
// one's do: their first layer's ops and the hand-over's wideToNarrows become the same
// instructions (one op for tiles k and k + 7 instead of two). Every row a tile writes or reads
// stays inside its image's region. The slides (bytes) per tile of `to`, empty where none slides.
std::vector<int> slide_full_images(const Stage& from, const Stage& to);

// Such receivers all slid (none where their rows do not fit): each tile's first read row at one
// place of the region, so that the first layer's ops of equal bands are one instruction, while
// the wideToNarrows of tiles taking the same transfers then differ (the final program keeps this
// where its words are fewer: v2's 14-band depthwise stages whose sets overlap).
std::vector<int> align_full_images(const Stage& from, const Stage& to);

}  // namespace tinycoral::compiler::conv
