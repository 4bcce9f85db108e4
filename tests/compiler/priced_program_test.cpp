// The placement search prices each candidate layout by a counting emitter, whose instruction
// fields are keys (compiler/fields.h), not text: a TileBatch joins tiles whose keys are equal.
// The counts must be the words the emitter writes for the same layout, or the search would pick
// layouts by programs it never writes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/file.h"
#include "compiler/conv_codegen.h"
#include "compiler/conv_hand_over.h"
#include "compiler/conv_layer.h"
#include "compiler/graph.h"
#include "compiler/partition.h"
#include "support/testdata.h"

namespace tinycoral::compiler {
namespace {

// MobileNet v1 0.25's chain (68 layouts priced: its 1x1 and 3x3 stages, hand-overs in rounds and
// gathers) and the first 10 layers of v2's (30 layouts: expansions over 112 x 112 images, the
// first residual ADD). v2's whole chain agrees too (78 layouts) but takes 5 s, more under a
// sanitizer.
TEST(PricedProgram, CountedWordsAreTheWordsOfTheEmittedProgram) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  struct Case {
    std::string model;
    size_t layers;  // the chain's first layers priced (0: all)
    bool adds;      // whether they hold a residual ADD
  };
  for (const Case& c : {Case{"gen2020/mobilenet_v1_0.25_128_quant", 0, false},
                        Case{"gen2020/mobilenet_v2_1.0_224_quant", 10, true}}) {
    SCOPED_TRACE(c.model);
    const Graph graph = import_graph_bytes(read_file(data / (c.model + ".tflite")));
    // (The chain without the classifier's SOFTMAX, which the pipeline leaves to the CPU.)
    std::vector<int> ops = partition(graph).mapped_ops;
    ops.pop_back();
    ConvChain chain;
    ASSERT_EQ(match_conv_chain(graph, ops, chain), "");
    if (c.layers > 0) chain.layers.resize(c.layers);
    EXPECT_EQ(std::any_of(chain.layers.begin(), chain.layers.end(),
                          [](const ConvLayer& l) { return l.residual(); }),
              c.adds);
    // (The host's image as the pipeline first tries it: repacked on the chip, else as it is.)
    if (!repack_input_on_chip(chain)) pad_input_on_host(chain);
    ASSERT_EQ(conv_unsupported(chain), "");
    const std::vector<std::pair<uint32_t, uint32_t>> words = priced_program_words(chain);
    EXPECT_GT(words.size(), 10u);  // (the search tries many layouts)
    for (size_t k = 0; k < words.size(); ++k)
      ASSERT_EQ(words[k].first, words[k].second) << "layout " << k;
  }
}

// The search keeps each hand-over's count (conv::HandOverCounts, keyed on its transfers whole)
// and takes it again for every later hand-over with the same transfers, whatever stages and
// ordinal they come from. With `verify` every such hit is counted again from its own stages and
// ordinal and must agree (hand_over fails otherwise): a key that missed something the count
// depends on would show here as two different hand-overs sharing an entry.
TEST(PricedProgram, KeptHandOverCountsAreTheCountsOfEveryHandOverTakingThem) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  for (const auto& [model, layers] :
       {std::pair<std::string, size_t>{"gen2020/mobilenet_v1_0.25_128_quant", 0},
        std::pair<std::string, size_t>{"gen2020/mobilenet_v2_1.0_224_quant", 10}}) {
    SCOPED_TRACE(model);
    const Graph graph = import_graph_bytes(read_file(data / (model + ".tflite")));
    std::vector<int> ops = partition(graph).mapped_ops;
    ops.pop_back();
    ConvChain chain;
    ASSERT_EQ(match_conv_chain(graph, ops, chain), "");
    if (layers > 0) chain.layers.resize(layers);
    if (!repack_input_on_chip(chain)) pad_input_on_host(chain);
    const conv::HandOverCounts counts(true);  // (make_layout's own then does nothing)
    const std::vector<std::pair<uint32_t, uint32_t>> words = priced_program_words(chain);
    for (size_t k = 0; k < words.size(); ++k)
      ASSERT_EQ(words[k].first, words[k].second) << "layout " << k;
    // (Most of the search's hand-overs take a kept count: what the memo saves.)
    EXPECT_GT(counts.kept(), 10u);
    EXPECT_GT(counts.hits(), counts.kept());
  }
}

// The final program's hand-overs (hand_over without `pricing`) take the schedule of fewest words
// as a counting emitter counts them: as the search prices final forms (priced_program_words'
// second pricing) and as generate_conv writes the program (with each receiver's rows cut on their
// own too), every schedule weighed counts the words an emitter writes for it.
TEST(PricedProgram, EveryHandOverScheduleCountsTheWordsItsProgramHas) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  const Graph graph =
      import_graph_bytes(read_file(data / "gen2020/mobilenet_v1_0.25_128_quant.tflite"));
  std::vector<int> ops = partition(graph).mapped_ops;
  ops.pop_back();
  ConvChain chain;
  ASSERT_EQ(match_conv_chain(graph, ops, chain), "");
  if (!repack_input_on_chip(chain)) pad_input_on_host(chain);
  conv::ScheduleWordsCheck check;
  priced_program_words(chain);
  const size_t priced = check.words.size();
  generate_conv(chain);
  EXPECT_GT(priced, 100u);
  EXPECT_GT(check.words.size(), priced);
  std::set<uint32_t> distinct;
  for (size_t k = 0; k < check.words.size(); ++k) {
    ASSERT_EQ(check.words[k].first, check.words[k].second) << "schedule " << k;
    distinct.insert(check.words[k].first);
  }
  EXPECT_GT(distinct.size(), 10u);  // (schedules of many shapes, not one repeated)
}

}  // namespace
}  // namespace tinycoral::compiler
