// How fast `tinycoral compile` handles MobileNets (the goal: MobileNet v1 1.0 in under 1 s on one
// core). BM_CompileMobileNet times compile_model on the CPU models of the test data (read, graph,
// partition, chain recognition and weight conversion, the generator's plan, the writer) and
// reports how many operators mapped; BM_CompileMiniatureMobileNet times a model the generator
// covers whole (conv, three depthwise/pointwise blocks, pool, 1001 classes) including code and
// parameter generation. BM_MobileNetChainParameters times the chain's recognition and its full
// parameter stream alone (the generator's largest output). MobileNet v1 0.25, 0.5, 1.0 and v2
// compile whole (docs/compiler.md "Whole MobileNets"); DeepLab v3 its backbone (the compile tries
// the whole mapped part, then the part before its ASPP branches). Pin to one core
// (`taskset -c 1`) for the one-core figure. Skips the test-data models when the test data is
// absent.
#include <benchmark/benchmark.h>

#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "compiler/compile.h"
#include "compiler/conv_codegen.h"
#include "compiler/conv_layer.h"
#include "compiler/graph.h"
#include "compiler/partition.h"
#include "container/tflite_writer.h"
#include "support/conv_twin.h"
#include "support/testdata.h"

namespace {

using namespace tinycoral;
using compiler::twins::ConvSpec;

const char* const kModels[] = {
    "gen2020/mobilenet_v1_0.25_128_quant.tflite",
    "gen2020/mobilenet_v1_0.5_160_quant.tflite",
    "gen2020/mobilenet_v1_1.0_224_quant_embedding_extractor.tflite",
    "gen2020/mobilenet_v2_1.0_224_quant.tflite",
    "gen2020/deeplabv3_mnv2_dm05_pascal_quant.tflite",
};

void report(benchmark::State& state, const compiler::CompileResult& r) {
  int mapped = 0;
  for (const compiler::LogRow& row : r.rows) mapped += row.mapped ? row.count : 0;
  state.counters["edgetpu_subgraphs"] = r.edgetpu_subgraphs;
  state.counters["mapped_ops"] = mapped;
  state.counters["out_bytes"] = static_cast<double>(r.tflite.size());
}

// The bytes of test-data model `index`, or empty (the state then says why).
std::vector<uint8_t> model_bytes(benchmark::State& state, int64_t index) {
  const auto dir = tinycoral::testing::testdata_dir();
  if (!dir) {
    state.SkipWithError("no test data (set TINYCORAL_TESTDATA)");
    return {};
  }
  const std::string name = kModels[index];
  std::ifstream in(*dir / name, std::ios::binary);
  std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(in), {}};
  if (bytes.empty()) state.SkipWithError(("missing " + name).c_str());
  state.SetLabel(name);
  return bytes;
}

void BM_MobileNetChainParameters(benchmark::State& state) {
  const std::vector<uint8_t> bytes = model_bytes(state, state.range(0));
  if (bytes.empty()) return;
  const compiler::Graph graph = compiler::import_graph_bytes(bytes);
  const compiler::Partition part = compiler::partition(graph);
  size_t parameter_bytes = 0;
  for (auto _ : state) {
    compiler::ConvChain chain;
    if (const std::string why = compiler::match_conv_chain(graph, part.mapped_ops, chain);
        !why.empty()) {
      state.SkipWithError(why.c_str());
      return;
    }
    parameter_bytes = compiler::conv_parameters(chain).size();
  }
  state.counters["parameter_bytes"] = static_cast<double>(parameter_bytes);
}

void BM_CompileMobileNet(benchmark::State& state) {
  const std::vector<uint8_t> bytes = model_bytes(state, state.range(0));
  if (bytes.empty()) return;
  compiler::CompileResult r;
  for (auto _ : state) {
    r = compiler::compile_model(bytes);
    benchmark::DoNotOptimize(r.tflite.data());
  }
  report(state, r);
}

void BM_CompileMiniatureMobileNet(benchmark::State& state) {
  const auto r6 = container::Activation::kRelu6;
  auto dw = [&](int stride) {
    ConvSpec s{0, 3, stride, true, true, true, r6};
    s.depthwise = true;
    return s;
  };
  ConvSpec pool{0, 4, 4};
  pool.pool = true;
  ConvSpec classes{1001, 1, 1, true};
  classes.softmax = true;
  std::mt19937 random(67);
  const auto side = static_cast<int>(state.range(0));
  const std::vector<uint8_t> bytes =
      container::write_tflite(compiler::twins::conv_twin(side, side, 3,
                                                         {{8, 3, 2, true, true, true, r6},
                                                          dw(1),
                                                          {16, 1, 1, true, true, true, r6},
                                                          dw(2),
                                                          {32, 1, 1, true, true, true, r6},
                                                          dw(2),
                                                          {64, 1, 1, true, true, true, r6},
                                                          pool,
                                                          classes},
                                                         random));
  state.SetLabel(std::to_string(side) + "x" + std::to_string(side) + "x3");
  compiler::CompileResult r;
  for (auto _ : state) {
    r = compiler::compile_model(bytes);
    benchmark::DoNotOptimize(r.tflite.data());
  }
  report(state, r);
}

BENCHMARK(BM_CompileMobileNet)->DenseRange(0, 4)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MobileNetChainParameters)->Arg(2)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_CompileMiniatureMobileNet)->Arg(32)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
