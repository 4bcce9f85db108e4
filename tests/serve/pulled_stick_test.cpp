// The web app on a stick that is pulled out in the middle of a request. The server runs in this
// process on a bench stick: the virtual stick (the virtual Edge TPU behind the same wire protocol)
// opened as a real one is (with a device lock, so the server treats it as `usb`), which leaves the
// bus after a chosen number of host DMAs and can be plugged in again. The request that was running
// must end with a clear error, not a hang or a crash; the server keeps answering (the virtual
// Edge TPU and the CPU when asked for, and `auto` falls back to them), an explicit `usb` says the
// stick is gone, and once it is plugged in again the same requests give the same answers.
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "chip/virtual_edge_tpu.h"
#include "common/error.h"
#include "common/file.h"
#include "runtime/device_lock.h"
#include "server.h"
#include "support/testdata.h"
#include "usb/virtual_stick.h"
#include "usb/virtual_transport.h"

namespace tinycoral::serve {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// The chip behind the bench stick: the virtual Edge TPU, with a countdown of host DMAs after
// which the stick leaves the bus (called under the stick's lock, so the fault lands between two
// transfers of the request that is running).
struct PullingPort : chip::HostPort {
  chip::VirtualEdgeTpu chip;
  usb::VirtualStick* stick = nullptr;
  std::function<void()> pulled;
  std::atomic<int> countdown{0};  // 0: not armed

  void reset() override { chip.reset(); }
  void receive(chip::DmaTag tag, std::span<const uint8_t> payload) override {
    chip.receive(tag, payload);
    if (countdown > 0 && --countdown == 0) {
      stick->faults().off_bus = true;
      pulled();
    }
  }
  chip::RunState advance() override { return chip.advance(); }
  std::optional<std::vector<uint8_t>> take_output() override { return chip.take_output(); }
  std::optional<chip::HostEvent> take_event() override { return chip.take_event(); }
  std::string fault() const override { return chip.fault(); }
};

struct BenchBackend {
  PullingPort port;
  std::unique_ptr<usb::VirtualStick> stick;
};

// One bench stick: plugged in or not; each open is a fresh stick session (as after a replug).
class BenchStick {
 public:
  explicit BenchStick(fs::path lock_dir) : lock_dir_(std::move(lock_dir)) {}

  DeviceAccess access() {
    return {
        .stick_present = [this] { return plugged_.load(); },
        .open = [this](const runtime::DeviceChoice& choice,
                       const runtime::DeviceOptions& options) -> std::unique_ptr<runtime::EdgeTpu> {
          using Kind = runtime::DeviceChoice::Kind;
          if (choice.kind == Kind::kCpu) return nullptr;
          const bool stick = choice.kind == Kind::kUsb || (choice.kind == Kind::kAuto && plugged_);
          if (!stick) return runtime::open_virtual_edgetpu(options.tpu, options.sim_chip);
          return open_stick(options);
        }};
  }

  // The stick leaves the bus after `dmas` more host DMAs of the open session.
  void pull_after(int dmas) {
    std::lock_guard lock(mutex_);
    ASSERT_TRUE(current_) << "no session is open on the bench stick";
    current_->port.countdown = dmas;
  }
  bool plugged() const { return plugged_; }
  void plug_in() { plugged_ = true; }
  int opens() const { return opens_; }

 private:
  std::unique_ptr<runtime::EdgeTpu> open_stick(const runtime::DeviceOptions& options) {
    if (!plugged_) fail("no Coral USB Accelerator found (the bench stick is pulled out)");
    // Locked like a real stick: a second session on it while one is open is an error.
    auto lock = std::make_unique<runtime::DeviceLock>("usb-bench", lock_dir_);
    auto backend = std::make_shared<BenchBackend>();
    backend->stick =
        std::make_unique<usb::VirtualStick>(backend->port, usb::VirtualStick::Mode::kApplication);
    backend->port.stick = backend->stick.get();
    backend->port.pulled = [this] { plugged_ = false; };
    {
      std::lock_guard guard(mutex_);
      current_ = backend;
      ++opens_;
    }
    auto transport = std::make_unique<usb::VirtualTransport>(*backend->stick);
    return std::make_unique<runtime::EdgeTpu>(std::move(transport), backend, std::move(lock),
                                              options.tpu);
  }

