// Host-side cost of one inference: runtime plus transport (bulk framing, URB bookkeeping, segment
// scheduling, input/output copies, de-tiling), with the chip replaced by a trivial HostPort so the
// simulation is not measured. Two shapes: a single FC-sized program, and MobileNet v1's hints
// (instr, 49152-byte input, 1008-byte output, interrupt; docs/driver.md). Goal: < 20 us per call.
#include <benchmark/benchmark.h>

#include <memory>

#include "runtime/edgetpu.h"
#include "runtime/program.h"
#include "usb/fake_chip.h"
#include "usb/test_programs.h"
#include "usb/virtual_stick.h"
#include "usb/virtual_transport.h"

namespace tinycoral {
namespace {

void run_shape(benchmark::State& state, uint32_t input_bytes, uint32_t output_bytes) {
  testing::FakeChip chip;
  usb::VirtualStick stick(chip, usb::VirtualStick::Mode::kApplication);
  runtime::EdgeTpu tpu(std::make_unique<usb::VirtualTransport>(stick), nullptr, nullptr);
  auto caching = std::make_shared<runtime::Program>(testing::make_caching(4096));
  auto inference =
      std::make_shared<runtime::Program>(testing::make_inference(input_bytes, {output_bytes}));
  std::vector<uint8_t> input(input_bytes, 3), output(output_bytes);
  tpu.run(caching, inference);  // weights resident from here on
  for (auto _ : state) {
    inference->set_input(0, input);
    tpu.run(caching, inference);
    inference->get_output(0, output);
    benchmark::DoNotOptimize(output.data());
  }
  if (!stick.violations().empty()) state.SkipWithError(stick.violations().front().c_str());
  state.SetBytesProcessed(int64_t(state.iterations()) * (input_bytes + output_bytes));
}

// A fully connected layer: 1024 inputs, 16 outputs.
void BM_FcProgram(benchmark::State& state) { run_shape(state, 1024, 16); }
BENCHMARK(BM_FcProgram);

// MobileNet v1 0.25/128: 128x128x3 input, 1001 classes padded to 1008.
void BM_MobileNetHints(benchmark::State& state) { run_shape(state, 49152, 1008); }
BENCHMARK(BM_MobileNetHints);

}  // namespace
}  // namespace tinycoral

BENCHMARK_MAIN();
