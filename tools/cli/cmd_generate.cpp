// `tinycoral generate`: writes a story with a llama2.c checkpoint, with run.c's flags and behaviour
// (src/llm/, docs/llm.md): the same seed writes the same story as run.c. The text is streamed on
// stdout as it is written and the speed goes to stderr; --json prints one object at the end
// instead. --int8 runs the layer matmuls in the Edge TPU's arithmetic (the chip path's oracle);
// --device sim / usb runs them on an Edge TPU (the chip path, llm/chip_model.h), which writes the
// same text, and reports the stick's modeled speed on the simulator. Both use the fused layers'
// arithmetic (llm/int8_model.h) unless --unfused-layers asks for the older one.
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "commands.h"
#include "common/error.h"
#include "compiler/fc_codegen.h"
#include "generate_batch.h"
#include "llm/checkpoint.h"
#include "llm/chip_model.h"
#include "llm/generate.h"
#include "llm/int8_model.h"
#include "runtime/device_select.h"
#include "usb/libusb_transport.h"

namespace tinycoral::cli {

namespace {

struct GenerateArgs {
  std::string checkpoint, tokenizer, prompt, device = "auto";
  int steps = 256;
  float temperature = 1.0f, topp = 0.9f;
  int64_t seed = 0;
  int threads = 0;
  int calibration = 64;
  int batch = -1;  // --batch B: B stories at once (generate_batch.h); -1: not asked for
  bool int8 = false, json = false, all_logits = false, fused_layers = false, unfused_layers = false;
  bool values_on_host = false;
  bool scores_on_chip = false;
  bool key_column_write = false;
  bool chip_rope = false;
  bool rope_products_to_host = false;
  bool chip_rms = false;
  bool chip_residual = false;
  std::string weighted_sum = "scalar-core";  // --weighted-sum
};

// --weighted-sum's names (llm::WeightedSum). Per-head bytes (A) is not offered: its cache is u'
// (n_heads x dim bytes per position against v~'s kv_dim), it needs one more program for the sum
// over heads, and the chip path builds B; the agreement bench still measures it.
llm::WeightedSum parse_weighted_sum(const std::string& name) {
  if (name == "scalar-core") return llm::WeightedSum::kScalarCore;
  if (name == "value-cache") return llm::WeightedSum::kValueCache;
  fail("--weighted-sum must be scalar-core or value-cache, not '", name, "'");
}

// tokenizer.bin beside the checkpoint, else in the working directory (run.c's default).
std::string default_tokenizer(const std::string& checkpoint) {
  const auto beside = std::filesystem::path(checkpoint).parent_path() / "tokenizer.bin";
  return std::filesystem::exists(beside) ? beside.string() : "tokenizer.bin";
}

bool stick_present() {
  try {
    return !usb::list_usb_sticks().empty();
  } catch (const Error&) {
    return false;  // no usable libusb (a container without /dev/bus/usb): no stick
  }
}

// The Edge TPU --device names, or null for the CPU. auto takes a real stick when one is plugged
// in, else the CPU: the simulator is only used when asked for (it computes every cycle).
std::unique_ptr<runtime::EdgeTpu> open_device(const std::string& device, bool quiet) {
  const runtime::DeviceChoice choice = runtime::parse_device(device);
  if (choice.kind == runtime::DeviceChoice::Kind::kCpu) return nullptr;
  if (choice.kind == runtime::DeviceChoice::Kind::kAuto && !stick_present()) {
    if (!quiet) std::cerr << "tinycoral: --device auto: no Coral USB Accelerator, using the CPU\n";
    return nullptr;
  }
  std::string note;
  auto tpu = runtime::open_edgetpu(choice, {}, &note);
  if (!quiet && !note.empty()) std::cerr << "tinycoral: " << note << "\n";
  return tpu;
}

// The chip path's figures: measured, and modeled from the simulator's clock per forward pass.
nlohmann::json chip_json(const llm::ChipPathStats& s, int positions, double wall_s,
                         bool simulated) {
  nlohmann::json j;
  j["matmuls_on_chip"] = s.chip_matmuls;
  j["matmuls_on_host"] = s.host_matmuls;
  if (!s.host_reason.empty()) j["host_reason"] = s.host_reason;
  j["programs_per_token"] = s.programs;
  j["scores_layers_on_chip"] = s.scores_layers;
  j["softmax_layers_on_chip"] = s.softmax_layers;
  j["key_column_write_layers_on_chip"] = s.key_write_layers;
  j["value_sum_layers_on_chip"] = s.value_sum_layers;
  j["attention_layers_on_chip"] = s.attention_layers;
  j["wo_layers_on_chip"] = s.wo_layers;
  j["rope_layers_on_chip"] = s.rope_layers;
  j["rope_sum_layers_on_chip"] = s.rope_sum_layers;
  j["key_sum_layers_on_chip"] = s.key_sum_layers;
  j["rope_multiplier_layers_on_chip"] = s.rope_mult_layers;
  j["rms_layers_on_chip"] = s.rms_layers;
  j["value_tilde_layers_on_chip"] = s.value_tilde_layers;
  j["key_sum_groups_on_chip"] = s.key_sum_groups;
  j["rope_kept_layers_on_chip"] = s.rope_kept_layers;
  j["joined_layers_on_chip"] = s.joined_layers;
  j["layer_rest_on_chip"] = s.rest_layers;
  j["layers_composed"] = s.composed_layers;
  j["rest_shared_groups"] = s.rest_shared_groups;
  j["wo_resident_bytes"] = s.wo_resident_bytes;
  j["joined_programs"] = s.joined_programs;
  j["key_programs"] = s.key_programs;
  j["resident_parameter_bytes"] = s.resident_bytes;
  j["fullest_tile_parameter_bytes"] = int64_t{s.max_tile_units} * 64;
  // Each tile's parameter units of 64 bytes, filled from unit 0: the rest of the tile's
  // tile_unit_capacity is its one free run, the largest group it can still take.
  j["tile_units"] = s.tile_units;
  j["tile_unit_capacity"] = compiler::kFcParamUnits;
  if (simulated && positions > 0) {
    const double per = 1.0 / positions;
    const runtime::StickTime& t = s.modeled;
    const double stick_ms = t.total_ms_high() * per;
    const double host_ms = std::max(0.0, wall_s - s.chip_wall_s) * 1e3 * per;
    nlohmann::json m;
    m["stick_ms_per_token"] = stick_ms;
    m["compute_ms_per_token"] = t.compute_ms_high * per;
    m["to_device_ms_per_token"] = t.to_device_ms * per;
    m["from_device_ms_per_token"] = t.from_device_ms * per;
    m["per_run_ms_per_token"] = t.per_run_ms * per;
    m["runs_per_token"] = s.runs * per;
    m["bytes_to_device_per_token"] = double(s.bytes_to_device) * per;
    m["bytes_from_device_per_token"] = double(s.bytes_from_device) * per;
    // Of bytes_to_device, the joined programs' instructions by part (in program order).
    nlohmann::json parts = nlohmann::json::array();
    for (const auto& [name, bytes] : s.joined_part_bytes)
      parts.push_back({{"part", name}, {"bytes_per_token", double(bytes) * per}});
    m["joined_instruction_bytes_per_token"] = parts;
    m["stick_tokens_per_second"] = stick_ms > 0 ? 1e3 / stick_ms : 0;
    m["host_ms_per_token_measured"] = host_ms;
    // (Counted in the chip's wall time, not in host_ms: rewriting the position's fields of the
    // programs that write the key; the constructor generates them all.)
    m["key_program_build_ms_per_token_measured"] = s.key_program_build_s * 1e3 * per;
    m["tokens_per_second_with_host"] = 1e3 / (stick_ms + host_ms);
    m["parameter_caching_ms"] = s.caching.total_ms_high();
    m["clock"] = "250 MHz";
    j["modeled"] = m;
  }
  return j;
}

void run(GenerateArgs& a) {
  if (a.threads < 0) fail("--threads must be >= 0");
  if (a.calibration < 1) fail("--calibration must be >= 1");
  runtime::parse_device(a.device);  // a bad --device fails before the checkpoint is read
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
  const std::unique_ptr<runtime::EdgeTpu> tpu = open_device(a.device, a.json);  // outlives model
  if (a.fused_layers && a.unfused_layers)
    fail("--fused-layers and --unfused-layers exclude each other");
  if (a.unfused_layers && !a.int8 && !tpu && a.batch == -1)
    fail("--unfused-layers needs --int8, --batch or an Edge TPU device");
  if (a.scores_on_chip && (!tpu || a.unfused_layers || a.batch != -1))
    fail("--scores-on-chip needs an Edge TPU device, the default arithmetic and no --batch");
  if (a.key_column_write && !a.scores_on_chip) fail("--key-column-write needs --scores-on-chip");
  if (a.values_on_host && (!tpu || a.unfused_layers || a.batch == -1))
    fail("--values-on-host needs --batch, an Edge TPU device and the default arithmetic");
  const llm::WeightedSum weighted_sum = parse_weighted_sum(a.weighted_sum);
  if (weighted_sum != llm::WeightedSum::kScalarCore &&
      ((!a.int8 && !tpu) || a.unfused_layers || a.batch != -1))
    fail(
        "--weighted-sum value-cache needs --int8 or an Edge TPU device, the default arithmetic "
        "and no --batch");
  if (a.chip_rope && ((!a.int8 && !tpu) || a.unfused_layers || a.batch != -1))
    fail("--chip-rope needs --int8 or an Edge TPU device, the default arithmetic and no --batch");
  if (a.rope_products_to_host && !(a.chip_rope && a.scores_on_chip))
    fail("--rope-products-to-host needs --chip-rope and --scores-on-chip");
  if (a.chip_rms && ((!a.int8 && !tpu) || a.unfused_layers || a.batch != -1))
    fail("--chip-rms needs --int8 or an Edge TPU device, the default arithmetic and no --batch");
  if (a.chip_residual && ((!a.int8 && !tpu) || a.unfused_layers || a.batch != -1 || !a.chip_rms ||
                          !a.chip_rope || weighted_sum != llm::WeightedSum::kValueCache))
    fail(
        "--chip-residual needs --int8 or an Edge TPU device (no --batch), the default "
        "arithmetic, --chip-rms, --chip-rope and --weighted-sum value-cache");
  const llm::Int8Options layers{.fused_layers = !a.unfused_layers,
                                .chip_attention = true,
                                .chip_scores = a.scores_on_chip,
                                .chip_key_write = a.key_column_write,
                                .weighted_sum = weighted_sum,
                                .chip_rope = a.chip_rope,
                                .keep_rope_products = !a.rope_products_to_host,
                                .chip_rms = a.chip_rms,
                                .chip_residual = a.chip_residual};
  if (a.batch != -1) {
    generate_batch_command({a.batch, a.prompt, a.steps < 0 ? 0 : a.steps, a.temperature, a.topp,
                            seed, a.calibration, a.json, layers, a.values_on_host},
                           ck, tokenizer, pool, tpu.get());
    return;
  }
  std::unique_ptr<llm::Transformer> model;
  llm::Calibration cal;
  llm::ChipTransformer* chip = nullptr;
  if (tpu) {  // the chip path computes the int8 path's arithmetic
    cal = llm::calibrate(ck, pool, a.calibration);
    auto owned = std::make_unique<llm::ChipTransformer>(ck, pool, cal, *tpu, layers);
    chip = owned.get();
    model = std::move(owned);
    if (a.scores_on_chip && chip->stats().scores_layers < ck.config.n_layers && !a.json)
      std::cerr << "tinycoral: the attention scores of "
                << ck.config.n_layers - chip->stats().scores_layers << " of " << ck.config.n_layers
                << " layers run on the host (no room for their keys in a program or in tile "
                   "memory)\n";
    if (weighted_sum == llm::WeightedSum::kValueCache &&
        chip->stats().value_sum_layers < ck.config.n_layers && !a.json)
      std::cerr << "tinycoral: the weighted sums of "
                << ck.config.n_layers - chip->stats().value_sum_layers << " of "
                << ck.config.n_layers
                << " layers run on the host (no room for their values in tile memory)\n";
    if (a.chip_rope && chip->stats().rope_layers < ck.config.n_layers && !a.json)
      std::cerr << "tinycoral: RoPE's products of "
                << ck.config.n_layers - chip->stats().rope_layers << " of " << ck.config.n_layers
                << " layers run on the host (no room for them in the program computing q and k)\n";
    if (a.chip_rope && chip->stats().softmax_layers > 0 &&
        chip->stats().rope_sum_layers < chip->stats().softmax_layers && !a.json)
      std::cerr << "tinycoral: q's RoPE sum of "
                << chip->stats().softmax_layers - chip->stats().rope_sum_layers << " of "
                << chip->stats().softmax_layers
                << " layers with the scores on the chip runs on the host (no room for it)\n";
    if (chip->stats().host_matmuls > 0 && !a.json)
      std::cerr << "tinycoral: " << chip->stats().host_matmuls << " of "
                << chip->stats().host_matmuls + chip->stats().chip_matmuls
                << " layer matmuls run on the host (" << chip->stats().host_reason << ")\n";
  } else if (a.int8) {
    cal = llm::calibrate(ck, pool, a.calibration);
    model = std::make_unique<llm::Int8Transformer>(ck, pool, cal, layers);
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
  const auto start = std::chrono::steady_clock::now();
  const llm::GenerateResult r =
      llm::generate(*model, tokenizer, sampler, a.prompt, a.steps < 0 ? 0 : a.steps, emit);
  const double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const bool int8 = a.int8 || chip;
  const char* arithmetic = int8 ? "int8 (Edge TPU arithmetic)" : "float32";
  const bool simulated = tpu && tpu->is_virtual();
  const std::string device = !tpu ? "cpu" : simulated ? "sim" : "usb";
  if (a.json) {
    nlohmann::json j;
    j["text"] = text;
    j["tokens"] = r.tokens;
    j["prompt_tokens"] = r.prompt_tokens;
    j["positions"] = r.positions;
    j["device"] = device;
    j["arithmetic"] = int8 ? "int8" : "float32";
    if (chip) j["chip"] = chip_json(chip->stats(), r.positions, wall_s, simulated);
    j["threads"] = threads;
    j["seed"] = seed;
    j["tokens_per_second"] = r.tokens_per_second;
    j["checkpoint"] = llm::describe(ck);
    std::cout << j.dump() << "\n";
    return;
  }
  std::cout << "\n";
  if (!chip) {
    std::cerr << "tinycoral: " << r.tokens_per_second << " tok/s on the CPU (" << arithmetic << ", "
              << threads << (threads == 1 ? " thread" : " threads") << ")\n";
    return;
  }
  const llm::ChipPathStats& s = chip->stats();
  std::cerr << "tinycoral: " << r.tokens_per_second << " tok/s measured on "
            << (simulated ? "the virtual Edge TPU (simulated, every cycle)" : tpu->description())
            << ": " << s.chip_matmuls << " layer matmuls on the chip as " << s.programs
            << " programs per token, " << s.resident_bytes << " parameter bytes resident\n";
  if (simulated) {
    const nlohmann::json m = chip_json(s, r.positions, wall_s, true).at("modeled");
    std::cerr << "tinycoral: modeled stick: " << m.at("stick_tokens_per_second").get<double>()
              << " tok/s (" << m.at("stick_ms_per_token").get<double>()
              << " ms per token at 250 MHz: compute " << m.at("compute_ms_per_token").get<double>()
              << ", USB " << m.at("to_device_ms_per_token").get<double>() << " + "
              << m.at("from_device_ms_per_token").get<double>() << ", per-run cost "
              << m.at("per_run_ms_per_token").get<double>() << "); with the host's measured "
              << m.at("host_ms_per_token_measured").get<double>()
              << " ms per token: " << m.at("tokens_per_second_with_host").get<double>()
              << " tok/s (modeled)\n";
  }
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
                  "cpu; sim or usb[:N]: the layer matmuls on an Edge TPU in int8 (the virtual one "
                  "reports the stick's modeled speed); auto: a stick if plugged in, else cpu")
      ->capture_default_str();
  cmd->add_flag("--int8", args->int8, "layer matmuls in the Edge TPU's int8 arithmetic");
  cmd->add_flag(
      "--unfused-layers", args->unfused_layers,
      "int8, the chip and --batch: the older arithmetic (RMSNorm before q, k, v, wo after "
      "attention), each matmul or FFN its own program on the chip (the default: q, k, v "
      "read the residual stream, RMSNorm's scale after them, wo folded into the value "
      "cache; each layer's FFN, residual add and the next q, k, v, u one program)");
  cmd->add_flag("--fused-layers", args->fused_layers, "the default arithmetic (kept for scripts)");
  cmd->add_flag("--scores-on-chip", args->scores_on_chip,
                "sim or usb: attention's scores and softmax on the chip too, the keys resident "
                "in tile memory and written as tokens arrive (one more program per layer and "
                "token)");
  cmd->add_flag("--key-column-write", args->key_column_write,
                "with --scores-on-chip: the scores' program writes the new key into its column "
                "of the resident keys itself (a read-modify-write of each head's weight rows "
                "through narrow memory), the host sending 256 bytes per head instead of the "
                "key's 64 positions; one program per 64 positions, its column rewritten per "
                "run; with --chip-rope the program also computes the key (its RoPE sum) where "
                "tile memory holds it, the host sending only its products (docs/llm.md)");
  cmd->add_option("--weighted-sum", args->weighted_sum,
                  "int8, sim or usb: where attention's weighted sum meets the softmax's 1 / S: "
                  "scalar-core (exact int32 sums per head, weighed on the scalar core) or "
                  "value-cache (v~ = r v cached, per head an FC over positions with a per-token "
                  "multiplier into wo's input, then wo; docs/llm.md)")
      ->capture_default_str();
  cmd->add_flag(
      "--chip-rope", args->chip_rope,
      "int8, sim or usb: RoPE and RMSNorm's scale on q and k's int8 bytes in the chip's "
      "elementwise ops (MUL by cos, MUL of the swapped pairs by sin', ADD with r as a "
      "per-token multiplier; on the chip path the products run with q and k, q~'s sum in the "
      "scores' program with --scores-on-chip, which reads q's products where their program "
      "left them on the tiles; docs/llm.md)");
  cmd->add_flag("--rope-products-to-host", args->rope_products_to_host,
                "with --chip-rope --scores-on-chip on sim or usb: q's RoPE products go back to "
                "the host and are sent again to the scores' program instead of staying on the "
                "tiles (the same text; for comparing the two)");
  cmd->add_flag("--chip-rms", args->chip_rms,
                "int8, sim or usb: RMSNorm's scale r before q, k, v from the int8 bytes they "
                "read, in the scalar core's float32 ops (an exact sum of squares, a Newton "
                "reciprocal square root) instead of from the host's float residual: on sim or "
                "usb past layer 0 by the chip's scalar core in the program computing those "
                "bytes, else by the host (docs/llm.md)");
  cmd->add_flag("--chip-residual", args->chip_residual,
                "int8, sim or usb, with --chip-rms --chip-rope --weighted-sum value-cache: the "
                "residual stream in int8 between attention and the FFN and between layers, as a "
                "program of the whole layer would compute it (v~ from wv's output stage, the "
                "FFN's RMSNorm from the bytes); on sim or usb the programs computing q, k and v "
                "return v~ (wv's groups wait for r), the adds and the FFN's RMSNorm run on the "
                "host, and no layer's scores join the program before them yet (docs/llm.md)");
  cmd->add_flag("--values-on-host", args->values_on_host,
                "--batch on sim or usb: the host computes the values' u (wo folded into them) "
                "from v instead of the chip, which then returns v, not u: faster for large "
                "batches, but wo's matmul leaves the chip");
  cmd->add_option("--calibration", args->calibration,
                  "--int8: positions of greedy float generation the ranges are taken from")
      ->capture_default_str();
  cmd->add_option("--threads", args->threads, "worker threads (0: one per core)")
      ->capture_default_str();
  cmd->add_flag("--all-logits", args->all_logits,
                "greedy runs: compute every logit instead of only the possible argmaxes");
  cmd->add_option("--batch", args->batch,
                  "B stories at once, seeds seed..seed+B-1, every layer matmul one program over "
                  "all B (int8 arithmetic; on the CPU without --device)");
  cmd->add_flag("--json", args->json, "print the text, tokens and speed as one JSON object");
  cmd->callback([args] { run(*args); });
}

}  // namespace tinycoral::cli
