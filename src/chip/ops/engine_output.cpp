// The op engine's output stage (engine_output.h).
#include "chip/ops/engine_output.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "chip/ops/nlu.h"

namespace tinycoral::chip::ops {

GroupWriter::GroupWriter(const OpInstr& op, OpEnv& env, const EngineSpec& spec,
                         const PerChannel& pc, uint64_t groups, int32_t empty, uint32_t stride)
    : op_(op),
      env_(env),
      spec_(spec),
      pc_(pc),
      groups_(groups),
      empty_(empty),
      stride_(stride),
      channels_(uint32_t{op.out_ch} + 1),
      full_words_((channels_ + 3) / 4),
      last_words_((uint32_t{op.out_ch_last} + 1 + 3) / 4),
      stage_{op.mult, op.clamp_min, op.clamp_max, op.out_zp},
      vector_stage_(spec.output == OutputKind::kRequantize && requantize4_fast(stage_) &&
                    pc.mults_finite),
#if defined(__SSE2__)
      constants_(stage_),
      offset_(_mm_set1_epi32(op.offset)),
#endif
      is_max_(spec.combine == Combine::kMax),
      out_(op.out),
      out_words_left_(op.out.steps()),
      narrow_(env.tile().narrow.data()),
      bias_store_(env.tile().bias_store.data()),
      output_words_(output_words_kernel()) {
  // Output words per group (the last one may differ: out_last_*), their biases checked once for
  // every group.
  if (op.out_last_mode != 0) {
    last_words_ = op.out_last_cnt + 1;
    last_skip_ = op.out_last_skip;
  }
  if (last_words_ > kColumns / 4)
    env.fail_op(cat("output group of ", last_words_, " words exceeds the 64 columns"));
  if (op.cfg4) {
    const uint64_t at = kBiasStoreBase + 4 * (groups - 1) * channels_;
    uint64_t end = at + 16 * last_words_;
    if (groups > 1) end = std::max(end, at - 4 * channels_ + 16 * full_words_);
    if (end > kBiasStoreBytes)
      env.fail_op(cat("bias store access ", kBiasStoreBase, "..", end, " outside ", kBiasStoreBytes,
                      " bytes"));
  }
}

void GroupWriter::take_words(uint64_t n) {
  if (out_words_left_ < n) env_.fail_op("`out` TTU exhausted before the last output word");
  out_words_left_ -= n;
  words_written_ += n;
}
const uint8_t* GroupWriter::biases(uint64_t group) const {
  return op_.cfg4 ? bias_store_ + kBiasStoreBase + 4 * group * channels_ : nullptr;
}
const uint8_t* GroupWriter::mults(uint64_t group) const {
  return pc_.mults ? pc_.mults + 4 * group * channels_ : nullptr;
}

void GroupWriter::emit(const int32_t* a, uint64_t group) {
  const bool last = is_last(group);
  const uint32_t words = last ? last_words_ : full_words_;
  take_words(words);
  const uint8_t* const group_biases = biases(group);
  const uint8_t* const group_mults = mults(group);
#if defined(__SSE2__)
  // One output word on the vector path: accumulator + bias + offset in int32 lanes (the 32-bit wrap
  // of the chip's accumulator, isa.md 2.1.4 step 1, is the lanes' own), then the output stage.
  auto write_word = [&](const int32_t* acc, const uint8_t* bias, const uint8_t* mult_bytes,
                        uint8_t* dst) {
    __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(acc));
    if (is_max_) v = _mm_andnot_si128(_mm_cmpeq_epi32(v, _mm_set1_epi32(empty_)), v);
    if (bias) v = _mm_add_epi32(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(bias)));
    const __m128 mult =
        mult_bytes ? _mm_loadu_ps(reinterpret_cast<const float*>(mult_bytes)) : constants_.mult;
    const int32_t bytes = requantize4_sse(_mm_add_epi32(v, offset_), constants_, mult);
    std::memcpy(dst, &bytes, 4);
  };
#endif
  for (uint32_t w = 0; w < words; ++w) {
    uint8_t* dst = narrow_ + out_.address();
    out_.next();
#if defined(__SSE2__)
    if (vector_stage_) {
      write_word(a + 4 * w, group_biases ? group_biases + 16 * w : nullptr,
                 group_mults ? group_mults + 16 * w : nullptr, dst);
      continue;
    }
#endif
    uint8_t bytes[4];
    int32_t acc32[4];
    for (uint32_t b = 0; b < 4; ++b) {
      const uint32_t c = 4 * w + b;
      int64_t value = is_max_ && a[c] == empty_ ? 0 : a[c];
      if (group_biases) {
        int32_t bias;
        std::memcpy(&bias, group_biases + 4 * c, 4);
        value += bias;
      }
      value += op_.offset;
      // The accumulator is 32 bits wide on the chip: wrap like it (isa.md 2.1.4 step 1).
      acc32[b] = static_cast<int32_t>(static_cast<uint32_t>(value));
    }
    OutputStage column_stage[4] = {stage_, stage_, stage_, stage_};
    if (group_mults)
      for (uint32_t b = 0; b < 4; ++b)
        std::memcpy(&column_stage[b].mult, group_mults + 16 * w + 4 * b, 4);
    for (uint32_t b = 0; b < 4; ++b)
      bytes[b] = spec_.output == OutputKind::kSpline
                     ? to_output_byte(
                           evaluate_spline(env_.nlu(), scale_and_clamp(acc32[b], column_stage[b])),
                           op_.out_zp)
                     : requantize(acc32[b], column_stage[b]);
    std::memcpy(dst, bytes, 4);
  }
  if (last)
    for (uint32_t k = 0; k < last_skip_ && out_words_left_ > 0; ++k, --out_words_left_) out_.next();
}

void GroupWriter::emit_batch(const int32_t* sums, uint32_t words, uint64_t group, uint64_t runs) {
  // Their addresses in one walk of `out`, then the output stage over all of them.
  const uint64_t total = runs * words;
  take_words(total);
  thread_local std::vector<int64_t> at_scratch;
  if (at_scratch.size() < total) at_scratch.resize(total);
  out_.take(at_scratch.data(), total);
  OutputWords o;
  o.sums = sums;
  o.stride = stride_;
  o.words = words;
  o.biases = biases(group);
  o.mults = mults(group);
  o.offset = op_.offset;
  o.is_max = is_max_;
  o.empty = empty_;
  output_words_(o, stage_, narrow_, at_scratch.data(), total);
}

}  // namespace tinycoral::chip::ops
