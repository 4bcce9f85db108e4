// `tinycoral generate`: writes a story with a llama2.c checkpoint, with run.c's flags and behaviour
// (src/llm/, docs/llm.md): the same seed writes the same story as run.c. The text is streamed on
// stdout as it is written and the speed goes to stderr; --json prints one object at the end
// instead. --int8 runs the layer matmuls in the Edge TPU's arithmetic (the chip path's oracle).
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "commands.h"
#include "common/error.h"
#include "llm/checkpoint.h"
#include "llm/generate.h"
#include "llm/int8_model.h"

namespace tinycoral::cli {

namespace {

struct GenerateArgs {
  std::string checkpoint, tokenizer, prompt, device = "auto";
  int steps = 256;
  float temperature = 1.0f, topp = 0.9f;
  int64_t seed = 0;
  int threads = 0;
  int calibration = 64;
  bool int8 = false, json = false, all_logits = false;
};

// tokenizer.bin beside the checkpoint, else in the working directory (run.c's default).
std::string default_tokenizer(const std::string& checkpoint) {
  const auto beside = std::filesystem::path(checkpoint).parent_path() / "tokenizer.bin";
  return std::filesystem::exists(beside) ? beside.string() : "tokenizer.bin";
}

void run(GenerateArgs& a) {
  if (a.device == "sim" || a.device == "usb" || a.device.rfind("usb:", 0) == 0)
    fail("--device ", a.device,
         ": the Edge TPU path for transformers is not built yet (issue 14 step 5); use --device "
         "cpu (or --int8 for the chip's arithmetic on the CPU)");
  if (a.device != "auto" && a.device != "cpu")
    fail("unknown --device '", a.device, "' (auto, usb, sim or cpu)");
  if (a.threads < 0) fail("--threads must be >= 0");
  if (a.calibration < 1) fail("--calibration must be >= 1");
  if (a.device == "auto" && !a.json)
    std::cerr << "tinycoral: --device auto: the chip path is not built yet, running on the CPU\n";
  const llm::Checkpoint ck = llm::load_checkpoint(a.checkpoint);
  const std::string tok_path = a.tokenizer.empty() ? default_tokenizer(a.checkpoint) : a.tokenizer;
  const llm::Tokenizer tokenizer = llm::Tokenizer::load(tok_path, ck.config.vocab_size);
  // run.c's rules: seed 0 means the time, negative steps mean seq_len.
  const uint64_t seed =
      a.seed == 0 ? static_cast<unsigned>(std::time(nullptr)) : static_cast<uint64_t>(a.seed);
  const int threads = a.threads > 0
                          ? a.threads
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  llm::ThreadPool pool(threads);
  std::unique_ptr<llm::Transformer> model;
  llm::Calibration cal;
  if (a.int8) {
    cal = llm::calibrate(ck, pool, a.calibration);
    model = std::make_unique<llm::Int8Transformer>(ck, pool, cal);
  } else {
    model = std::make_unique<llm::Transformer>(ck, pool);
  }
  llm::Sampler sampler(a.temperature, a.topp, seed);
  model->set_argmax_only(sampler.temperature() == 0.0f && !a.all_logits);
  std::string text;
  const auto emit = [&](const std::string& piece) {
    if (a.json) {
      text += piece;
    } else {
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
    }
  };
  const llm::GenerateResult r =
      llm::generate(*model, tokenizer, sampler, a.prompt, a.steps < 0 ? 0 : a.steps, emit);
  const char* arithmetic = a.int8 ? "int8 (Edge TPU arithmetic)" : "float32";
  if (a.json) {
    nlohmann::json j;
    j["text"] = text;
    j["tokens"] = r.tokens;
    j["prompt_tokens"] = r.prompt_tokens;
    j["positions"] = r.positions;
    j["device"] = "cpu";
    j["arithmetic"] = a.int8 ? "int8" : "float32";
    j["threads"] = threads;
    j["seed"] = seed;
    j["tokens_per_second"] = r.tokens_per_second;
    j["checkpoint"] = llm::describe(ck);
    std::cout << j.dump() << "\n";
    return;
  }
  std::cout << "\n";
  std::cerr << "tinycoral: " << r.tokens_per_second << " tok/s on the CPU (" << arithmetic << ", "
            << threads << (threads == 1 ? " thread" : " threads") << ")\n";
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  auto* cmd = app.add_subcommand(
      "generate",
      "write a story with a llama2.c checkpoint (run.c's flags; same seed, same story)");
  cmd->add_option("checkpoint", args->checkpoint, "llama2.c checkpoint (.bin, version 0, 1 or 2)")
      ->required();
  cmd->add_option("-z,--tokenizer", args->tokenizer,
                  "tokenizer.bin (default: beside the checkpoint, else ./tokenizer.bin)");
  cmd->add_option("-n,--steps", args->steps, "positions to run, prompt included (0: seq_len)")
      ->capture_default_str();
  cmd->add_option("-t,--temperature", args->temperature, "0 = greedy")->capture_default_str();
  cmd->add_option("-p,--topp", args->topp, "top-p (nucleus) sampling; 0 or 1 = off")
      ->capture_default_str();
  cmd->add_option("-s,--seed", args->seed, "random seed (0: the time)");
  cmd->add_option("-i,--prompt", args->prompt, "the story's beginning");
  cmd->add_option("--device", args->device,
                  "auto, usb, sim or cpu (the chip path is not built yet)")
      ->capture_default_str();
  cmd->add_flag("--int8", args->int8, "layer matmuls in the Edge TPU's int8 arithmetic");
  cmd->add_option("--calibration", args->calibration,
                  "--int8: positions of greedy float generation the ranges are taken from")
      ->capture_default_str();
  cmd->add_option("--threads", args->threads, "worker threads (0: one per core)")
      ->capture_default_str();
  cmd->add_flag("--all-logits", args->all_logits,
                "greedy runs: compute every logit instead of only the possible argmaxes");
  cmd->add_flag("--json", args->json, "print the text, tokens and speed as one JSON object");
  cmd->callback([args] { run(*args); });
}

}  // namespace tinycoral::cli
