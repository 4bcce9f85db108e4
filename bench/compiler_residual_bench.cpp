// The larger sweep behind tests/compiler/residual_chain_test.cpp: N random chains of MobileNet v2
// inverted residual blocks (a stem conv, then 1-3 blocks expand 1x1 -> depthwise 3x3 -> project 1x1
// -> ADD with the block's input, or in a third of the chains ResNet's basic blocks 3x3 -> 3x3 ->
// ADD + RELU; random sizes, channels past whole groups of 64, operand order, RELU on some ADDs)
// compiled by tinycoral, run on the virtual Edge TPU (two inferences) and compared with the CPU
// reference in `edgetpu` rounding. Prints every chain that is refused or differs and the totals;
// exits 1 if any byte differs.
//   compiler_residual_bench [N=100] [SEED=1]
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "support/compiled_twin.h"
#include "support/conv_twin.h"
#include "support/same_bytes.h"

namespace {

using namespace tinycoral;
using compiler::twins::ConvSpec;
using container::Activation;

ConvSpec conv(int cout, int k, int stride, Activation act) {
  ConvSpec s;
  s.cout = cout;
  s.k = k;
  s.stride = stride;
  s.act = act;
  return s;
}

// Bytes that differ on the two inferences, or {-1, -1} with the log's reason when refused.
std::pair<long, long> check(int h, int w, int cin, const std::vector<ConvSpec>& specs,
                            std::mt19937& random, size_t& bytes, std::string& why) {
  const container::Model twin = compiler::twins::conv_twin(h, w, cin, specs, random);
  const compiler::testing::CompiledTwin compiled(twin);
  if (compiled.result.edgetpu_subgraphs != 1) {
    why = compiled.reason();
    return {-1, -1};
  }
  host::Interpreter cpu = compiler::testing::edgetpu_reference(twin);
  const auto x = compiler::testing::random_bytes(static_cast<size_t>(h) * w * cin, random);
  const std::vector<uint8_t> want = compiler::testing::reference_output(cpu, x);
  bytes = want.size();
  chip::VirtualEdgeTpu tpu;
  compiled.cache_parameters(tpu);
  long differ[2] = {0, 0};
  for (long& d : differ)
    d = static_cast<long>(
        compiler::testing::differing_bytes(compiled.infer(tpu, {{"x", x}}), want));
  return {differ[0], differ[1]};
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 100;
  const unsigned seed = argc > 2 ? static_cast<unsigned>(std::atoi(argv[2])) : 1u;
  std::mt19937 random(seed);
  int equal = 0, differ = 0, refused = 0;
  size_t total = 0;
  const auto start = std::chrono::steady_clock::now();
  const int channels[] = {8, 12, 16, 24, 32, 40, 64};
  for (int i = 0; i < n; ++i) {
    const int h = 4 + static_cast<int>(random() % 29), w = 4 * (1 + static_cast<int>(random() % 8));
    const int stem_stride = 1 + static_cast<int>(random() % 2);
    const int c = channels[random() % 7];
    std::vector<ConvSpec> specs = {conv(c, 3, stem_stride, Activation::kRelu6)};
    const int blocks = 1 + static_cast<int>(random() % 3);
    const bool resnet = random() % 3 == 0;  // ResNet basic blocks: 3x3, 3x3, ADD
    for (int b = 0; b < blocks; ++b) {
      const int from = static_cast<int>(specs.size());
      if (resnet) {
        specs.push_back(conv(c, 3, 1, Activation::kRelu));
        specs.push_back(conv(c, 3, 1, Activation::kNone));
        ConvSpec add;
        add.residual_from = from;
        add.add_first = random() % 2 == 0;
        add.act = Activation::kRelu;
        specs.push_back(add);
        continue;
      }
      const int t = 1 + static_cast<int>(random() % 6);
      ConvSpec dw = conv(0, 3, 1, Activation::kRelu6);
      dw.depthwise = true;
      specs.push_back(conv(c * t, 1, 1, Activation::kRelu6));
      specs.push_back(dw);
      specs.push_back(conv(c, 1, 1, Activation::kNone));
      ConvSpec add;
      add.residual_from = from;
      add.add_first = random() % 2 == 0;
      add.act = random() % 4 == 0 ? Activation::kRelu : Activation::kNone;
      specs.push_back(add);
    }
    const std::string what = compiler::twins::describe(h, w, 8, specs);
    size_t bytes = 0;
    std::string why;
    std::pair<long, long> d;
    try {
      d = check(h, w, 8, specs, random, bytes, why);
    } catch (const std::exception& e) {
      std::printf("DIFFERS  %s: %s\n", what.c_str(), e.what());
      ++differ;
      continue;
    }
    if (d.first < 0) {
      ++refused;
      std::printf("refused  %s: %s\n", what.c_str(), why.c_str());
    } else if (d.first || d.second) {
      ++differ;
      std::printf("DIFFERS  %s: %ld / %ld of %zu bytes\n", what.c_str(), d.first, d.second, bytes);
    } else {
      ++equal;
      total += bytes;
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "%d chains: %d equal in every byte (%zu bytes x 2 inferences), %d differ, %d "
      "refused (%.1f s)\n",
      n, equal, total, differ, refused, seconds);
  return differ ? 1 : 0;
}
