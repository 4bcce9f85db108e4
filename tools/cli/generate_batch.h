// `tinycoral generate --batch B`: B stories at once (llm/batch.h), the layer matmuls of each step
// computed for all of them together, on the CPU in int8 or on an Edge TPU as one program per
// matmul. Sequence i gets the prompt and seed + i; its text is what the int8 path writes for that
// seed alone. Stories go to stdout one after another (a blank line between them), or as one JSON
// object with a "sequences" array; stderr has the aggregate speed and, on the simulator, the
// modeled stick's.
#pragma once

#include <cstdint>
#include <string>

#include "llm/checkpoint.h"
#include "llm/int8_model.h"
#include "llm/thread_pool.h"
#include "llm/tokenizer.h"
#include "runtime/edgetpu.h"

namespace tinycoral::cli {

struct BatchOptions {
  int batch = 1;
  std::string prompt;
  int steps = 256;
  float temperature = 1.0f, topp = 0.9f;
  uint64_t seed = 1;
  int calibration = 64;
  bool json = false;
  llm::Int8Options arithmetic;
  bool values_on_host = false;  // fused layers on a chip: the host computes u (batch_chip.h)
};

// `tpu` null: the CPU. Throws Error for a bad batch.
void generate_batch_command(const BatchOptions& o, const llm::Checkpoint& ck,
                            const llm::Tokenizer& tokenizer, llm::ThreadPool& pool,
                            runtime::EdgeTpu* tpu);

}  // namespace tinycoral::cli
