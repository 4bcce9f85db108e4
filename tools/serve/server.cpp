// Routes:
//   GET  /, /app.js, /style.css   the embedded page (assets.h)
//   GET  /api/info                what the server has: checkpoint, models, devices, limits, and
//                                 what it served (stories, stories stopped, classifications) and
//                                 how many requests are in line now
//   POST /api/story               JSON {prompt, temperature, topp, seed, steps, device} -> events
//   POST /api/classify?model=&device=   the image's bytes -> events
//   GET  /api/chip                what the chip did in the last classification (JSON, null before)
// Events (application/x-ndjson, one JSON object a line): {"wait": N} while N requests are ahead,
// {"start": {...}} when the device is ours, {"piece": base64} per story piece (raw bytes: a
// character may span pieces, the page decodes them as a stream), {"done": {...}}, {"result": {...}}
// or {"error": "..."}. Mistakes found before waiting get a 4xx with a plain one-line message.
#include "server.h"

#include <httplib.h>
#include <malloc.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <iostream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>

#include "assets.h"
#include "common/error.h"
#include "device_line.h"
#include "device_thread.h"
#include "host/image.h"
#include "image_classifier.h"
#include "runtime/device_select.h"
#include "story_writer.h"

namespace tinycoral::serve {

namespace {

using nlohmann::json;

std::string base64(const std::string& bytes) {
  static const char* digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const uint32_t v = uint32_t(uint8_t(bytes[i])) << 16 | uint32_t(uint8_t(bytes[i + 1])) << 8 |
                       uint8_t(bytes[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out += digits[v >> s & 63];
  }
  if (i + 1 == bytes.size()) {
    const uint32_t v = uint32_t(uint8_t(bytes[i])) << 16;
    out += {digits[v >> 18 & 63], digits[v >> 12 & 63], '=', '='};
  } else if (i + 2 == bytes.size()) {
    const uint32_t v = uint32_t(uint8_t(bytes[i])) << 16 | uint32_t(uint8_t(bytes[i + 1])) << 8;
    out += {digits[v >> 18 & 63], digits[v >> 12 & 63], digits[v >> 6 & 63], '='};
  }
  return out;
}

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

// A plain one-line answer for a mistake.
void refuse(httplib::Response& res, int status, const std::string& message) {
  res.status = status;
  res.set_content(message + "\n", "text/plain; charset=utf-8");
}

class App {
 public:
  explicit App(const ServeOptions& o) : options_(o) {
    try {
      story_ =
          std::make_unique<StoryWriter>(o.checkpoint, o.tokenizer, o.threads, o.device, o.devices);
    } catch (const Error& e) {
      if (!o.checkpoint.empty() && !o.tokenizer.empty()) throw;  // both given: a real mistake
      story_error_ = e.what();
    }
    classifier_ = std::make_unique<ImageClassifier>(
        ClassifierOptions{
            .model = o.model, .labels = o.labels, .device = o.device, .firmware = o.firmware},
        o.devices);
  }

  void routes(httplib::Server& s) {
    s.Get("/", [](const httplib::Request&, httplib::Response& res) { asset(res, "/index.html"); });
    s.Get(R"(/(index\.html|app\.js|style\.css))",
          [](const httplib::Request& req, httplib::Response& res) { asset(res, req.path); });
    s.Get("/api/info", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(dump(info()), "application/json");
    });
    s.Get("/api/chip", [this](const httplib::Request&, httplib::Response& res) {
      json chip;
      {
        std::lock_guard lock(chip_mutex_);
        chip = last_chip_;
      }
      res.set_content(dump(chip), "application/json");
    });
    s.Post("/api/story",
           [this](const httplib::Request& req, httplib::Response& res) { story(req, res); });
    s.Post("/api/classify",
           [this](const httplib::Request& req, httplib::Response& res) { classify(req, res); });
  }

 private:
  static void asset(httplib::Response& res, const std::string& path) {
    const Asset* a = find_asset(path);
    if (!a) return refuse(res, 404, "not found");
    res.set_content(a->bytes.data(), a->bytes.size(), a->content_type);
  }

  json info() {
    json story = {{"available", story_ != nullptr}, {"device", options_.device}};
    if (story_) {
      story["random"] = story_->random_checkpoint();
      story["checkpoint"] = story_->description();
      story["seq_len"] = story_->seq_len();
      story["threads"] = story_->threads();
    } else {
      story["error"] = story_error_;
    }
    json see = {{"models", classifier_->models()},
                {"default_model", classifier_->default_model()},
                {"device", options_.device}};
    json served = {{"stories", stories_.load()},
                   {"stories_stopped", stories_stopped_.load()},
                   {"classifications", classifications_.load()},
                   {"in_line", line_.length()}};  // the request holding the device included
    return {{"story", story},
            {"served", served},
            {"see", see},
            {"limits",
             {{"image_bytes", kMaxImageBytes},
              {"prompt_bytes", kMaxPromptBytes},
              {"json_bytes", kMaxJsonBytes}}}};
  }

  // Waits for the device, telling the client its place; false when the client left.
  static std::optional<DeviceLine::Turn> take_turn(DeviceLine& line, httplib::DataSink& sink) {
    DeviceLine::Turn turn = line.wait([&](size_t place) {
      const std::string e = dump({{"wait", place}});
      return sink.write(e.data(), e.size());
    });
    if (!turn) return std::nullopt;
    return std::optional<DeviceLine::Turn>(std::move(turn));
  }

  // Whether a request for `device` ("": the server's) may open a real stick. A stick serves one
  // session at a time: the other view's session on it is closed first.
  bool may_use_stick(const std::string& device) const {
    const runtime::DeviceChoice c =
        runtime::parse_device(device.empty() ? options_.device : device);
    return c.kind == runtime::DeviceChoice::Kind::kAuto ||
           c.kind == runtime::DeviceChoice::Kind::kUsb;
  }

  static bool send(httplib::DataSink& sink, const json& event) {
    const std::string e = dump(event);
    return sink.write(e.data(), e.size());
  }

  void story(const httplib::Request& req, httplib::Response& res) {
    if (!story_) return refuse(res, 503, "no checkpoint: " + story_error_);
    if (req.body.size() > kMaxJsonBytes)
      return refuse(
          res, 413,
          cat("request too large: ", req.body.size(), " bytes (the limit is ", kMaxJsonBytes, ")"));
    StoryRequest r;
    try {
      const json j = json::parse(req.body);
      if (!j.is_object()) fail("the request must be a JSON object");
      r.prompt = j.value("prompt", std::string());
      r.temperature = j.value("temperature", 1.0f);
      r.topp = j.value("topp", 0.9f);
      const int64_t seed = j.value("seed", int64_t{0});
      r.steps = j.value("steps", 256);
      r.device = j.value("device", std::string());
      if (r.prompt.size() > kMaxPromptBytes) {
        return refuse(res, 413,
                      cat("prompt too long: ", r.prompt.size(), " bytes (the limit is ",
                          kMaxPromptBytes, ")"));
      }
      if (!(r.temperature >= 0.0f && r.temperature <= 2.0f))
        fail("temperature must be between 0 and 2");
      if (!(r.topp >= 0.0f && r.topp <= 1.0f)) fail("top-p must be between 0 and 1");
      if (seed < 0) fail("seed must be >= 0 (0: the time)");
      if (r.steps < 0 || r.steps > story_->seq_len())
        fail("steps must be between 0 and seq_len ", story_->seq_len(), " (0: seq_len)");
      r.seed = static_cast<uint64_t>(seed);
      if (!r.device.empty()) runtime::parse_device(r.device);
      story_->check_prompt(r.prompt);
    } catch (const json::exception& e) {
      return refuse(res, 400, std::string("bad request: ") + e.what());
    } catch (const Error& e) {
      return refuse(res, 400, e.what());
    }
    res.set_header("Cache-Control", "no-store");
    res.set_chunked_content_provider(
        "application/x-ndjson", [this, r](size_t, httplib::DataSink& sink) {
          std::optional<DeviceLine::Turn> turn = take_turn(line_, sink);
          if (!turn) return false;
          bool written = true;  // false: the client left
          device_.run([&] {
            try {
              if (may_use_stick(r.device) && classifier_->holds_stick()) classifier_->release();
              const std::string device = story_->open(r.device);
              if (!send(sink, {{"start",
                                {{"device", device},
                                 {"threads", story_->threads()},
                                 {"checkpoint", story_->description()}}}})) {
                written = false;
                return;
              }
              const StoryResult done = story_->write(r, [&](const std::string& piece) {
                return send(sink, {{"piece", base64(piece)}});
              });
              if (done.stopped) {
                ++stories_stopped_;  // the client left: the rest is not written
                written = false;
                return;
              }
              ++stories_;
              json d = {{"device", done.device},
                        {"tokens", done.tokens},
                        {"positions", done.positions},
                        {"tokens_per_second", done.tokens_per_second},
                        {"seed", done.seed}};
              if (done.device != "cpu") {
                d["matmuls_on_chip"] = done.matmuls_on_chip;
                d["matmuls_on_host"] = done.matmuls_on_host;
              }
              if (done.modeled_stick_tokens_per_second > 0) {
                d["modeled_stick_tokens_per_second"] = done.modeled_stick_tokens_per_second;
                d["modeled_tokens_per_second_with_host"] = done.modeled_tokens_per_second_with_host;
              }
              send(sink, {{"done", d}});
            } catch (const std::exception& e) {  // Error, or out of memory: an answer, not a crash
              send(sink, {{"error", e.what()}});
            }
          });
          turn.reset();  // before the last chunk: a client that read it finds the device free
          if (!written) return false;
          sink.done();
          return true;
        });
  }

  void classify(const httplib::Request& req, httplib::Response& res) {
    if (req.body.empty()) return refuse(res, 400, "no image: send the image's bytes as the body");
    if (req.body.size() > kMaxImageBytes)
      return refuse(
          res, 413,
          cat("image too large: ", req.body.size(), " bytes (the limit is ", kMaxImageBytes, ")"));
    const std::string model = req.get_param_value("model");
    const std::string device = req.get_param_value("device");
    if (classifier_->models().empty())
      return refuse(res, 503, "no model: start tinycoral serve with --model M_edgetpu.tflite");
    // The image is decoded here to refuse a bad one with a 400, one decode at a time (a small
    // file can hold many pixels), then again when its turn comes: a waiting request holds only
    // its encoded bytes.
    auto body = std::make_shared<std::string>(req.body);
    try {
      if (!model.empty() && std::find(classifier_->models().begin(), classifier_->models().end(),
                                      model) == classifier_->models().end())
        fail("unknown model '", model, "'");
      if (!device.empty()) runtime::parse_device(device);
      std::lock_guard lock(decode_mutex_);
      decode(*body);
    } catch (const Error& e) {
      return refuse(res, 400, e.what());
    }
    res.set_header("Cache-Control", "no-store");
    res.set_chunked_content_provider(
        "application/x-ndjson", [this, body, model, device](size_t, httplib::DataSink& sink) {
          std::optional<DeviceLine::Turn> turn = take_turn(line_, sink);
          if (!turn) return false;
          device_.run([&] {
            try {
              if (may_use_stick(device) && story_ && story_->holds_stick()) story_->release();
              const json result = classifier_->classify(decode(*body), model, device);
              {
                std::lock_guard lock(chip_mutex_);
                last_chip_ = classifier_->last_chip();
              }
              ++classifications_;
              send(sink, {{"result", result}});
            } catch (const std::exception& e) {  // Error, or out of memory: an answer, not a crash
              send(sink, {{"error", e.what()}});
            }
          });
          turn.reset();  // before the last chunk: a client that read it finds the device free
          sink.done();
          return true;
        });
  }

  static host::Image decode(const std::string& bytes) {
    host::Image image = host::decode_image(
        std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
    if (int64_t{image.width} * image.height > kMaxImagePixels)
      fail("image too large: ", image.width, " x ", image.height, " pixels (the limit is ",
           kMaxImagePixels, ")");
    return image;
  }

  ServeOptions options_;
  std::unique_ptr<StoryWriter> story_;
  std::string story_error_;
  std::unique_ptr<ImageClassifier> classifier_;
  DeviceLine line_;
  DeviceThread device_;  // runs what a request does with the device, after its turn came
  std::atomic<uint64_t> stories_{0}, stories_stopped_{0}, classifications_{0};  // answered
  std::mutex chip_mutex_, decode_mutex_;
  json last_chip_;
};

}  // namespace

struct WebServer::Impl {
  explicit Impl(const ServeOptions& o) : app(o) {}
  App app;
  httplib::Server server;
  std::string url;
  int port = 0;
};

WebServer::WebServer(const ServeOptions& options) {
  if (options.port < 0 || options.port > 65535) fail("--port must be 0..65535");
  // glibc gives each worker thread that allocates its own malloc arena, and each arena keeps the
  // freed request bodies and decoded images of its requests: with 64 workers the resident memory
  // crept up by ~40 KiB per classification (88 -> 166 MiB over 1,800 of them in the load test);
  // two arenas keep it flat.
  mallopt(M_ARENA_MAX, 2);
  // Buffers of 128 KiB and more (request bodies, decoded images, tensors) are mapped for
  // themselves and given back when freed. glibc's default raises this threshold to the largest
  // such block freed so far, after which 20 waiting requests' half-megabyte images were carved out
  // of the heap between small long-lived blocks and never given back: the resident memory rose
  // from 92 to 113 MiB in 20 s of classifications (in the heap and the second arena, not in the
  // threads' stacks: /proc/PID/smaps). A fixed threshold keeps the adjustment off.
  mallopt(M_MMAP_THRESHOLD, 128 << 10);
  impl_ = std::make_unique<Impl>(options);
  httplib::Server& server = impl_->server;
  // Every waiting request holds a worker: enough of them that 20 clients and a browser all see
  // their place in line instead of waiting in the accept queue.
  server.new_task_queue = [] { return new httplib::ThreadPool(64); };
  server.set_payload_max_length(kMaxImageBytes + 1);
  server.set_keep_alive_timeout(5);
  // httplib's default also sets SO_REUSEPORT, with which a second server on a port in use binds
  // too and the two share the requests; SO_REUSEADDR alone still allows a quick restart.
  socket_t listening = -1;
  server.set_socket_options([&listening](socket_t sock) {
    const int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    listening = sock;
  });
  server.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 413)
      refuse(res, 413,
             cat("request too large (the limits: an image of ", kMaxImageBytes,
                 " bytes sent as its raw bytes, a form of 8192 bytes)"));
    else if (res.status == 404)
      refuse(res, 404, "not found: " + req.path);
    else
      refuse(res, res.status, cat("HTTP ", res.status));
  });
  impl_->app.routes(server);
  int port = options.port;
  if (port == 0) {
    port = server.bind_to_any_port(options.host);
    if (port < 0) fail("cannot bind to ", options.host);
  } else if (!server.bind_to_port(options.host, port)) {
    fail("cannot bind to ", options.host, ":", port, " (in use?)");
  }
  // Debian's httplib listens with a backlog of 5: 20 clients connecting at once while the accept
  // thread waits for a core overflowed it, and with SYN cookies some of them were reset
  // (ListenOverflows and SyncookiesFailed in /proc/net/netstat rose with each reset in the load
  // test). listen() again on the bound socket raises the backlog.
  if (listening >= 0 && ::listen(listening, SOMAXCONN) != 0)
    fail("cannot listen on ", options.host, ":", port);
  const bool v6 = options.host.find(':') != std::string::npos;
  impl_->port = port;
  impl_->url = cat("http://", v6 ? "[" : "", options.host, v6 ? "]" : "", ":", port, "/");
}

WebServer::~WebServer() {
  if (impl_) impl_->server.stop();
}

const std::string& WebServer::url() const { return impl_->url; }

void WebServer::listen() {
  if (!impl_->server.listen_after_bind())
    fail("the server stopped listening on port ", impl_->port);
}

void WebServer::stop() { impl_->server.stop(); }

void run_server(const ServeOptions& options, const std::function<void(const std::string&)>& ready) {
  WebServer server(options);
  ready(server.url());
  server.listen();
}

}  // namespace tinycoral::serve
