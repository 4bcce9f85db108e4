// The interpreter's contract: unsupported operators refused at load time by name, malformed graphs
// refused, the delegate hook, input size checks, repeated runs, liveness-based memory sharing.
#include <gtest/gtest.h>

#include "host/arena_planner.h"
#include "hostops_test_util.h"
#include "support/error_of.h"

namespace tinycoral::host {
namespace {

using container::BuiltinOp;
using container::TensorType;
using testing::OneOpModel;
using testing::output_as;
using testing::set_input;

std::string load_error(const container::Model& m, InterpreterOptions o = {}) {
  return tinycoral::testing::error_of([&] { Interpreter it(m, std::move(o)); });
}

TEST(HostInterpreter, RefusesUnsupportedOperatorsByName) {
  OneOpModel m(BuiltinOp::kStridedSlice);
  const int a = m.tensor(TensorType::kUInt8, {4}, 1, 0);
  const int b = m.tensor(TensorType::kUInt8, {4}, 1, 0);
  m.wire({a}, {b});
  EXPECT_NE(load_error(m.model()).find("STRIDED_SLICE"), std::string::npos)
      << load_error(m.model());

  OneOpModel c("edgetpu-custom-op");
  const int x = c.tensor(TensorType::kUInt8, {4}, 1, 0);
  const int y = c.tensor(TensorType::kUInt8, {4}, 1, 0);
  c.wire({x}, {y});
  const std::string err = load_error(c.model());
  EXPECT_NE(err.find("edgetpu-custom-op"), std::string::npos) << err;
  EXPECT_EQ(unsupported_operators(c.model()),
            std::vector<std::string>{"CUSTOM 'edgetpu-custom-op'"});
}

TEST(HostInterpreter, DelegateRunsAnOperatorThroughTheCallersKernel) {
  OneOpModel c("edgetpu-custom-op");
  const int x = c.tensor(TensorType::kUInt8, {3}, 1, 0);
  const int y = c.tensor(TensorType::kUInt8, {3}, 1, 0);
  c.wire({x}, {y});
  c.custom_options({1, 2, 3});
  InterpreterOptions o;
  size_t seen_options = 0;
  o.delegates.add_custom("edgetpu-custom-op", [&](const OpContext& ctx) {
    seen_options = ctx.custom_options().size();
    return make_kernel([](OpContext& k) {
      for (size_t i = 0; i < k.outputs[0].bytes; ++i)
        k.outputs[0].data[i] = static_cast<uint8_t>(k.input(0).data[i] * 2);
    });
  });
  Interpreter it(c.model(), std::move(o));
  EXPECT_EQ(seen_options, 3u);
  set_input(it, 0, std::vector<uint8_t>{1, 2, 100});
  it.invoke();
  EXPECT_EQ(output_as<uint8_t>(it, 0), (std::vector<uint8_t>{2, 4, 200}));
}

TEST(HostInterpreter, RejectsMalformedGraphsAndInputs) {
  OneOpModel m(BuiltinOp::kReshape);
  const int a = m.tensor(TensorType::kUInt8, {4}, 1, 0);
  const int b = m.tensor(TensorType::kUInt8, {2, 2}, 1, 0);
  m.wire({a}, {b});
  {
    Interpreter it(m.model());
    EXPECT_THROW(it.set_input(0, std::vector<uint8_t>{1, 2, 3}), Error);
    EXPECT_THROW(it.input(1), Error);
  }
  container::Model bad = m.model();
  bad.subgraphs[0].operators[0].inputs = {7};
  EXPECT_NE(load_error(bad).find("tensor 7"), std::string::npos);
  bad = m.model();
  bad.subgraphs[0].tensors[1].shape = {-1, 2};
  EXPECT_FALSE(load_error(bad).empty());
  bad = m.model();
  bad.subgraphs[0].inputs.clear();  // the reshape reads a tensor nobody writes
  EXPECT_NE(load_error(bad).find("before anything writes it"), std::string::npos);
  bad = m.model();
  bad.subgraphs.clear();
  EXPECT_FALSE(load_error(bad).empty());
  bad = m.model();
  bad.subgraphs[0].operators[0].opcode_index = 5;
  EXPECT_FALSE(load_error(bad).empty());
}

TEST(HostInterpreter, RunsRepeatedlyWithNewInputs) {
  OneOpModel m(BuiltinOp::kAdd);
  const int a = m.tensor(TensorType::kUInt8, {2}, 1, 0);
  const int b = m.tensor(TensorType::kUInt8, {2}, 1, 0, {10, 20});
  const int o = m.tensor(TensorType::kUInt8, {2}, 1, 0);
  m.wire({a, b}, {o});
  Interpreter it(m.model());
  for (uint8_t v = 0; v < 5; ++v) {
    set_input(it, 0, std::vector<uint8_t>{v, static_cast<uint8_t>(v + 1)});
    it.invoke();
    EXPECT_EQ(output_as<uint8_t>(it, 0),
              (std::vector<uint8_t>{static_cast<uint8_t>(10 + v), static_cast<uint8_t>(21 + v)}));
  }
}

// A second invoke() without set_input computes what the first did: the graph input is kept alive
// to the end, so a later tensor (here the output, whose lifetime starts after the input's last use)
// cannot take its memory.
TEST(HostInterpreter, InvokeTwiceEqualsOnce) {
  OneOpModel m(BuiltinOp::kAdd);
  const int a = m.tensor(TensorType::kUInt8, {4}, 1, 0);
  const int b = m.tensor(TensorType::kUInt8, {4}, 1, 0, {1, 2, 3, 4});
  const int mid = m.tensor(TensorType::kUInt8, {4}, 1, 0);
  const int o = m.tensor(TensorType::kUInt8, {4}, 1, 0);
  m.wire({a, b}, {mid});
  container::Subgraph& g = m.model().subgraphs[0];
  container::Operator second = g.operators[0];
  second.inputs = {mid, b};
  second.outputs = {o};
  g.operators.push_back(second);
  g.outputs = {o};
  Interpreter it(m.model());
  set_input(it, 0, std::vector<uint8_t>{10, 20, 30, 40});
  it.invoke();
  const std::vector<uint8_t> once = output_as<uint8_t>(it, 0);
  EXPECT_EQ(once, (std::vector<uint8_t>{12, 24, 36, 48}));
  it.invoke();
  EXPECT_EQ(output_as<uint8_t>(it, 0), once);
  EXPECT_EQ(std::vector<uint8_t>(it.input(0).data, it.input(0).data + 4),
            (std::vector<uint8_t>{10, 20, 30, 40}));
}

TEST(HostArenaPlanner, DisjointLifetimesShareMemory) {
  ArenaPlanner p;
  const int a = p.add(1000, 0, 1);
  const int b = p.add(1000, 2, 3);  // after a: may reuse a's bytes
  const int c = p.add(100, 1, 2);   // overlaps both in time
  const size_t total = p.plan();
  EXPECT_EQ(p.offset(a), p.offset(b));
  EXPECT_GE(p.offset(c), p.offset(a) + 1000);
  EXPECT_EQ(total, 1024u + 128u);
  EXPECT_EQ(p.offset(c) % ArenaPlanner::kAlignment, 0u);
}

}  // namespace
}  // namespace tinycoral::host
