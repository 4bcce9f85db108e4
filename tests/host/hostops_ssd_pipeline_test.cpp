// The host part of Google's SSD pipeline (gen2021/pipeline segment 3): its CPU operators
// (DEQUANTIZE x2, TFLite_Detection_PostProcess with the file's 1917 anchors) run on the CPU while
// the compiled part is replaced by a stand-in delegate that emits chosen box encodings and scores.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "container/tflite_reader.h"
#include "host/interpreter.h"
#include "support/testdata.h"

namespace tinycoral::host {
namespace {

// Writes the chip part's outputs: box encodings all at their zero point (decoded box = anchor) and
// class scores zero except the chosen (anchor, class column, byte) triples.
struct FakeChip {
  std::vector<std::tuple<int, int, uint8_t>> hits;
  std::unique_ptr<Kernel> operator()(const OpContext&) const {
    auto hits_copy = hits;
    return make_kernel([hits_copy](OpContext& c) {
      const TensorView& boxes = c.outputs[0];
      const TensorView& scores = c.outputs[1];
      std::fill(boxes.data, boxes.data + boxes.bytes, static_cast<uint8_t>(boxes.zero_point()));
      std::fill(scores.data, scores.data + scores.bytes, uint8_t{0});
      const int classes = scores.dim(2);
      for (const auto& [anchor, column, byte] : hits_copy)
        scores.data[static_cast<size_t>(anchor) * classes + column] = byte;
    });
  }
};

TEST(HostOpsSsdPipeline, Segment3HostPartDetectsTheChosenAnchors) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  const auto path =
      data /
      "gen2021/pipeline/ssd_mobilenet_v1_coco_quant_postprocess_segment_3_of_4_edgetpu.tflite";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "segment 3 not in the test data";
  const container::Model model = container::read_tflite_file(path);
  // The anchors are the constant input of the post-processing operator.
  const auto& g = model.subgraphs[0];
  const container::Tensor* anchors = nullptr;
  for (const auto& op : g.operators)
    if (model.code_of(op).custom_code == "TFLite_Detection_PostProcess")
      anchors = &g.tensors.at(static_cast<size_t>(op.inputs.at(2)));
  ASSERT_NE(anchors, nullptr);
  const auto& abuf = model.buffers.at(anchors->buffer).data;
  ASSERT_EQ(abuf.size(), 1917u * 4 * 4);
  std::vector<float> a(1917 * 4);
  std::memcpy(a.data(), abuf.data(), abuf.size());

  // Anchor 100 is a cat (COCO column 17 = class 16 after the background column), anchor 1800 a
  // dog (column 18) with a lower score; anchor 5 scores under the threshold.
  FakeChip chip;
  chip.hits = {{100, 17, 230}, {1800, 18, 200}, {5, 1, 50}};
  InterpreterOptions options;
  options.delegates.add_custom("edgetpu-custom-op", chip);
  Interpreter it(model, options);
  for (size_t i = 0; i < it.num_inputs(); ++i)
    it.set_input(i, std::vector<uint8_t>(it.input(i).bytes, 0));
  it.invoke();

  auto out = [&](size_t i) {
    const auto b = it.output_bytes(i);
    std::vector<float> v(b.size() / 4);
    std::memcpy(v.data(), b.data(), b.size());
    return v;
  };
  const auto boxes = out(0), classes = out(1), scores = out(2), count = out(3);
  ASSERT_EQ(count.size(), 1u);
  EXPECT_EQ(count[0], 2.0f);  // 50/256 is under the 0.3 score threshold
  EXPECT_EQ(classes[0], 16.0f);
  EXPECT_FLOAT_EQ(scores[0], 230.0f / 256.0f);
  EXPECT_EQ(classes[1], 17.0f);
  EXPECT_FLOAT_EQ(scores[1], 200.0f / 256.0f);
  // Zero encodings decode to the anchor's own corners.
  const float* an = &a[100 * 4];  // ycenter, xcenter, h, w
  EXPECT_FLOAT_EQ(boxes[0], an[0] - 0.5f * an[2]);
  EXPECT_FLOAT_EQ(boxes[1], an[1] - 0.5f * an[3]);
  EXPECT_FLOAT_EQ(boxes[2], an[0] + 0.5f * an[2]);
  EXPECT_FLOAT_EQ(boxes[3], an[1] + 0.5f * an[3]);
}

TEST(HostOpsSsdPipeline, CompiledPartIsRefusedWithoutADelegate) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  const auto path =
      data /
      "gen2021/pipeline/ssd_mobilenet_v1_coco_quant_postprocess_segment_3_of_4_edgetpu.tflite";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "segment 3 not in the test data";
  EXPECT_THROW(Interpreter(container::read_tflite_file(path)), Error);
}

}  // namespace
}  // namespace tinycoral::host
