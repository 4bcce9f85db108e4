// Pieces every code generator's programs share (FULLY_CONNECTED, CONV_2D, and the generators that
// follow): the scalar core's DMA descriptors and completion interrupt, tile and scalar fences, ring
// and narrow-walk fragments, address walks from logical strides, and the executable's boundary
// layers, DMA hints and caching token. Values are the ones edgetpu_compiler 16.0 writes for these
// pieces (docs/compiler.md, "FULLY_CONNECTED").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "compiler/emitter.h"
#include "container/executable.h"

namespace tinycoral::compiler {

// The pop/infeed passes of the host's DMAs: activations in 8-byte units (128 KiB a pass, the
// staging ring), parameters in 64-byte units (64 KiB a pass).
constexpr int kActPassUnits = 16384;
constexpr int kParPassUnits = 1024;

inline uint32_t tile_bit(int tile) { return 1u << tile; }
inline uint32_t first_tiles(int n) { return n >= 32 ? 0xffffffffu : (1u << n) - 1; }

// The scalar core's DMA descriptor: four words (address lo, hi, size, tag) pushed, then issued.
// `lo`/`hi` hold the address; the descriptor is staged in base..base+3.
void descriptor(Emitter& e, int lo, int hi, int base, int64_t size, int tag);
// Tag 4: the completion interrupt, a descriptor with a zero address and size.
void interrupt(Emitter& e, int lo, int hi, int base);

// A DMA of `units` in passes of `pass` units: the pass count and the last pass's fields
// (count_m1, tail_en, count_neg). A transfer of whole passes sets all three to 0 (14.1's rule).
struct Passes {
  int count = 1, last = 0, pass = 0;
  std::string fields() const;
};
Passes passes_of(int units, int pass);

void tile_fence(Emitter& e, const std::string& fields);
void wait_tokens(Emitter& e);

// Every execution program's start: fences, the parameter and scratch base addresses (relocated),
// then the wait for the caching token.
void program_start(Emitter& e);
// The base address of the host input `name` (relocated) for the activation pop after it.
void input_address(Emitter& e, const std::string& name);
// The output buffer `name`'s address into registers 11 (low) and 10 (high), staged in 4 and 5
// for the next descriptor(e, 5, 4, 6, ...).
void output_address(Emitter& e, const std::string& name);

// The host's input streamed to the tiles, after input_address: one activation pop of `bytes`
// (in passes of 128 KiB, the staging ring, docs/chip.md "Infeed") and its DMA descriptor.
void host_pop(Emitter& e, int64_t bytes);
// The same input in several pops: the descriptor asks for all `bytes`, the first pop stages only
// `first` of them, pop_more the next ones (each pop's infeeds may start once it is complete,
// while the next pops stage).
void host_pop(Emitter& e, int64_t bytes, int64_t first);
void pop_more(Emitter& e, int64_t bytes);
// One move of that input into narrow memory: a wideToNarrow of `bytes` (a multiple of 4) to
// narrow byte `n_addr` of the tiles `mask` from their ring FIFO at wide unit `fifo`, a ring
// consumer of its 256-byte packets (the last may be short), and an infeed of the input's bytes
// from 8-byte unit `offset` on (counted modulo the pass) to them.
void host_to_narrow(Emitter& e, uint32_t mask, int fifo, int n_addr, int bytes, int offset);

// A decimal number appended with the (pointer, length) append: the walks' numbers are most of
// the text the code generators build, and an append of an iterator range costs a string replace.
void append_decimal(std::string& out, int64_t value);

// A narrow walk of `words` 4-byte words through a 6-level nest (the compiler writes all levels).
std::string narrow_walk(int words);

// A TTU walk from logical strides: levels (stride, count), innermost first; the increments are
// what the hardware adds when a level advances (stride minus what the inner levels walked).
// Padded to `levels` levels of one iteration; `last_mode` is appended to the last level (" m3").
std::string strided_walk(const std::vector<std::pair<int64_t, int64_t>>& stride_count, int levels,
                         std::string_view last_mode = "");
// The levels of such a walk in order, f(increment, count): its text's numbers.
template <class F>
void for_each_walk_level(const std::vector<std::pair<int64_t, int64_t>>& stride_count, int levels,
                         F f) {
  int64_t walked = 0;  // offset reached when every inner level is at its last iteration
  int64_t last_inc = 0;
  for (int k = 0; k < levels; ++k) {
    const bool given = k < static_cast<int>(stride_count.size());
    const auto [stride, count] =
        given ? stride_count[static_cast<size_t>(k)] : std::pair<int64_t, int64_t>{0, 1};
    f(given ? stride - walked : last_inc, count);
    walked += stride * (count - 1);
    last_inc = -walked;
  }
}
// The same appended to `out` (where a walk is one piece of an instruction's fields, the search's
// hand-overs: no string of its own).
void append_strided_walk(std::string& out,
                         const std::vector<std::pair<int64_t, int64_t>>& stride_count, int levels,
                         std::string_view last_mode = "");

// A walk over bytes from logical strides (in bytes), 8 levels: the increments as strided_walk's,
// printed in words with each remainder as the previous level's mode bits (level 7's mode is
// `mode7`); *hmode gets level 0's remainder (the op's `in.hmode`).
std::string byte_walk(std::vector<std::pair<int64_t, int64_t>> stride_count, int mode7, int* hmode);

// ringProducer: tile `from` sends its row `row` to `dest` (bit 16 = the scalar core); `ordinal`
// counts the program's ring producers.
void ring_send(Emitter& e, int from, int row, uint32_t dest, int ordinal);
// Resident wide rows into scalar memory (the depthwise round trip's and Google's form,
// docs/chip.md): an outfeed of `rows` 64-word pieces at the scalar core, then a producer of `rows`
// rows from wide unit `unit` of tile `from`, with no ring ordinal. (One outfeed may take several
// producers' rows in program order: outfeed_to_scalar once, rows_to_scalar per producer.)
// `pieces` > 1: that many pieces of `rows` rows, one every `step` rows (held taps in pieces).
void outfeed_to_scalar(Emitter& e, int rows);
void rows_to_scalar(Emitter& e, int from, int unit, int rows, int pieces = 1, int step = 0);
// ringConsumer of `slots` packets into row `row`; s_val is the consumer's credit offset.
void ring_receive(Emitter& e, uint32_t tiles, int row, int slots, int s_val);

// An input or output layer of y x x x z bytes (channels innermost); the FC's is 1 x 1 x size.
container::Layer boundary_layer(const std::string& name, int y, int x, int z, int32_t zp,
                                float scale, bool output, bool is_signed);
container::Layer boundary_layer(const std::string& name, int size, int32_t zp, float scale,
                                bool output, bool is_signed);
container::DmaHint dma_hint(container::BufferKind kind, container::Direction dir,
                            const std::string& name, int size);
container::DmaHint instruction_hint();
container::DmaHint interrupt_hint();

// The EXECUTION_ONLY executable around `program`, as edgetpu_compiler names it.
container::Executable execution_executable(container::Bitstream program);
// Its DMA hints: the instructions, the input, the output, then the completion interrupt.
container::DmaHints execution_hints(const std::string& input, int in_bytes,
                                    const std::string& output, int out_bytes);
// The PARAMETER_CACHING executable: `program`, its parameter stream and hints. The caller sets
// the caching token both executables share.
container::Executable caching_executable(container::Bitstream program,
                                         std::vector<uint8_t> parameters);

// A token shared by the two executables: FNV-1a over the parameters, so recompiling the same
// model gives the same file (Google's is an opaque 64-bit value).
uint64_t caching_token(const std::vector<uint8_t>& parameters);

}  // namespace tinycoral::compiler
