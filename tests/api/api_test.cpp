// The public C++ and C API (include/tinycoral/), used only through its installed headers: devices,
// loading, tensor descriptions, repeated invokes, the same classes as the CLI on the virtual Edge
// TPU and the CPU, and errors as tinycoral::Error / status codes.
#include <gtest/gtest.h>
#include <tinycoral/tinycoral.h>

#include <fstream>
#include <sstream>
#include <tinycoral/tinycoral.hpp>

#include "support/testdata.h"

namespace {

constexpr const char* kModel = "gen2020/mobilenet_v1_0.25_128_quant_edgetpu.tflite";
constexpr const char* kCpuModel = "gen2020/mobilenet_v1_0.25_128_quant.tflite";

// The CLI's `run --top 3` as "ID LABEL" lines.
std::vector<std::string> cli_top3(const std::filesystem::path& model,
                                  const std::filesystem::path& image, const std::string& device) {
  const auto r = tinycoral::testing::run_cli("run '" + model.string() + "' --image '" +
                                             image.string() + "' --device " + device + " --top 3");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> ids;
  std::istringstream in(r.out);
  std::string id, score;
  while (in >> id >> score) ids.push_back(id);
  return ids;
}

TEST(Api, ListsTheVirtualEdgeTpuAndTheCpu) {
  const auto devices = tinycoral::list_devices();
  ASSERT_GE(devices.size(), 2u);
  EXPECT_EQ(devices[devices.size() - 2].name, "sim");
  EXPECT_EQ(devices.back().name, "cpu");
  EXPECT_EQ(tinycoral::Device::open("sim").name(), "sim");
  EXPECT_TRUE(tinycoral::Device::open("sim").has_edgetpu());
  EXPECT_FALSE(tinycoral::Device::open("cpu").has_edgetpu());
  EXPECT_THROW(tinycoral::Device::open("tpu9"), tinycoral::Error);
  EXPECT_STREQ(tinycoral::version(), TINYCORAL_VERSION_STRING);
}

TEST(Api, ErrorsAreOneExceptionTypeNamingTheProblem) {
  try {
    tinycoral::Interpreter("/nonexistent/model.tflite", "cpu");
    FAIL() << "no error";
  } catch (const tinycoral::Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/model.tflite"), std::string::npos);
  }
}

TEST(Api, ClassifiesTheCatLikeTheCliOnSimAndCpu) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  const auto image = data / "images/cat.bmp";
  for (const auto& [device, model] : {std::pair{"sim", kModel}, std::pair{"cpu", kCpuModel}}) {
    tinycoral::Interpreter it((data / model).string(), device);
    EXPECT_EQ(it.device().name(), device);
    ASSERT_EQ(it.num_inputs(), 1u);
    EXPECT_EQ(it.input(0).type, tinycoral::DataType::kUInt8);
    EXPECT_EQ(it.input(0).shape, (std::vector<int32_t>{1, 128, 128, 3}));
    EXPECT_EQ(it.output(0).bytes, 1001u);
    EXPECT_GT(it.output(0).quantization.scale, 0.0f);
    tinycoral::set_input_image(it, 0, image.string());
    it.invoke();
    std::vector<std::string> ids;
    for (const auto& c : tinycoral::get_classes(it, 3)) ids.push_back(std::to_string(c.id));
    EXPECT_EQ(ids, cli_top3(data / model, image, device)) << device;
    // Repeating invoke without new inputs gives the same outputs.
    const std::vector<uint8_t> once(it.output_data(0).begin(), it.output_data(0).end());
    it.invoke();
    EXPECT_EQ(std::vector<uint8_t>(it.output_data(0).begin(), it.output_data(0).end()), once);
  }
  // An Edge TPU model needs an Edge TPU: on the CPU it is refused by name.
  EXPECT_THROW(tinycoral::Interpreter((data / kModel).string(), "cpu"), tinycoral::Error);
}

TEST(Api, ModelsLoadFromMemoryAndInputsAreChecked) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  std::ifstream f(data / kCpuModel, std::ios::binary);
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), {});
  tinycoral::Interpreter it(bytes, tinycoral::Device::open("cpu"));
  EXPECT_THROW(it.set_input(0, std::vector<uint8_t>(5)), tinycoral::Error);
  EXPECT_THROW(it.input(1), tinycoral::Error);
  std::fill(it.input_data(0).begin(), it.input_data(0).end(), uint8_t{128});
  it.invoke();
  const std::vector<float> values = it.output_values(0);
  ASSERT_EQ(values.size(), 1001u);
  const auto q = it.output(0).quantization;
  EXPECT_FLOAT_EQ(values[0], q.scale * (it.output_data(0)[0] - q.zero_point));
}

TEST(CApi, ClassifiesAndReportsErrorsAsCodes) {
  tinycoral_interpreter* it = nullptr;
  EXPECT_EQ(tinycoral_interpreter_create("/nonexistent.tflite", "cpu", &it), TINYCORAL_ERROR);
  EXPECT_EQ(it, nullptr);
  EXPECT_NE(std::string(tinycoral_last_error()).find("/nonexistent.tflite"), std::string::npos);
  EXPECT_EQ(tinycoral_interpreter_invoke(nullptr), TINYCORAL_INVALID_ARGUMENT);
  tinycoral_device* dev = nullptr;
  EXPECT_EQ(tinycoral_device_open("nope", &dev), TINYCORAL_ERROR);
  size_t count = 0;
  tinycoral_device_info infos[8];
  ASSERT_EQ(tinycoral_list_devices(infos, 8, &count), TINYCORAL_OK);
  EXPECT_STREQ(infos[count - 1].name, "cpu");
  TINYCORAL_REQUIRE_TESTDATA(data);
  ASSERT_EQ(tinycoral_device_open("sim", &dev), TINYCORAL_OK);
  EXPECT_STREQ(tinycoral_device_name(dev), "sim");
  ASSERT_EQ(tinycoral_interpreter_create_on((data / kModel).c_str(), dev, &it), TINYCORAL_OK)
      << tinycoral_last_error();
  tinycoral_device_close(dev);  // the interpreter keeps the device open
  tinycoral_tensor_info info;
  ASSERT_EQ(tinycoral_interpreter_input_info(it, 0, &info), TINYCORAL_OK);
  EXPECT_EQ(info.rank, 4);
  EXPECT_EQ(info.type, TINYCORAL_UINT8);
  EXPECT_EQ(tinycoral_interpreter_set_input(it, 0, "x", 1), TINYCORAL_INVALID_ARGUMENT);
  const auto image = data / "images/cat.bmp";
  ASSERT_EQ(tinycoral_interpreter_set_input_image(it, 0, image.c_str()), TINYCORAL_OK);
  ASSERT_EQ(tinycoral_interpreter_invoke(it), TINYCORAL_OK);
  std::vector<float> scores(1001);
  EXPECT_EQ(tinycoral_interpreter_output_values(it, 0, scores.data(), 1000),
            TINYCORAL_INVALID_ARGUMENT);
  ASSERT_EQ(tinycoral_interpreter_output_values(it, 0, scores.data(), 1001), TINYCORAL_OK);
  size_t best = 0;
  for (size_t i = 1; i < scores.size(); ++i)
    if (scores[i] >= scores[best]) best = i;
  EXPECT_EQ(std::to_string(best), cli_top3(data / kModel, image, "sim").at(0));
  tinycoral_interpreter_destroy(it);
}

}  // namespace
