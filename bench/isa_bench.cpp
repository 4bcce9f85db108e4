// Decode, encode, print and parse throughput (MB/s of bitstream) on the MobileNet programs of
// Google's test data. Without the test data there is nothing to measure: it says so and exits 0.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <iostream>

#include "container/edgetpu_model.h"
#include "isa/isa.h"
#include "support/testdata.h"

namespace {

using namespace tinycoral;

struct Corpus {
  std::string name;
  std::vector<std::vector<uint8_t>> bitstreams;
  size_t bytes = 0;
};

std::vector<Corpus> load_mobilenets() {
  std::vector<Corpus> out;
  const auto dir = tinycoral::testing::testdata_dir();
  if (!dir) return out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(*dir)) {
    const std::string file = e.path().filename().string();
    if (!file.starts_with("mobilenet") || !file.ends_with("_edgetpu.tflite")) continue;
    Corpus c;
    c.name = e.path().parent_path().filename().string() + "/" + file;
    const auto model = container::read_edgetpu_model_file(e.path());
    for (const auto& op : model.edgetpu_ops) {
      for (const auto& package : op.options.packages) {
        for (const auto& exe : package.executables) {
          for (const auto& bs : exe.bitstreams) {
            c.bitstreams.push_back(bs.data);
            c.bytes += bs.data.size();
          }
        }
      }
    }
    out.push_back(std::move(c));
  }
  return out;
}

void decode_all(benchmark::State& state, const Corpus& c) {
  for (auto _ : state) {
    for (const auto& bs : c.bitstreams) benchmark::DoNotOptimize(isa::decode(bs));
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(c.bytes));
}

void encode_all(benchmark::State& state, const Corpus& c) {
  std::vector<std::vector<isa::Instruction>> programs;
  for (const auto& bs : c.bitstreams) programs.push_back(isa::decode(bs));
  for (auto _ : state) {
    for (const auto& p : programs) benchmark::DoNotOptimize(isa::encode(p));
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(c.bytes));
}

void print_all(benchmark::State& state, const Corpus& c) {
  std::vector<std::vector<isa::Instruction>> programs;
  for (const auto& bs : c.bitstreams) programs.push_back(isa::decode(bs));
  for (auto _ : state) {
    for (const auto& p : programs) benchmark::DoNotOptimize(isa::print_program(p));
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(c.bytes));
}

void parse_all(benchmark::State& state, const Corpus& c) {
  std::vector<std::string> texts;
  for (const auto& bs : c.bitstreams) texts.push_back(isa::print_program(isa::decode(bs)));
  for (auto _ : state) {
    for (const auto& t : texts) benchmark::DoNotOptimize(isa::parse(t));
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(c.bytes));
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  static std::vector<Corpus> corpora;
  try {
    corpora = load_mobilenets();
  } catch (const std::exception& e) {
    std::cerr << "isa_bench: cannot read the MobileNet models: " << e.what() << "\n";
    return 2;
  }
  if (corpora.empty()) {
    std::cout << "isa_bench: no MobileNet *_edgetpu.tflite found; "
              << tinycoral::testing::testdata_hint() << "\n";
    return 0;
  }
  for (const auto& c : corpora) {
    benchmark::RegisterBenchmark(("decode/" + c.name).c_str(), decode_all, std::cref(c));
    benchmark::RegisterBenchmark(("encode/" + c.name).c_str(), encode_all, std::cref(c));
    benchmark::RegisterBenchmark(("print/" + c.name).c_str(), print_all, std::cref(c));
    benchmark::RegisterBenchmark(("parse/" + c.name).c_str(), parse_all, std::cref(c));
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
