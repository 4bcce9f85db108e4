// The larger sweep behind tests/compiler/eltwise_simulation_test.cpp: N random ADD and MUL models
// (shapes up to MAX_SIDE x MAX_SIDE x 48 and 400,000 elements, RELU/RELU6, int8 I/O, x op x;
// 1 in 6 a standalone RELU or RELU6)
// compiled by tinycoral, run on the virtual Edge TPU (two inferences) and compared with the CPU
// reference in `edgetpu` rounding. Prints every case that is refused or differs and the totals;
// exits 1 if any byte differs.
//   compiler_eltwise_bench [N=300] [SEED=1] [MAX_SIDE=128]
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "support/compiled_twin.h"
#include "support/eltwise_twin.h"
#include "support/same_bytes.h"

namespace {

using namespace tinycoral;
using compiler::testing::Case;

// What one inference costs on the stick as the simulator models it (250 MHz), and the program.
struct Cost {
  uint64_t cycles = 0;
  size_t instruction_bytes = 0;
};

// Bytes that differ on the first and second inference, or -1 when the model is not compiled.
std::pair<long, long> check(const Case& c, std::mt19937& random, size_t& bytes,
                            Cost* cost = nullptr) {
  const container::Model model = compiler::testing::twin(c, random);
  const compiler::testing::CompiledTwin compiled(model);
  if (compiled.result.edgetpu_subgraphs != 1) return {-1, -1};
  host::Interpreter cpu = compiler::testing::edgetpu_reference(model);
  int64_t elements = 1;
  for (int32_t d : c.shape) elements *= d;
  const uint8_t flip = c.int8_io ? 0x80 : 0;
  chip::testing::Buffers device;
  const char* names[2] = {"a", "b"};
  for (size_t i = 0; i < (c.same || c.relu ? 1u : 2u); ++i) {
    std::vector<uint8_t> x(static_cast<size_t>(elements));
    for (auto& v : x) v = static_cast<uint8_t>(random());
    cpu.set_input(i, x);
    for (auto& v : x) v ^= flip;
    device[names[i]] = std::move(x);
  }
  cpu.invoke();
  const auto want = cpu.output_bytes(0);
  bytes = want.size();
  chip::VirtualEdgeTpu tpu;
  long differ[2] = {0, 0};
  for (long& d : differ) {
    std::vector<uint8_t> got = compiled.infer(tpu, device);
    for (auto& v : got) v ^= flip;
    d = static_cast<long>(compiler::testing::differing_bytes(got, want));
  }
  if (cost) {
    cost->cycles = tpu.stats().clock.last_program_cycles;
    for (const auto& b : compiled.exes.execution->bitstreams)
      cost->instruction_bytes += b.data.size();
  }
  return {differ[0], differ[1]};
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 300;
  const unsigned seed = argc > 2 ? static_cast<unsigned>(std::atoi(argv[2])) : 1u;
  const int max_side = argc > 3 ? std::atoi(argv[3]) : 128;
  std::mt19937 random(seed);
  int equal = 0, differ = 0, refused = 0;
  size_t total = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) {
    Case c;
    c.mul = random() % 2 == 1;
    c.shape = compiler::testing::random_shape(random, 400000, max_side);
    const unsigned kind = random() % 8;  // 5 of 8 plain, then RELU, RELU6, int8; 1 in 8 x op x
    c.act = kind == 5   ? container::Activation::kRelu
            : kind == 6 ? container::Activation::kRelu6
                        : container::Activation::kNone;
    c.int8_io = kind == 7;
    c.same = random() % 8 == 0;
    // 1 in 6 a standalone RELU or RELU6 instead.
    if (random() % 6 == 0) {
      c.relu = true;
      c.act = random() % 2 ? container::Activation::kRelu : container::Activation::kRelu6;
    }
    size_t bytes = 0;
    std::pair<long, long> d;
    try {
      d = check(c, random, bytes);
    } catch (const std::exception& e) {
      std::printf("DIFFERS  %s: %s\n", compiler::testing::describe(c).c_str(), e.what());
      ++differ;
      continue;
    }
    if (d.first < 0) {
      ++refused;
      std::printf("refused  %s\n", compiler::testing::describe(c).c_str());
    } else if (d.first || d.second) {
      ++differ;
      std::printf("DIFFERS  %s: %ld / %ld of %zu bytes\n", compiler::testing::describe(c).c_str(),
                  d.first, d.second, bytes);
    } else {
      ++equal;
      total += bytes;
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // MobileNet v2's residual shapes, ADD and MUL: the modeled time of one inference.
  for (const std::vector<int32_t>& shape :
       {std::vector<int32_t>{1, 56, 56, 24}, {1, 28, 28, 32}, {1, 14, 14, 64}})
    for (bool mul : {false, true}) {
      Case c;
      c.mul = mul;
      c.shape = shape;
      size_t bytes = 0;
      Cost cost;
      const auto d = check(c, random, bytes, &cost);
      std::printf("%s: %s, %zu instruction bytes, modeled %.3f ms at 250 MHz\n",
                  compiler::testing::describe(c).c_str(),
                  d.first == 0 && d.second == 0 ? "equal" : "DIFFERS", cost.instruction_bytes,
                  static_cast<double>(cost.cycles) / 250e3);
    }
  std::printf(
      "%d models: %d equal in every byte (%zu bytes x 2 inferences), %d differ, %d refused "
      "(%.1f s)\n",
      n, equal, total, differ, refused, seconds);
  return differ ? 1 : 0;
}
