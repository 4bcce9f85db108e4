// ops::classify(): the first table entry whose identifying fields all match (see op_class_table.h).
#include "chip/ops/op_class_table.h"

#include <array>

namespace tinycoral::chip::ops {

bool matches(const ClassEntry& e, const OpInstr& op) {
  if (op.opcode != e.opcode || op.dp_mode != e.dp_mode || op.reduce_mask != e.reduce_mask ||
      op.nlu_mode != e.nlu_mode)
    return false;
  bool cfg0_ok = false;
  for (uint8_t i = 0; i < e.cfg0_count; ++i) cfg0_ok |= op.cfg0 == e.cfg0[i];
  if (!cfg0_ok) return false;
  return e.extra == nullptr || e.extra(op);
}

const OpClass* classify(const OpInstr& op) {
  // cfg3 8 (per-channel requantization) is not a class of its own: the MAC classes below run it
  // through the engine's per-channel output stage (per_channel.h).
  static const std::array<const ClassEntry*, 50> kTable = {
      // gen2020 ("frogfish") encodings, as in isa.md 2.1.2
      &kFullyConnected, &kConvKChunked, &kConvPositionOuter, &kDepthwiseConv, &kRequantize,
      &kLogistic, &kNarrowCopy, &kWordCopy, &kMulProduct, &kMulPack, &kAdd16, &kMaxPool,
      &kMaxPoolDp1, &kAvgPool, &kPositionSum, &kAdd16Gen2020, &kWordCopyReformat,
      &kRequantizeNested, &kAvgPoolRowSums16, &kAvgPoolOfHalfwords,
      // gen2021 ("grouper") encodings established in docs/chip_ops.md
      &kWordCopy2021, &kRequantize2021, &kConv2021, &kConvKChunked2021, &kDepthwiseNoPosition2021,
      &kConvNoPosition2021, &kFullyConnected2021, &kWordCopyReformat2021, &kRequantizeDp4,
      &kRequantizeDp0, &kLogistic2021, &kAdd16Dp4,
      // the Keras LSTM (docs/chip_ops.md 7); its 16-bit products before the softmax's, which
      // have no zero points
      &kLstmGate, &kLstmAdd16, &kLstmAdd16Spline, &kLstmProduct8, &kLstmProduct16,
      &kLstmProduct16To8, &kLstmWiden,
      // the on-tile softmax (docs/chip_ops.md 6.2)
      &kSoftmaxShiftConstant, &kSoftmaxSubtract, &kSoftmaxExponential, &kSoftmaxSumRsqrt,
      &kSoftmaxProduct16, &kSoftmaxPack16, &kSoftmaxScale16, &kFullyConnectedLongK,
      &kSoftmaxPerWord, &kSoftmaxPerWordExponential, &kSoftmaxWord16};
  for (const ClassEntry* e : kTable)
    if (matches(*e, op)) return &e->op_class;
  return nullptr;
}

}  // namespace tinycoral::chip::ops
