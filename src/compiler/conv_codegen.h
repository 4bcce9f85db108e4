// The CONV_2D code generator: one program for a chain of CONV_2D layers (conv_layer.h), 1x1 and
// k x k, VALID and SAME, any stride, per-tensor or per-channel requantization, fused RELU/RELU6.
//
// Placement (our own, not edgetpu_compiler's; docs/compiler.md "CONV_2D", "Whole MobileNets"): the
// chain runs in stages, each splitting its last layer's output rows into bands over up to 16
// tiles; each tile of a stage holds the stage's weights and computes, layer by layer, the rows its
// band needs (halo rows are computed again by both neighbours instead of being exchanged). A stage
// of one layer may instead split its output channels over tiles, each keeping only its channels'
// weights. The stages, their tiles and where their weights stay are chosen by a model of the
// chip's time (conv_placement.h), keeping every weight resident when they fit the tiles' wide
// memories and streaming only what does not fit otherwise. Every layer's input sits in
// narrow memory as a padded image [Hp][Wp][Cin] whose border holds the input zero point (so padding
// taps add nothing); the host's image rows are streamed into the interior of every tile that needs
// them, and each layer's op writes its outputs straight into the interior of the next layer's
// padded image, so activations never leave their tile between layers. One op per layer walks (input
// words x taps) per output position over resident weight rows (64 output channels per group, one
// group after another), with the per-channel multipliers and biases in the output stage. Each
// tile's band of the last layer goes to the host through the scalar core.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "compiler/conv_layer.h"
#include "compiler/emitter.h"
#include "container/executable.h"

namespace tinycoral::compiler {

struct ConvPrograms {
  container::Executable execution;  // EXECUTION_ONLY, name "model"
  container::Executable caching;    // PARAMETER_CACHING, name "Unknown", holds the parameters
};

// Why the chain is outside what the generator covers, or "" when it is covered.
std::string conv_unsupported(const ConvChain& chain);

// The parameter stream: per layer, per 64-channel group a row of float32 multipliers (and a row
// of int32 biases), then one row of the weight zero point, then the weight rows
// [group][ky][kx][cin/4] of 64 columns x 4 bytes; after every layer's segments the runs their
// owner tiles keep (weights through a FIFO), then each cached residual ADD's 4 weight rows.
std::vector<uint8_t> conv_parameters(const ConvChain& chain);

// Both executables; throws Error if conv_unsupported() is not empty.
ConvPrograms generate_conv(const ConvChain& chain);

// The chain as the head of a longer program (the colour filters: a SOFTMAX generator follows in
// the same program). Its execution instructions, from the program's start up to its last layer's
// bytes, go to `execution`, and those bytes to the host's scratch buffer (where the follower reads
// them back) instead of the output, or nowhere (ConvHead::on_chip); its caching loads, from the
// caching program's start, go to `caching` (the follower's loads take the parameters after
// `cached`).
struct ConvHead {
  uint32_t tiles = 0;           // the tiles the chain uses (owner tiles of its turns too)
  int param_units = 0;          // wide units from 0 its cached parameters take on them
  int out_bytes = 0;            // the bytes it leaves in scratch: its output in order
  int narrow_end = 0;           // narrow memory it uses on a tile
  std::vector<uint8_t> cached;  // the caching program's parameters
  // The last layer's bands in output order: tile t holds output bytes [first, first + bytes) at
  // its narrow byte `base` when the program ends its part.
  struct Band {
    int tile = 0, first = 0, base = 0, bytes = 0;
  };
  std::vector<Band> bands;
  bool on_chip = false;  // the bands stay in narrow memory (no scratch): keep_on_chip said so
};
// Nothing, with the reason in `why`, when the chain is not covered, streams parameters from the
// host (turns from owner tiles are fine) or its output bands are not its bytes in order.
// `keep_on_chip` (given the head's bands): the follower takes the bands from the tiles' narrow
// memory itself, so they are not sent to scratch.
std::optional<ConvHead> emit_conv_head(const ConvChain& chain, Emitter& execution, Emitter& caching,
                                       std::string& why,
                                       const std::function<bool(const ConvHead&)>& keep_on_chip);

// For tests of the placement search's counting: the words of the execution program of every
// layout the search prices for `chain` (which conv_unsupported covers), as a counting emitter
// counts them and as an emitter writes them (the search's pricing form: hand_over's `pricing`,
// each receiver taking its transfers in the order they were made; the stages as planned). Where
// the two differ, the search prices a program it would not write. (The final form's schedules,
// which hand_over chooses by counting: conv::ScheduleWordsCheck.)
std::vector<std::pair<uint32_t, uint32_t>> priced_program_words(const ConvChain& chain);

// Whether the host's image widened to whole-word pixels on the chip (`widened`,
// widen_input_on_chip) pays against streaming it as it is (`as_is`): the first layer's op
// cycles an output pixel on the clock's model (the busier of its MACs and its steps) fall by
// more than the repack's bytes an output pixel take (one a step, 4 steps a cycle).
bool widened_pixels_pay(const ConvChain& as_is, const ConvChain& widened);

// conv_unsupported and generate_conv at once (the placement search runs once): the executables,
// or nothing with the reason in `why`.
std::optional<ConvPrograms> try_generate_conv(const ConvChain& chain, std::string& why);

}  // namespace tinycoral::compiler