  fs::path lock_dir_;
  std::atomic<bool> plugged_{true};
  std::atomic<int> opens_{0};
  std::mutex mutex_;
  std::shared_ptr<BenchBackend> current_;
};

// A story's answer: the events and the text its pieces make.
struct Answer {
  std::vector<json> events;
  std::string text;
  const json& last() const { return events.back(); }
};

std::string unbase64(const std::string& s) {
  std::string out;
  uint32_t bits = 0;
  int n = 0;
  for (char c : s) {
    const char* digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const char* at = c == '=' ? nullptr : std::strchr(digits, c);
    if (!at) break;
    bits = bits << 6 | uint32_t(at - digits);
    if ((n += 6) >= 8) out += char(bits >> (n -= 8) & 0xff);
  }
  return out;
}

class PulledStick : public ::testing::Test {
 protected:
  void SetUp() override {
    TINYCORAL_REQUIRE_TESTDATA(data);
    lock_dir_ = fs::path(::testing::TempDir()) / ("serve_bench_" + std::to_string(::getpid()));
    fs::create_directories(lock_dir_);
    bench_ = std::make_unique<BenchStick>(lock_dir_);
    ServeOptions o;
    o.port = 0;
    o.tokenizer = (data / "llama2c/tokenizer.bin").string();  // a random checkpoint
    o.model = (data / "gen2020/mobilenet_v1_0.25_128_quant_edgetpu.tflite").string();
    o.labels = (data / "labels/imagenet_labels.txt").string();
    o.device = "usb";
    o.threads = 1;
    o.devices = bench_->access();
    const std::vector<uint8_t> cat = read_file(data / "images/cat.bmp");
    cat_.assign(cat.begin(), cat.end());
    server_ = std::make_unique<WebServer>(o);
    serving_ = std::thread([this] { server_->listen(); });
    const std::string url = server_->url();  // http://127.0.0.1:PORT/
    client_ = std::make_unique<httplib::Client>(url.substr(0, url.size() - 1));
    client_->set_read_timeout(60, 0);
    for (int i = 0; i < 200 && !client_->Get("/api/info"); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }

  void TearDown() override {
    if (server_) server_->stop();
    if (serving_.joinable()) serving_.join();
    server_.reset();
    std::error_code ec;
    fs::remove_all(lock_dir_, ec);
  }

  std::vector<json> events(const httplib::Result& r) {
    std::vector<json> out;
    if (!r) {
      ADD_FAILURE() << "no answer: " << httplib::to_string(r.error());
      return out;
    }
    EXPECT_EQ(r->status, 200) << r->body;
    size_t at = 0;
    for (size_t nl; (nl = r->body.find('\n', at)) != std::string::npos; at = nl + 1)
      out.push_back(json::parse(r->body.substr(at, nl - at)));
    if (out.empty()) ADD_FAILURE() << "no events";
    return out;
  }

  json classify(const std::string& device = "") {
    const auto e =
        events(client_->Post(("/api/classify?device=" + device).c_str(), cat_, "image/bmp"));
    return e.empty() ? json() : e.back();
  }

  Answer story(const std::string& device, int steps = 40) {
    const json body = {
        {"prompt", "Once upon a time"}, {"seed", 7}, {"steps", steps}, {"device", device}};
    Answer a;
    a.events = events(client_->Post("/api/story", body.dump(), "application/json"));
    for (const json& e : a.events)
      if (e.contains("piece")) a.text += unbase64(e["piece"].get<std::string>());
    if (a.events.empty()) a.events.push_back(json());
    return a;
  }

  json info() {
    const auto r = client_->Get("/api/info");
    return r ? json::parse(r->body) : json();
  }

  fs::path lock_dir_;
  std::unique_ptr<BenchStick> bench_;
  std::string cat_;
  std::unique_ptr<WebServer> server_;
  std::thread serving_;
  std::unique_ptr<httplib::Client> client_;
};

std::string error_of(const json& e) { return e.value("error", std::string()); }

TEST_F(PulledStick, AClassificationFailsClearlyAndTheServerRecoversWhenTheStickIsBack) {
  const json first = classify();
  ASSERT_TRUE(first.contains("result")) << first;
  EXPECT_EQ(first["result"]["device"], "usb");
  const json top = first["result"]["top"];

  bench_->pull_after(2);  // an inference is two DMAs (instructions, input): after the input
  const auto start = std::chrono::steady_clock::now();
  const json pulled = classify();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  EXPECT_NE(error_of(pulled).find("left the bus"), std::string::npos) << pulled;
  EXPECT_FALSE(bench_->plugged());

  // The server answers on: `usb` says the stick is gone, the virtual Edge TPU and `auto` (which
  // falls back to it) give the same labels, a story on the CPU is written.
  EXPECT_NE(error_of(classify()).find("no Coral USB Accelerator"), std::string::npos);
  for (const char* device : {"sim", "auto"}) {
    const json other = classify(device);
    ASSERT_TRUE(other.contains("result")) << device << ": " << other;
    EXPECT_EQ(other["result"]["device"], "sim");
    EXPECT_EQ(other["result"]["top"], top) << device;
  }
  EXPECT_TRUE(story("cpu").last().contains("done"));

  bench_->plug_in();
  const json back = classify();
  ASSERT_TRUE(back.contains("result")) << back;
  EXPECT_EQ(back["result"]["device"], "usb");
  EXPECT_EQ(back["result"]["top"], top);

  // Pulled out again at the very first DMA of the next request (as if between two requests):
  // that request fails the same way, the one after it finds no stick.
  bench_->pull_after(1);
  EXPECT_NE(error_of(classify()).find("left the bus"), std::string::npos);
  EXPECT_NE(error_of(classify()).find("no Coral USB Accelerator"), std::string::npos);
  EXPECT_EQ(info()["served"]["classifications"], 4);  // failures are not counted
}

TEST_F(PulledStick, AStoryStopsWithAClearErrorAndIsTheSameWhenTheStickIsBack) {
  const Answer first = story("");  // the server's device: the stick
  ASSERT_TRUE(first.last().contains("done")) << first.last();
  EXPECT_EQ(first.last()["done"]["device"], "usb");
  EXPECT_GT(first.last()["done"]["matmuls_on_chip"], 0);
  EXPECT_FALSE(first.last()["done"].contains("modeled_stick_tokens_per_second"))
      << "a real stick's speed is measured, not modeled";

  // A token is a few programs of a few DMAs each: 60 DMAs in, the story is under way.
  bench_->pull_after(60);
  const Answer pulled = story("");
  EXPECT_NE(error_of(pulled.last()).find("left the bus"), std::string::npos) << pulled.last();
  EXPECT_FALSE(pulled.text.empty()) << "the stick was pulled before the story began";
  EXPECT_LT(pulled.text.size(), first.text.size());
  EXPECT_EQ(first.text.substr(0, pulled.text.size()), pulled.text);

  EXPECT_NE(error_of(story("").last()).find("no Coral USB Accelerator"), std::string::npos);
  const Answer on_cpu = story("auto");  // auto without a stick: the CPU
  ASSERT_TRUE(on_cpu.last().contains("done")) << on_cpu.last();
  EXPECT_EQ(on_cpu.last()["done"]["device"], "cpu");

  bench_->plug_in();
  const Answer back = story("");
  ASSERT_TRUE(back.last().contains("done")) << back.last();
  EXPECT_EQ(back.text, first.text);
  EXPECT_EQ(info()["served"]["stories"], 3);
}

TEST_F(PulledStick, StoriesAndClassificationsTakeTurnsOnTheOneStick) {
  // Each closes the other's session before opening its own: the stick's lock would refuse a
  // second one, and the weights of the other would be evicted anyway.
  const Answer first = story("");
  ASSERT_TRUE(first.last().contains("done")) << first.last();
  const json c = classify();
  ASSERT_TRUE(c.contains("result")) << c;
  const Answer again = story("");
  ASSERT_TRUE(again.last().contains("done")) << again.last();
  EXPECT_EQ(again.text, first.text);
  EXPECT_EQ(bench_->opens(), 3);
}

TEST_F(PulledStick, AClientThatLeavesMidStoryLeavesTheStickReadyForTheNext) {
  const Answer first = story("", 120);
  ASSERT_TRUE(first.last().contains("done")) << first.last();
  // The client reads the first piece and hangs up; the server stops the story there.
  httplib::Request req;
  req.method = "POST";
  req.path = "/api/story";
  req.body =
      json{{"prompt", "Once upon a time"}, {"seed", 7}, {"steps", 120}, {"device", ""}}.dump();
  req.set_header("Content-Type", "application/json");
  std::string received;
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    received.append(data, n);
    return received.find("\"piece\"") == std::string::npos;
  };
  client_->send(req);
  EXPECT_NE(received.find("\"start\""), std::string::npos) << received;
  for (int i = 0; i < 500 && info()["served"]["stories_stopped"] != 1; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(info()["served"]["stories_stopped"], 1);
  const Answer next = story("", 120);
  ASSERT_TRUE(next.last().contains("done")) << next.last();
  EXPECT_EQ(next.text, first.text);
  EXPECT_EQ(bench_->opens(), 1) << "the session stays open across the stopped story";
}

}  // namespace
}  // namespace tinycoral::serve
