// The CONV_2D generator's larger sweep (the suite's conv_simulation_test runs a few dozen small
// shapes): random layers (also on 1-3 channel images) and chains on images up to 32 x 32, each
// compiled by `compile_model`, run on the virtual Edge TPU and compared byte by byte with the CPU
// reference in `edgetpu` rounding. Reports cases, compared bytes and mismatching cases as counters
// (a mismatch is an error), and the time per case (compile + caching + one inference + the CPU
// reference).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <random>

#include "support/compiled_twin.h"
#include "support/conv_twin.h"
#include "support/same_bytes.h"

namespace {

using namespace tinycoral;
using compiler::twins::ConvSpec;

// Compiles and runs one case; returns the number of differing bytes (or -1 when not compiled).
int64_t run_case(int h, int w, int cin, const std::vector<ConvSpec>& specs, std::mt19937& random,
                 size_t& bytes) {
  const container::Model twin = compiler::twins::conv_twin(h, w, cin, specs, random);
  const compiler::testing::CompiledTwin compiled(twin);
  if (compiled.result.edgetpu_subgraphs != 1) {
    if (std::getenv("CONV_BENCH_VERBOSE"))
      std::fprintf(stderr, "refused: %s\n", compiled.reason().c_str());
    return -1;
  }
  host::Interpreter cpu = compiler::testing::edgetpu_reference(twin);
  const auto x = compiler::testing::random_bytes(static_cast<size_t>(h) * w * cin, random);
  const std::vector<uint8_t> want = compiler::testing::reference_output(cpu, x);
  chip::VirtualEdgeTpu chip;
  compiled.cache_parameters(chip);
  bytes += want.size();
  return static_cast<int64_t>(
      compiler::testing::differing_bytes(compiled.infer(chip, {{"x", x}}), want));
}

// A sweep's cases, refused and mismatching ones, and compared bytes, reported as counters.
struct Tally {
  benchmark::State& state;
  int64_t cases = 0, failed = 0, refused = 0;
  size_t bytes = 0;

  // Runs one case; false (the benchmark stopped with the case's description) when bytes differ.
  bool run(int h, int w, int cin, const std::vector<ConvSpec>& specs, std::mt19937& random) {
    const int64_t d = run_case(h, w, cin, specs, random, bytes);
    ++cases;
    if (d < 0) ++refused;
    if (d <= 0) return true;
    ++failed;
    state.SkipWithError(compiler::twins::describe(h, w, cin, specs).c_str());
    return false;
  }
  void report() const {
    state.counters["cases"] = static_cast<double>(cases);
    state.counters["refused"] = static_cast<double>(refused);
    state.counters["mismatching"] = static_cast<double>(failed);
    state.counters["bytes_equal"] = static_cast<double>(bytes);
  }
};

void sweep(benchmark::State& state, bool chains, bool few_channels = false) {
  std::mt19937 random(static_cast<uint32_t>(state.range(0)));
  Tally tally{state};
  for (auto _ : state) {
    const auto c = few_channels ? compiler::twins::random_few_channel_case(random, 32)
                                : compiler::twins::random_case(random, 32);
    std::vector<ConvSpec> specs{c.spec};
    if (chains)
      specs = compiler::twins::random_chain(c.spec, 2 + static_cast<int>(random() % 3), random);
    if (!tally.run(c.h, c.w, c.cin, specs, random)) break;
  }
  tally.report();
}

// MobileNet-like chains: depthwise (k 1/3/5, stride 1/2, SAME) and pointwise layers in turn on
// images up to 32 x 32 with 4..192 channels, sometimes ended by a VALID average pool over the
// whole map (depthwise op groups of 4 channels, groups sharing pool rows).
void BM_DepthwiseRandomChains(benchmark::State& state) {
  std::mt19937 random(static_cast<uint32_t>(state.range(0)));
  static const int kChannels[] = {4, 8, 12, 16, 32, 64, 128, 192};
  static const int kK[] = {1, 3, 3, 5};
  Tally tally{state};
  for (auto _ : state) {
    const int h = 2 + static_cast<int>(random() % 31), w = 2 + static_cast<int>(random() % 31);
    const int cin = kChannels[random() % 8];
    std::vector<ConvSpec> specs;
    const int blocks = 1 + static_cast<int>(random() % 3);
    int oh = h, ow = w;
    for (int b = 0; b < blocks; ++b) {
      ConvSpec dw{0,    kK[random() % 4],  1 + static_cast<int>(random() % 2),
                  true, random() % 2 == 0, random() % 2 == 0};
      dw.depthwise = true;
      specs.push_back(dw);
      oh = (oh + dw.stride - 1) / dw.stride;
      ow = (ow + dw.stride - 1) / dw.stride;
      specs.push_back({kChannels[random() % 8], 1, 1, true, true, random() % 2 == 0});
    }
    if (random() % 2 == 0) {
      ConvSpec pool{0, 1, 1};
      pool.pool = true;
      pool.k = std::min(oh, ow);
      pool.stride = pool.k;
      if (oh == ow) specs.push_back(pool);
    }
    if (!tally.run(h, w, cin, specs, random)) break;
  }
  tally.report();
}

// The simulator's modeled stick time (250 MHz) of one inference of fixed layers: the first conv of
// MobileNet v1 0.25 at 128 (128x128x3 -> 3x3 s2 SAME -> 8), a 3x3 conv on 32x32x32 -> 32, and a
// three-layer chain with a classifier.
void BM_ConvModeledTime(benchmark::State& state) {
  std::mt19937 random(41);
  std::vector<ConvSpec> specs;
  int h = 0, w = 0, cin = 0;
  switch (state.range(0)) {
    case 0:
      h = w = 128, cin = 3, specs = {{8, 3, 2, true}};
      break;
    case 1:
      h = w = 32, cin = 32, specs = {{32, 3, 1, true}};
      break;
    default: {
      ConvSpec fc{10};
      fc.fc = true;
      h = w = 32, cin = 4, specs = {{16, 3, 2, true}, {32, 3, 2, true}, {32, 3, 2, true}, fc};
    }
  }
  const compiler::testing::CompiledTwin compiled(
      compiler::twins::conv_twin(h, w, cin, specs, random));
  const chip::testing::PackageExecutables& exes = compiled.exes;
  chip::VirtualEdgeTpu chip;
  compiled.cache_parameters(chip);
  std::vector<uint8_t> x(static_cast<size_t>(h) * w * cin, 7);
  uint64_t cycles = 0;
  for (auto _ : state) {
    chip::testing::run_executable(chip, *exes.execution, {{"x", x}});
    cycles = chip.stats().clock.last_program_cycles;
  }
  state.SetLabel(compiler::twins::describe(h, w, cin, specs));
  state.counters["modeled_ms_250MHz"] = static_cast<double>(cycles) / 250e3;
  state.counters["instruction_bytes"] =
      static_cast<double>(exes.execution->bitstreams.at(0).data.size());
}

void BM_ConvRandomLayers(benchmark::State& state) { sweep(state, false); }
void BM_ConvRandomChains(benchmark::State& state) { sweep(state, true); }
void BM_ConvFewChannelLayers(benchmark::State& state) { sweep(state, false, true); }

BENCHMARK(BM_ConvRandomLayers)->Arg(1)->Iterations(300)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ConvRandomChains)->Arg(2)->Iterations(100)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ConvModeledTime)->DenseRange(0, 2)->Iterations(3)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DepthwiseRandomChains)->Arg(4)->Iterations(100)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ConvFewChannelLayers)->Arg(3)->Iterations(200)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
