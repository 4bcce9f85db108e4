// PoseNet-shaped twins (twins::posenet_twin: MobileNet v1 0.75's trunk at output stride 16 and
// PoseNet's three heads, random weights) at Google's three input sizes, 353 x 481, 481 x 641 and
// 721 x 1281 (and with half the channels at the larger two: the chain the suite's test keeps in
// small): each compiled by `compile_model`, run through the runtime's delegate on the virtual
// Edge TPU and compared byte by byte with the CPU reference in `edgetpu` rounding. Counters: mapped
// (1 when the whole trunk and heads compiled into one program; else 0 and the reason on stderr),
// differing bytes over the three outputs (an error when not 0) and the compared bytes (the suite's
// posenet_sizes_test keeps the half-channel 481 x 641 twin and a small chain of the same new
// path). POSENET_TWIN_DIR=dir also writes each twin as dir/posenet_twin_HxW.tflite (for
// `tinycoral compile` and `tinycoral run --device sim --json`, which models the stick's time).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <random>

#include "common/file.h"
#include "container/tflite_reader.h"
#include "support/compiled_twin.h"
#include "support/heads_twin.h"

namespace {

using namespace tinycoral;

void BM_PoseNetTwin(benchmark::State& state) {
  const int h = static_cast<int>(state.range(0)), w = static_cast<int>(state.range(1));
  const int divisor = static_cast<int>(state.range(2));
  std::mt19937 random(20261205);
  const container::Model twin = compiler::twins::posenet_twin(h, w, random, divisor);
  if (const char* dir = std::getenv("POSENET_TWIN_DIR"))
    write_file(
        cat(dir, "/posenet_twin_", h, "x", w, divisor > 1 ? cat("_d", divisor) : "", ".tflite"),
        container::write_tflite(twin));
  int64_t mapped = 0, differing = 0, compared = 0;
  for (auto _ : state) {
    const compiler::testing::CompiledTwin compiled(twin);
    mapped = compiled.result.edgetpu_subgraphs == 1 ? 1 : 0;
    if (!mapped) {
      std::fprintf(stderr, "%d x %d stays on the CPU: %s\n", h, w, compiled.reason().c_str());
      continue;
    }
    host::Interpreter cpu = compiler::testing::edgetpu_reference(twin);
    host::Interpreter tpu = compiler::testing::virtual_edgetpu_interpreter(
        container::read_tflite(compiled.result.tflite));
    const auto x = compiler::testing::random_bytes(static_cast<size_t>(h) * w * 3, random);
    cpu.set_input(0, x);
    cpu.invoke();
    tpu.set_input(0, x);
    tpu.invoke();
    for (size_t o = 0; o < cpu.num_outputs(); ++o) {
      const auto want = cpu.output_bytes(o), got = tpu.output_bytes(o);
      compared += static_cast<int64_t>(want.size());
      for (size_t b = 0; b < want.size(); ++b) differing += b >= got.size() || got[b] != want[b];
    }
  }
  state.counters["mapped"] = static_cast<double>(mapped);
  state.counters["differing_bytes"] = static_cast<double>(differing);
  state.counters["compared_bytes"] = static_cast<double>(compared);
  if (differing != 0) state.SkipWithError("outputs differ from the CPU reference");
}
BENCHMARK(BM_PoseNetTwin)
    ->Args({353, 481, 1})
    ->Args({481, 641, 1})
    ->Args({721, 1281, 1})
    ->Args({481, 641, 2})
    ->Args({721, 1281, 2})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
