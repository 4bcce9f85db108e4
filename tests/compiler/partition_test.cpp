// edgetpu_compiler's mapping rules on hand-made graphs: supported operators map in order, the first
// unsupported one ends the mapped part with its reason, and every later one says "More than one
// subgraph is not supported".
#include "compiler/partition.h"

#include <gtest/gtest.h>

#include "compiler/operation_log.h"

namespace tinycoral::compiler {
namespace {

using container::BuiltinOp;
using container::TensorType;

GraphTensor tensor(int index, TensorType type, std::vector<int32_t> shape, bool quantized = true) {
  GraphTensor t;
  t.index = index;
  t.name = "t" + std::to_string(index);
  t.type = type;
  t.shape = std::move(shape);
  if (quantized) {
    t.quant.scale = {0.5f};
    t.quant.zero_point = {0};
  }
  return t;
}

GraphOp op(BuiltinOp code, const char* name, std::vector<int> in, std::vector<int> out) {
  GraphOp o;
  o.builtin = static_cast<int32_t>(code);
  o.name = name;
  o.inputs = std::move(in);
  o.outputs = std::move(out);
  return o;
}

// x(u8) -QUANTIZE-> a(i8) -FC(w)-> b(i8) -CUSTOM-> c(i8) -FC(w)-> d(i8)
Graph chain() {
  Graph g;
  g.tensors = {tensor(0, TensorType::kUInt8, {1, 8}), tensor(1, TensorType::kInt8, {1, 8}),
               tensor(2, TensorType::kInt8, {8, 8}),  tensor(3, TensorType::kInt8, {1, 8}),
               tensor(4, TensorType::kInt8, {1, 8}),  tensor(5, TensorType::kInt8, {1, 8})};
  g.tensors[2].data.assign(64, 1);
  g.ops = {op(BuiltinOp::kQuantize, "QUANTIZE", {0}, {1}),
           op(BuiltinOp::kFullyConnected, "FULLY_CONNECTED", {1, 2, -1}, {3}),
           op(BuiltinOp::kCustom, "MyOp", {3}, {4}),
           op(BuiltinOp::kFullyConnected, "FULLY_CONNECTED", {4, 2, -1}, {5})};
  for (size_t i = 0; i < g.ops.size(); ++i) g.ops[i].index = static_cast<int>(i);
  g.inputs = {0};
  g.outputs = {5};
  return g;
}

TEST(Partition, FirstUnsupportedOperatorEndsTheMappedPart) {
  const Graph g = chain();
  const Partition p = partition(g);
  ASSERT_EQ(p.decisions.size(), 4u);
  EXPECT_EQ(p.mapped_ops, (std::vector<int>{0, 1}));
  EXPECT_EQ(p.decisions[2].reason, kNotSupported);
  EXPECT_EQ(p.decisions[3].reason, kLaterSubgraph);
  EXPECT_EQ(p.inputs, (std::vector<int>{0}));   // the graph input
  EXPECT_EQ(p.outputs, (std::vector<int>{3}));  // read by the CPU's custom op
}

TEST(Partition, IndependentBranchesAfterACpuOperatorStillMap) {
  Graph g = chain();
  g.tensors.push_back(tensor(6, TensorType::kInt8, {1, 8}));
  // Reads the FC's output (mapped), not the custom op's: edgetpu_compiler maps it (DeepLab's
  // CONV_2D beside the unsupported RESIZE_BILINEAR).
  g.ops.push_back(op(BuiltinOp::kFullyConnected, "FULLY_CONNECTED", {3, 2, -1}, {6}));
  g.ops.back().index = 4;
  const Partition p = partition(g);
  EXPECT_EQ(p.mapped_ops, (std::vector<int>{0, 1, 4}));
  EXPECT_EQ(p.decisions[3].reason, kLaterSubgraph);
}

TEST(Partition, FloatTensorsAndHighRanksStayOnTheCpu) {
  Graph g = chain();
  g.tensors[0] = tensor(0, TensorType::kFloat32, {1, 8}, false);
  EXPECT_EQ(unsupported_reason(g, g.ops[0]), kBadType);
  g = chain();
  g.tensors[1].shape = {2, 1, 1, 1, 8};
  EXPECT_EQ(unsupported_reason(g, g.ops[0]), kBadRank);
  g.tensors[1].shape = {1, 2, 3, 4};  // a leading 1 is fine
  EXPECT_EQ(unsupported_reason(g, g.ops[0]), "");
  g = chain();
  g.tensors[2].data.clear();  // weights that are not constants
  EXPECT_EQ(unsupported_reason(g, g.ops[1]), kUnspecified);
}

TEST(Partition, LogTableGroupsByOperatorAndStatus) {
  const Graph g = chain();
  const auto rows = log_rows(g, partition(g));
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].op, "QUANTIZE");
  EXPECT_EQ(rows[1].op, "FULLY_CONNECTED");
  EXPECT_TRUE(rows[1].mapped);
  EXPECT_EQ(rows[3].op, "FULLY_CONNECTED");
  EXPECT_EQ(rows[3].status, kLaterSubgraph);
  const std::string table = operator_table(rows);
  EXPECT_NE(table.find("FULLY_CONNECTED                1          Mapped to Edge TPU\n"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("MyOp                           1          Operation not supported\n"),
            std::string::npos)
      << table;
}

TEST(Partition, UnmapAllKeepsEveryOperatorOnTheCpuWithTheReason) {
  const Graph g = chain();
  Partition p = partition(g);
  unmap_all(p, "no generator");
  EXPECT_TRUE(p.mapped_ops.empty());
  EXPECT_EQ(p.decisions[0].reason, "no generator");
  EXPECT_EQ(p.decisions[2].reason, kNotSupported);
}

}  // namespace
}  // namespace tinycoral::compiler
