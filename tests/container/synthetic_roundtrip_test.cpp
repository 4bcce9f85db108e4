// Round trips and checks on hand-made content (no test data needed): every options struct, both
// quantization kinds, every executable field, multi-package custom ops, and the package checks of
// driver.md 5.1 step 3.
#include <flatbuffers/flexbuffers.h>
#include <gtest/gtest.h>

#include "common/error.h"
#include "container/edgetpu_custom_op.h"
#include "container/edgetpu_model.h"
#include "container/package.h"
#include "container/schema/executable_generated.h"
#include "container/tflite_reader.h"
#include "container/tflite_writer.h"
#include "synthetic.h"

namespace tinycoral::container {
namespace {

using testing::synthetic_edgetpu_model;
using testing::synthetic_executable;
using testing::synthetic_model;
using testing::synthetic_package;

TEST(SyntheticRoundTrip, ModelWithEveryOptionsStruct) {
  const Model m = synthetic_model();
  const Model back = read_tflite(write_tflite(m));
  EXPECT_TRUE(back == m);
  // Spot checks that the values really travel (not just defaults on both sides).
  const auto& ops = back.subgraphs[0].operators;
  EXPECT_EQ(std::get<Conv2DOptions>(ops[1].options).stride_h, 3);
  EXPECT_EQ(std::get<Conv2DOptions>(ops[1].options).activation, Activation::kRelu6);
  EXPECT_EQ(std::get<SequenceLstmOptions>(ops[18].options).cell_clip, 10.0f);
  EXPECT_EQ(back.operator_codes[20].builtin_code, 150);
  EXPECT_EQ(back.subgraphs[0].tensors[1].quantization.scale.size(), 2u);
  EXPECT_EQ(back.subgraphs[0].tensors[0].shape_signature[0], -1);
  EXPECT_EQ(back.buffers[1].data.size(), 8u);
  EXPECT_TRUE(back.subgraphs[0].tensors[3].is_variable);
}

TEST(SyntheticRoundTrip, ConstantBuffersAre16ByteAligned) {
  const std::vector<uint8_t> bytes = write_tflite(synthetic_model());
  const std::vector<uint8_t> needle(40, 9);
  const auto at = std::search(bytes.begin(), bytes.end(), needle.begin(), needle.end());
  ASSERT_NE(at, bytes.end());
  EXPECT_EQ((at - bytes.begin()) % 16, 0);
}

TEST(SyntheticRoundTrip, ExecutableWithEveryField) {
  for (auto type : {ExecutableType::kStandAlone, ExecutableType::kParameterCaching,
                    ExecutableType::kExecutionOnly}) {
    const Executable e = synthetic_executable(type);
    EXPECT_TRUE(read_executable(write_executable(e)) == e);
  }
}

TEST(SyntheticRoundTrip, PackageAndMultiPackageEdgeTpuModel) {
  const Package p = synthetic_package();
  std::vector<std::string> warnings;
  EXPECT_TRUE(read_package(write_package(p), &warnings) == p);
  EXPECT_TRUE(warnings.empty());

  const EdgeTpuModel m = synthetic_edgetpu_model();
  const EdgeTpuModel back = read_edgetpu_model(write_edgetpu_model(m));
  EXPECT_TRUE(back == m);
  ASSERT_EQ(back.edgetpu_ops.size(), 1u);
  EXPECT_EQ(back.edgetpu_ops[0].options.packages.size(), 2u);
  EXPECT_EQ(back.edgetpu_ops[0].options.packages[1].model_identifier, "second");
  EXPECT_EQ(back.edgetpu_ops[0].options.chip_ids, (std::vector<int64_t>{18, 18}));
}

TEST(SyntheticRoundTrip, OldStyleOptionsWithoutChipIds) {
  EdgeTpuCustomOp op;
  op.chip_name = "beagle";
  op.execution_preference = 1;
  op.packages = {synthetic_package()};
  const std::vector<uint8_t> bytes = write_edgetpu_custom_op(op);
  const auto map = flexbuffers::GetRoot(bytes).AsMap();
  EXPECT_TRUE(map["6"].IsNull());
  EXPECT_TRUE(map["7"].IsNull());
  EXPECT_TRUE(read_edgetpu_custom_op(bytes) == op);
}

TEST(CustomOpChecks, MissingPackageKeyIsAnError) {
  flexbuffers::Builder fbb;
  fbb.Map([&] {
    fbb.Int("1", 0);
    fbb.Int("5", -1);
  });
  fbb.Finish();
  EXPECT_THROW(read_edgetpu_custom_op(fbb.GetBuffer()), Error);
}

TEST(CustomOpChecks, ChipIdCountMustMatchPackages) {
  std::vector<uint8_t> package = write_package(synthetic_package());
  package.push_back(0);  // Builder::String copies one byte past the length
  flexbuffers::Builder fbb;
  fbb.Map([&] {
    fbb.Int("1", 0);
    fbb.Key("4");
    fbb.String(reinterpret_cast<const char*>(package.data()), package.size() - 1);
    fbb.Vector("6", [&] {
      fbb.Int(18);
      fbb.Int(18);
    });
    fbb.Vector("7", [] {});
  });
  fbb.Finish();
  try {
    read_edgetpu_custom_op(fbb.GetBuffer());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("chip ids"), std::string::npos) << e.what();
  }
}

TEST(CustomOpChecks, NotAMapIsAnError) {
  flexbuffers::Builder fbb;
  fbb.Int(7);
  fbb.Finish();
  EXPECT_THROW(read_edgetpu_custom_op(fbb.GetBuffer()), Error);
  EXPECT_THROW(read_edgetpu_custom_op(std::vector<uint8_t>{1, 2}), Error);
}

// Builds a package flatbuffer directly, to reach states our writer refuses to produce.
std::vector<uint8_t> raw_package(int32_t min_runtime, int32_t chip_id, bool with_executables) {
  std::vector<uint8_t> multi;
  {
    flatbuffers::FlatBufferBuilder b;
    std::vector<flatbuffers::Offset<flatbuffers::String>> exes;
    if (with_executables) {
      const auto e = write_executable(synthetic_executable(ExecutableType::kStandAlone));
      exes.push_back(b.CreateString(reinterpret_cast<const char*>(e.data()), e.size()));
    }
    b.Finish(platforms::darwinn::CreateMultiExecutable(b, b.CreateVector(exes)));
    multi.assign(b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize());
  }
  flatbuffers::FlatBufferBuilder b;
  const auto m = b.CreateVector(multi);
  b.Finish(platforms::darwinn::CreatePackage(b, min_runtime, m, 0, 0, 0, chip_id),
           platforms::darwinn::PackageIdentifier());
  return std::vector<uint8_t>(b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize());
}

TEST(PackageChecks, RuntimeVersionAndChipAndEmptiness) {
  EXPECT_NO_THROW(read_package(raw_package(14, 0, true)));
  EXPECT_THROW(read_package(raw_package(15, 0, true)), Error);
  EXPECT_THROW(read_package(raw_package(12, -1, true)), Error);
  EXPECT_THROW(read_package(raw_package(12, 0, false)), Error);
  std::vector<std::string> warnings;
  EXPECT_NO_THROW(read_package(raw_package(9, 0, true), &warnings));
  EXPECT_EQ(warnings.size(), 1u);
  Package empty = synthetic_package();
  empty.executables.clear();
  EXPECT_THROW(write_package(empty), Error);
}

TEST(PackageChecks, ExecutableFieldChecks) {
  Executable e = synthetic_executable(ExecutableType::kExecutionOnly);
  e.batch_size = 0;
  EXPECT_THROW(read_executable(write_executable(e)), Error);
  e = synthetic_executable(ExecutableType::kExecutionOnly);
  e.bitstreams[0].field_offsets[0].offset_bit = 64 * 8 - 31;  // 32 bits would run past the end
  EXPECT_THROW(read_executable(write_executable(e)), Error);
  e = synthetic_executable(ExecutableType::kExecutionOnly);
  e.bitstreams[0].data.resize(20);  // not whole 16-byte words
  EXPECT_THROW(read_executable(write_executable(e)), Error);
  e = synthetic_executable(ExecutableType::kExecutionOnly);
  e.output_layers[0].output_layout->y_coordinate_to_linear_tile_id_map.pop_back();
  EXPECT_THROW(read_executable(write_executable(e)), Error);
}

TEST(ModelChecks, IndicesOutOfRangeAreErrors) {
  Model m = synthetic_model();
  m.subgraphs[0].operators[1].inputs[0] = 99;
  EXPECT_THROW(read_tflite(write_tflite(m)), Error);
  m = synthetic_model();
  m.subgraphs[0].operators[1].opcode_index = 99;
  EXPECT_THROW(read_tflite(write_tflite(m)), Error);
  m = synthetic_model();
  m.subgraphs[0].tensors[0].buffer = 99;
  EXPECT_THROW(read_tflite(write_tflite(m)), Error);
  m = synthetic_model();
  m.subgraphs[0].outputs = {-1};
  EXPECT_THROW(read_tflite(write_tflite(m)), Error);
  m = synthetic_model();
  m.subgraphs[0].tensors[1].quantization.scale.push_back(1.0f);  // 3 scales for a dimension of 2
  m.subgraphs[0].tensors[1].quantization.zero_point.push_back(0);
  EXPECT_THROW(read_tflite(write_tflite(m)), Error);
}

TEST(ModelChecks, WriterRefusesOptionsThatDoNotMatchTheirTag) {
  Model m = synthetic_model();
  m.subgraphs[0].operators[1].builtin_options_type = 2;  // Conv2DOptions under the depthwise tag
  EXPECT_THROW(write_tflite(m), Error);
}

}  // namespace
}  // namespace tinycoral::container
