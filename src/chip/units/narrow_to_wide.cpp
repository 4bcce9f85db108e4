// narrowToWide (0x13): narrow words in walk order into wide rows, as whole rows, shared rows (one
// iteration of the narrow walk's outer levels per row), or transposed for the pooling and softmax
// ops; a FIFO destination queues each row as a fill (docs/chip.md "Unit semantics used").
#include <algorithm>
#include <array>
#include <cstring>

#include "chip/units/tile_work.h"

namespace tinycoral::chip {

bool VirtualEdgeTpu::Impl::run_narrow_to_wide(TileWork& t) {
  const auto& n = std::get<WideNarrowInstr>(t.item.decoded);
  std::vector<uint8_t> stream;
  stream.reserve(4 * std::min<uint64_t>(n.narrow_ttu.steps(), units::kMaxRowSteps));
  units::walk(n.narrow_ttu, [&](int64_t off) {
    // A register-indirect narrowToWide reads from the address its register held at dispatch.
    const uint8_t* p = t.narrow_word(int64_t{n.narrow_addr} + t.w.narrow_shift + off, false);
    stream.insert(stream.end(), p, p + 4);
  });
  // One wide row per iteration of the narrow walk's outermost level when their counts agree
  // and the iterations are shorter than a row (MobileNet v2's ADD weight rows: word 790 writes
  // 4 resident rows of 16 bytes from 4 x 4 narrow words); otherwise rows of 256 bytes in turn.
  // A FIFO destination (wide_circ) streams instead: its fills are the 256-byte packets of one
  // byte stream (PoseNet word 6836 sends 6 image rows of 7 x 36 = 252 bytes as 1512
  // contiguous bytes, the output layout's 252-byte rows of tiles 3, 7 and 11).
  // The outer levels may also share the rows between them: gabor_64x64_p4's pooling relay
  // (word 273, narrow levels 4 x 2 x 4 x 16, 64 wide steps) writes one row of 2 transposed
  // blocks (8 channels x 4 positions) per iteration of its two outer levels, the row the
  // average pool reads for that position quad.
  size_t per_row = kWideRowBytes;
  const uint64_t rows = n.wide_ttu.steps();
  // A FIFO without `w.circ` (the MUL feed, isa.md 2.1.5: `w.rows` 1, the same row every step)
  // takes one fill per wide step, each an equal share of the words (looming word 290: 256
  // steps of one word for op 273's 256 fills).
  // A transposing write of fewer than 64 channels fills each wide step's row with its share
  // (looming words 947-1003: 504 positions of one channel word as 126 rows of 4 positions x 4
  // channels, the rows the 21x21 average pool at 1011 walks lane by lane).
  // Only when 256-byte fills would leave steps empty: gen2021 PoseNet word 6657 (4 steps into
  // one row, 960 bytes) sends fills of 256, 256, 256 and 192 bytes, not 4 of 240 (with equal
  // shares its heatmaps and short offsets differ from the twin's).
  const bool shared_fills = n.transposing || (n.wide_circ && !n.wide_stream &&
                                              stream.size() <= (rows - 1) * kWideRowBytes);
  if (shared_fills && stream.size() % rows == 0 && stream.size() < rows * kWideRowBytes)
    per_row = stream.size() / rows;
  // The on-tile softmax streams one word per wide step into a 4-row FIFO (bright_16x16 word
  // 641: 128 words, 128 steps, `w.circ`): one fill of one word each (docs/chip_ops.md 6.2).
  // The last round of 4 steps may be short (`w.last`): gen2021 MobileNet sends its 1001
  // logits as 251 words into 4 rows x 63 steps (word 3255), its exponentials as 501 words
  // into 4 x 126 (word 9963).
  if ((n.transposing || n.wide_circ) && rows > 1 && stream.size() % 4 == 0 &&
      stream.size() <= 4 * rows && stream.size() + 16 > 4 * rows)
    per_row = 4;
  uint64_t outer = 1;
  for (int d = 5; d >= 1 && !n.wide_circ && outer < rows; --d) {
    if (n.narrow_ttu.cnt[d] == 0) continue;
    outer *= uint64_t{n.narrow_ttu.cnt[d]} + 1;
    if (outer == rows && stream.size() < rows * kWideRowBytes && stream.size() % rows == 0)
      per_row = stream.size() / rows;
  }
  // Tail bit 799 (pooling relays): each wide step's words are positions of one channel word,
  // transposed so that a wide lane holds one channel with the positions in its bytes, the
  // layout the pooling ops read (gen2020 MobileNet word 2168 -> average pool 2176; docs/chip.md
  // "narrowToWide"). Walks of 4 positions innermost transpose 4 x 4 blocks. Compiler 16.0's
  // softmax gathers (bright_16x16 word 140: 64 words innermost, 64 wide steps) send one word
  // per step: its 4 bytes go to byte 0 of lanes 0-3, one FIFO fill per step (docs/chip_ops.md
  // "Softmax maximum").
  const bool word_per_step = n.transposing && n.narrow_ttu.cnt[0] != 3 && per_row == 4;
  // Bit 800 transposes 16-bit elements: each pair of words is a 2 x 2 block of halves, column
  // j of the pair taking half j of both words (half h from word h). The softmax's exponentials
  // reach the probability op so (bright_16x16 word 823, docs/chip_ops.md 6.2).
  if (n.transposing && n.transpose16) {
    if (stream.size() % 8 != 0) t.fail("a 16-bit transposing narrowToWide needs pairs of words");
    for (size_t block = 0; block < stream.size(); block += 8) {
      std::array<uint8_t, 8> moved;
      for (size_t j = 0; j < 2; ++j)
        for (size_t h = 0; h < 2; ++h)
          std::memcpy(&moved[4 * j + 2 * h], &stream[block + 4 * h + 2 * j], 2);
      std::memcpy(stream.data() + block, moved.data(), 8);
    }
  } else if (n.transposing && !word_per_step) {
    if (n.narrow_ttu.cnt[0] != 3 || stream.size() % 16 != 0)
      t.fail("a transposing narrowToWide needs 4 positions innermost or one word per step");
    for (size_t block = 0; block < stream.size(); block += 16) {
      std::array<uint8_t, 16> moved;
      for (size_t b = 0; b < 4; ++b)
        for (size_t j = 0; j < 4; ++j) moved[4 * j + b] = stream[block + 4 * b + j];
      std::memcpy(stream.data() + block, moved.data(), 16);
    }
  }
  const bool one_word_fills = !n.transposing && n.wide_circ && per_row == 4;
  size_t pos = 0;
  units::walk(n.wide_ttu, [&](int64_t off) {
    if (pos >= stream.size()) return;
    const int64_t unit = int64_t{n.wide_addr} + 4 * off;
    uint8_t* row = t.wide_row(unit, true);
    const size_t take = std::min<size_t>(per_row, stream.size() - pos);
    if (word_per_step) {
      for (size_t j = 0; j < 4; ++j) row[4 * j] = stream[pos + j];
    } else if (one_word_fills) {
      // One word per fill reaches every column: the MUL and softmax-sum readers take column
      // 0 anyway; the Keras LSTM's softmax maximum (word 3256, fed by 3249) reads the lanes of 4
      // columns and reduces them at 3290, which only gives the largest logit when each column
      // holds the word (docs/chip.md "Register-indirect tile instructions").
      for (size_t c = 0; c < kWideRowBytes / 4; ++c)
        std::memcpy(row + 4 * c, stream.data() + pos, 4);
    } else {
      std::memcpy(row, stream.data() + pos, take);
    }
    pos += take;
    // Only FIFO destinations queue fills (isa.md 2.5: wide_rows / wide_circ); a resident row
    // (split_concat's identity rows at word 44) is just memory.
    if (n.wide_circ) t.record_fill(unit);
  });
  charge();
  return true;
}

}  // namespace tinycoral::chip
