// `tinycoral serve`: the web app (Write, See, Chip) on cpp-httplib. One device session serves every
// request in turn (DeviceLine); streamed answers are newline-separated JSON events, so a waiting
// request sees its place in line and a story arrives piece by piece. Routes and events are listed
// in server.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "device_access.h"

namespace tinycoral::serve {

// Request size limits: larger ones get 413 with a plain message.
constexpr size_t kMaxImageBytes = 8u << 20;
constexpr int64_t kMaxImagePixels = 4096 * 4096;
constexpr size_t kMaxPromptBytes = 1024;
constexpr size_t kMaxJsonBytes = 16u << 10;

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port
  std::string checkpoint, tokenizer;
  std::string model, labels, firmware;
  std::string device = "auto";  // stories' and classifications' default
  int threads = 0;              // story writing (0: one per core)
  DeviceAccess devices = system_devices();
};

// The web app on a bound port. The constructor loads what the options name and binds; it throws
// Error when the port cannot be bound or the device is unknown. A missing checkpoint or model does
// not stop the server: its view says what to give.
class WebServer {
 public:
  explicit WebServer(const ServeOptions& options);
  ~WebServer();
  WebServer(const WebServer&) = delete;
  WebServer& operator=(const WebServer&) = delete;

  const std::string& url() const;  // http://host:port/
  void listen();                   // serves until stop(); throws Error when listening fails
  void stop();                     // from any thread

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A WebServer that calls `ready(url)` once it listens and serves until the process ends.
void run_server(const ServeOptions& options, const std::function<void(const std::string&)>& ready);

}  // namespace tinycoral::serve
