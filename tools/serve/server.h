// `tinycoral serve`: the web app (Write, See, Chip) on cpp-httplib. One device session serves every
// request in turn (DeviceLine); streamed answers are newline-separated JSON events, so a waiting
// request sees its place in line and a story arrives piece by piece. Routes and events are listed
// in server.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

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
  std::string model, labels, device = "auto", firmware;
  int threads = 0;  // story writing (0: one per core)
};

// Loads what the options name, binds, calls `ready(url)` and serves until the process ends. Throws
// Error when the port cannot be bound or the device is unknown. A missing checkpoint or model does
// not stop the server: its view says what to give.
void run_server(const ServeOptions& options, const std::function<void(const std::string&)>& ready);

}  // namespace tinycoral::serve
