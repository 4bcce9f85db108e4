// The dispatch table of op classes: each class file in this folder defines one ClassEntry (what
// identifies the class in the instruction's fields, how it runs, the evidence in its comment);
// op_class_table.cpp lists them and implements ops::classify() (declared in chip/tile.h).
#pragma once

#include "chip/tile.h"

namespace tinycoral::chip::ops {

struct ClassEntry {
  // Identifying fields (isa.md 2.1.2). reduce_mask and nlu_mode must match exactly; cfg0 must be
  // one of the listed values (0-terminated unless a listed value is 0: see cfg0_count).
  uint8_t opcode = 0;
  uint8_t dp_mode = 0;
  uint32_t cfg0[4] = {};
  uint8_t cfg0_count = 0;
  uint8_t reduce_mask = 0;
  uint8_t nlu_mode = 0;
  // Further distinguishing test (cfg2/cfg3 ...), or nullptr.
  bool (*extra)(const OpInstr& op) = nullptr;
  OpClass op_class;
};

bool matches(const ClassEntry& entry, const OpInstr& op);

// One entry per class file.
extern const ClassEntry kFullyConnected;
extern const ClassEntry kConvKChunked;
extern const ClassEntry kConvPositionOuter;
extern const ClassEntry kDepthwiseConv;
extern const ClassEntry kRequantize;
extern const ClassEntry kRequantizeNested;
extern const ClassEntry kRequantizeDp4;
extern const ClassEntry kRequantizeDp0;
extern const ClassEntry kLogistic;
extern const ClassEntry kLogistic2021;
extern const ClassEntry kNarrowCopy;
extern const ClassEntry kWordCopy;
extern const ClassEntry kWordCopyReformat;
extern const ClassEntry kWordCopyReformat2021;
extern const ClassEntry kMulProduct;
extern const ClassEntry kMulPack;
extern const ClassEntry kAdd16;
extern const ClassEntry kMaxPool;
extern const ClassEntry kMaxPoolDp1;
extern const ClassEntry kAvgPool;
extern const ClassEntry kPositionSum;
extern const ClassEntry kAvgPoolRowSums16;
extern const ClassEntry kAvgPoolOfHalfwords;
extern const ClassEntry kWordCopy2021;
extern const ClassEntry kRequantize2021;
extern const ClassEntry kConv2021;
extern const ClassEntry kAdd16Gen2020;
extern const ClassEntry kAdd16Dp4;
extern const ClassEntry kConvKChunked2021;
extern const ClassEntry kDepthwiseNoPosition2021;
extern const ClassEntry kConvNoPosition2021;
extern const ClassEntry kFullyConnected2021;
extern const ClassEntry kFullyConnectedLongK;
// The on-tile softmax (softmax.cpp)
extern const ClassEntry kSoftmaxShiftConstant;
extern const ClassEntry kSoftmaxSubtract;
extern const ClassEntry kSoftmaxExponential;
extern const ClassEntry kSoftmaxSumRsqrt;
extern const ClassEntry kSoftmaxPerWord;
extern const ClassEntry kSoftmaxWord16;
extern const ClassEntry kSoftmaxPerWordExponential;
extern const ClassEntry kSoftmaxProduct16;
extern const ClassEntry kSoftmaxPack16;
extern const ClassEntry kSoftmaxScale16;
// The Keras LSTM (lstm.cpp)
extern const ClassEntry kLstmGate;
extern const ClassEntry kLstmAdd16;
extern const ClassEntry kLstmAdd16Spline;
extern const ClassEntry kLstmProduct8;
extern const ClassEntry kLstmProduct16;
extern const ClassEntry kLstmProduct16To8;
extern const ClassEntry kLstmWiden;

}  // namespace tinycoral::chip::ops
