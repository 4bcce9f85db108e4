// TileBatch: tile instructions collected per tile and issued as few instructions as possible (the
// same fields on several tiles go out once with all their tiles). Shared by the CONV_2D generator's
// files (conv_codegen.cpp, conv_hand_over.cpp, conv_input.cpp, conv_ops.cpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "compiler/emitter.h"
#include "compiler/program_parts.h"

namespace tinycoral::compiler {

// Tile instructions collected per tile and sent as few as possible: those with the same fields
// (the ops and fills of bands of one height at the same addresses) go out as one instruction on
// all their tiles, which is what most of a stage's per-tile instructions are. A batch's
// instructions on one tile must not depend on each other's order (one op per tile, fills of
// disjoint regions).
class TileBatch {
 public:
  explicit TileBatch(Emitter& e) : e_(e) {}
  TileBatch(const TileBatch&) = delete;
  TileBatch& operator=(const TileBatch&) = delete;
  ~TileBatch() {
    // (A counting emitter reads the mnemonics only, and a fence's fields: Emitter::drop_last.)
    auto issue = [&](const Item& item) {
      if (e_.only_counts() && item.mnemonic != Emitter::kDroppable)
        e_.add(item.mnemonic);
      else
        e_.add(item.mnemonic, cat("tiles=", hex(item.tiles), " ", item.fields));
    };
    for (const Item& item : items_) issue(item);
    for (const std::vector<Item>& items : sequences_)
      for (const Item& item : items) issue(item);
  }
  // Whether the emitter only counts (Fields: keys, not text).
  bool only_counts() const { return e_.only_counts(); }
  void add(uint32_t tiles, const std::string& mnemonic, std::string fields) {
    // (Here, not in the destructor's issue: Emitter::drop_last compares a fence's text.)
    if (mnemonic == Emitter::kDroppable) Emitter::check_droppable_text(fields);
    if (group_) {
      // (Within a sequence, an instruction equal to an earlier one on other tiles joins it when
      // nothing in between runs on its tiles: each tile keeps its order. The ops of bands of
      // two heights alternating over a split layer's slices go out as two, not one a slice.)
      Item item{tiles, mnemonic, std::move(fields)};
      bool stop = false;
      if (!join_back(pending_, item, stop)) {
        if (pending_.empty()) pending_.reserve(kFirstItems);
        pending_.push_back(std::move(item));
      }
      return;
    }
    for (Item& item : items_)
      if (item.mnemonic == mnemonic && item.fields == fields) {
        item.tiles |= tiles;
        return;
      }
    if (items_.empty()) items_.reserve(kFirstItems);
    items_.push_back({tiles, mnemonic, std::move(fields)});
  }
  // Instructions in order on the same tiles (a part's bias load and op): the whole sequence goes
  // out once for all sequences with the same instructions on tiles no other of them uses, each
  // instruction on the tiles it has in any of them (the slices of a layer split over 2-D blocks:
  // the same bias load on each slice's bands, the same op on each slice's first band ...), so
  // every tile keeps its instructions and their order.
  void begin_sequence() { group_ = true; }
  void end_sequence() {
    group_ = false;
    std::vector<Item> sequence = std::move(pending_);
    pending_.clear();
    auto tiles_of = [](const std::vector<Item>& items) {
      uint32_t tiles = 0;
      for (const Item& item : items) tiles |= item.tiles;
      return tiles;
    };
    const uint32_t tiles = tiles_of(sequence);
    for (std::vector<Item>& items : sequences_)
      if (items.size() == sequence.size() && (tiles_of(items) & tiles) == 0 &&
          std::equal(items.begin(), items.end(), sequence.begin(),
                     [](const Item& a, const Item& b) {
                       return a.mnemonic == b.mnemonic && a.fields == b.fields;
                     })) {
        for (size_t k = 0; k < items.size(); ++k) items[k].tiles |= sequence[k].tiles;
        return;
      }
    // Else each instruction joins an equal one of an earlier sequence when nothing in between
    // runs on its tiles (the bias load and FIFO consumer of a layer's output groups on their own
    // tiles, whose ops differ, go out once for all of them).
    std::vector<Item> kept;
    for (Item& item : sequence)
      if (!join_earlier(item, kept)) kept.push_back(std::move(item));
    if (!kept.empty()) sequences_.push_back(std::move(kept));
  }

 private:
  // Room for this many instructions at the first: one allocation where growing from one would
  // take four (the placement search prices programs through batches by the hundred thousand).
  static constexpr size_t kFirstItems = 8;
  struct Item {
    uint32_t tiles;
    std::string mnemonic, fields;
  };
  // Whether `item` joined an equal instruction of `kept` or the sequences before, searched from
  // the last back to the first instruction on any of its tiles.
  bool join_earlier(const Item& item, std::vector<Item>& kept) {
    bool stop = false;
    if (join_back(kept, item, stop)) return true;
    for (size_t s = sequences_.size(); !stop && s-- > 0;)
      if (join_back(sequences_[s], item, stop)) return true;
    return false;
  }
  // Whether `item` joined an equal instruction of `items`, searched from the last back; `stop`
  // is set where an instruction on any of its tiles ends the search (each tile keeps its order).
  static bool join_back(std::vector<Item>& items, const Item& item, bool& stop) {
    for (size_t k = items.size(); k-- > 0;) {
      Item& earlier = items[k];
      if (earlier.tiles & item.tiles) {
        stop = true;
        return false;
      }
      if (earlier.mnemonic == item.mnemonic && earlier.fields == item.fields) {
        earlier.tiles |= item.tiles;
        return true;
      }
    }
    return false;
  }
  Emitter& e_;
  std::vector<Item> items_;
  bool group_ = false;
  std::vector<Item> pending_;
  std::vector<std::vector<Item>> sequences_;
};

}  // namespace tinycoral::compiler
