// `tinycoral serve`: the web app (tools/serve/): write stories, classify images, see what the chip
// did, in a browser. Binds to 127.0.0.1 unless --host says otherwise; --port 0 takes a free port.
// The URL goes to stdout once the server listens (tests read it from there).
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "commands.h"
#include "server.h"

namespace tinycoral::cli {

namespace {

// Google's compiled MobileNet and ImageNet labels from the test data, when --model is not given.
void default_model(serve::ServeOptions& o) {
  if (!o.model.empty()) return;
  const char* env = std::getenv("TINYCORAL_TESTDATA");
  const std::filesystem::path data = env && *env ? env : "../shared/testdata";
  const auto model = data / "gen2020/mobilenet_v2_1.0_224_quant_edgetpu.tflite";
  if (!std::filesystem::exists(model)) return;
  o.model = model.string();
  if (o.labels.empty() && std::filesystem::exists(data / "labels/imagenet_labels.txt"))
    o.labels = (data / "labels/imagenet_labels.txt").string();
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto o = std::make_shared<serve::ServeOptions>();
  auto* cmd = app.add_subcommand(
      "serve", "the web app: write stories, classify images, watch the chip (in a browser)");
  cmd->add_option("--host", o->host, "address to listen on")->capture_default_str();
  cmd->add_option("--port", o->port, "port (0: any free one)")->capture_default_str();
  cmd->add_option("--checkpoint", o->checkpoint,
                  "llama2.c checkpoint for stories (default: a small random one)");
  cmd->add_option("-z,--tokenizer", o->tokenizer,
                  "tokenizer.bin (default: beside the checkpoint, else ./tokenizer.bin)");
  cmd->add_option("--model", o->model,
                  "classification model, *_edgetpu.tflite (default: Google's MobileNet from the "
                  "test data); the others beside it can be chosen on the page");
  cmd->add_option("--labels", o->labels, "labels file for --model");
  cmd->add_option(
         "--device", o->device,
         "auto, usb, usb:N, sim or cpu for stories and classifications (auto: a stick if "
         "plugged in, else stories on the CPU and classifications on the virtual Edge TPU)")
      ->capture_default_str();
  cmd->add_option("--firmware", o->firmware,
                  "path of apex_latest_single_ep.bin for a stick in bootloader mode");
  cmd->add_option("--threads", o->threads, "story threads (0: one per core)")
      ->capture_default_str();
  cmd->callback([o] {
    default_model(*o);
    serve::run_server(*o, [](const std::string& url) {
      std::cout << "tinycoral serve: listening on " << url << std::endl;
    });
  });
}

}  // namespace tinycoral::cli
