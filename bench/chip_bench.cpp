// Simulated inference time of Google's compiled programs on the virtual Edge TPU (wall time per
// execution-program run, parameters cached once), with MACs per second as a counter. The programs
// run to the end and equal their CPU twins (docs/chip.md "Status"). The twin of MobileNet v1 0.25
// on the reference interpreter (`edgetpu` rounding, the same input) runs alongside: the simulator's
// speed goal is stated as a ratio to it (docs/chip.md "Speed").
#include <benchmark/benchmark.h>

#include "../tests/chip/sim_runner.h"
#include "container/tflite_reader.h"
#include "host/interpreter.h"
#include "support/testdata.h"

namespace {

using namespace tinycoral;

void run_model(benchmark::State& state, const char* relative) {
  const auto dir = tinycoral::testing::testdata_dir();
  if (!dir) {
    state.SkipWithError("test data not found");
    return;
  }
  try {
    const auto model = container::read_edgetpu_model_file(*dir / relative);
    const auto exes = chip::testing::executables_of(model);
    chip::testing::Buffers inputs;
    for (const auto& layer : exes.execution->input_layers)
      inputs[layer.name].assign(layer.size_bytes, 0x80);
    chip::VirtualEdgeTpu chip;
    if (exes.caching) chip::testing::run_executable(chip, *exes.caching, {});
    const uint64_t macs_before = chip.stats().macs;
    uint64_t runs = 0;
    for (auto _ : state) {
      auto out = chip::testing::run_executable(chip, *exes.execution, inputs);
      benchmark::DoNotOptimize(out);
      ++runs;
    }
    state.counters["MAC/s"] = benchmark::Counter(
        static_cast<double>(chip.stats().macs - macs_before), benchmark::Counter::kIsRate);
    state.counters["MACs/run"] =
        runs ? static_cast<double>(chip.stats().macs - macs_before) / runs : 0;
  } catch (const Error& e) {
    state.SkipWithError(e.what());
  }
}

void BM_SplitConcat(benchmark::State& state) {
  run_model(state, "gen2021/split_concat_edgetpu.tflite");
}
void BM_MobileNetV1_025(benchmark::State& state) {
  run_model(state, "gen2020/mobilenet_v1_0.25_128_quant_edgetpu.tflite");
}
// The same PoseNet compiled twice: gen2020 per-tensor, gen2021 (edgetpu_compiler 16.0) per-channel
// int8; MAC/s compares the per-channel output stage with the per-tensor one on the same layers.
void BM_PoseNet_PerTensor(benchmark::State& state) {
  run_model(state, "gen2020/posenet_mobilenet_v1_075_353_481_quant_decoder_edgetpu.tflite");
}
void BM_PoseNet_PerChannel(benchmark::State& state) {
  run_model(state, "gen2021/posenet_mobilenet_v1_075_353_481_16_quant_decoder_edgetpu.tflite");
}
// One per-channel FULLY_CONNECTED (512x512, resident weights) and one 7x7 depthwise (libredgetpu).
void BM_Dense512_PerChannel(benchmark::State& state) {
  run_model(state, "libredgetpu/dense_512_edgetpu.tflite");
}
void BM_Gabor7x7_PerChannel(benchmark::State& state) {
  run_model(state, "libredgetpu/gabor_64x64_7k_4o_2s_edgetpu.tflite");
}
void BM_MobileNetV1_025_Twin(benchmark::State& state) {
  const auto dir = tinycoral::testing::testdata_dir();
  if (!dir) {
    state.SkipWithError("test data not found");
    return;
  }
  try {
    host::InterpreterOptions options;
    options.rounding = host::Rounding::kEdgeTpu;
    host::Interpreter cpu(
        container::read_tflite_file(*dir / "gen2020/mobilenet_v1_0.25_128_quant.tflite"), options);
    const std::vector<uint8_t> input(cpu.input(0).bytes, 0x80);
    cpu.set_input(0, input);
    for (auto _ : state) {
      cpu.invoke();
      benchmark::DoNotOptimize(cpu.output_bytes(0).data());
    }
  } catch (const Error& e) {
    state.SkipWithError(e.what());
  }
}
BENCHMARK(BM_SplitConcat)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MobileNetV1_025)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MobileNetV1_025_Twin)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PoseNet_PerTensor)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PoseNet_PerChannel)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Dense512_PerChannel)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Gabor7x7_PerChannel)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
