// CPU reference interpreter speed: MobileNet v1 1.0 224 (Google's embedding-extractor CPU twin,
// gen2020) on one core, per SIMD level. Reports ms per inference and the achieved int8 GMAC/s of
// CONV_2D + DEPTHWISE_CONV_2D + FULLY_CONNECTED (MACs counted from the model's shapes).
#include <benchmark/benchmark.h>

#include "container/tflite_reader.h"
#include "host/interpreter.h"
#include "host/qgemm.h"
#include "support/testdata.h"

namespace {

using namespace tinycoral;

int64_t count_macs(const container::Model& m) {
  const auto& g = m.subgraphs.at(0);
  int64_t macs = 0;
  for (const auto& op : g.operators) {
    const int32_t code = m.code_of(op).builtin_code;
    auto elems = [&](int32_t t) {
      int64_t n = 1;
      for (int32_t d : g.tensors.at(static_cast<size_t>(t)).shape) n *= d;
      return n;
    };
    if (op.inputs.size() < 2) continue;
    const auto& w = g.tensors.at(static_cast<size_t>(op.inputs[1])).shape;
    if (code == static_cast<int32_t>(container::BuiltinOp::kConv2D))
      macs += elems(op.outputs[0]) * w[1] * w[2] * w[3];
    else if (code == static_cast<int32_t>(container::BuiltinOp::kDepthwiseConv2D))
      macs += elems(op.outputs[0]) * w[1] * w[2];
    else if (code == static_cast<int32_t>(container::BuiltinOp::kFullyConnected))
      macs += elems(op.outputs[0]) * w[1];
  }
  return macs;
}

void BM_MobileNetV1(benchmark::State& state) {
  const auto dir = tinycoral::testing::testdata_dir();
  if (!dir) {
    state.SkipWithError("test data not found (set TINYCORAL_TESTDATA)");
    return;
  }
  const auto level = static_cast<host::SimdLevel>(state.range(0));
  if (!host::simd_level_supported(level)) {
    state.SkipWithError("SIMD level not available on this CPU");
    return;
  }
  host::set_simd_level_override(level);
  container::Model model = container::read_tflite_file(
      *dir / "gen2020" / "mobilenet_v1_1.0_224_quant_embedding_extractor.tflite");
  const int64_t macs = count_macs(model);
  host::Interpreter it(std::move(model));
  std::vector<uint8_t> input(it.input(0).bytes);
  for (size_t i = 0; i < input.size(); ++i) input[i] = static_cast<uint8_t>(i * 31 % 255);
  it.set_input(0, input);
  for (auto _ : state) {
    it.invoke();
    benchmark::DoNotOptimize(it.output_bytes(0).data());
  }
  host::clear_simd_level_override();
  state.SetLabel(host::simd_level_name(level));
  state.counters["GMAC/s"] = benchmark::Counter(static_cast<double>(macs) * 1e-9,
                                                benchmark::Counter::kIsIterationInvariantRate);
  state.counters["MMAC"] = static_cast<double>(macs) * 1e-6;
}
BENCHMARK(BM_MobileNetV1)->DenseRange(0, 4)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
