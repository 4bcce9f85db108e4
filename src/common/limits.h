// Every bound tinycoral puts on what an input may ask for, in one place (docs/limits.md lists them
// with the reasons). Models, images and programs come from the internet; each limit turns a hostile
// input into a one-line Error naming the limit instead of a crash, a hang or gigabytes of memory.
// Each is far above what a real model needs (the numbers in docs/limits.md), so only absurd input
// ever meets one.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tinycoral::limits {

constexpr uint64_t kMiB = uint64_t{1} << 20;

// Files, checked against the size the file system reports before anything is read.
constexpr uint64_t kMaxModelFileBytes = 512 * kMiB;  // .tflite, DWN1 package, bitstream
constexpr uint64_t kMaxImageFileBytes = 64 * kMiB;   // BMP, PNG, JPEG, PPM
constexpr uint64_t kMaxTextFileBytes = 16 * kMiB;    // labels, assembler source
constexpr uint64_t kMaxInputFileBytes = 512 * kMiB;  // raw input tensors

// Decoded images: width x height, checked from the header before decoding.
constexpr int64_t kMaxImagePixels = int64_t{1} << 26;  // 64 M pixels (8192 x 8192)

// CPU interpreter: one tensor, and the arena plus variable tensors of a whole graph.
constexpr int64_t kMaxTensorBytes = int64_t{1} << 30;  // 1 GiB
constexpr uint64_t kMaxArenaBytes = 1024 * kMiB;
constexpr size_t kMaxTensors = 100'000;  // tensors in one graph (planning is n log n .. n^2)

// Edge TPU executables: the device-side buffers the runtime zero-fills for one executable (inputs,
// outputs, scratch) and how often one layer may run per inference.
constexpr uint64_t kMaxDeviceBufferBytes = 256 * kMiB;
constexpr int32_t kMaxExecutionCount = 4096;

// Virtual Edge TPU, per bitstream: executed instructions (scalar bundles, unit instructions, and
// one per 4096 MACs), unit instruction instances kept until the program ends (one per tile an
// instruction is dispatched to), and the bitstream's size (decoding costs ~60 bytes per byte).
constexpr uint64_t kSimInstructionBudget = 50'000'000;
constexpr uint64_t kSimMaxWorkItems = 1'000'000;
// DMA descriptors and interrupts the host has not taken yet (the LSTM issues ~40 per inference).
constexpr size_t kSimMaxPendingEvents = size_t{1} << 20;
constexpr uint64_t kMaxBitstreamBytes = 4 * kMiB;  // the largest compiled one has 262 KB

}  // namespace tinycoral::limits
