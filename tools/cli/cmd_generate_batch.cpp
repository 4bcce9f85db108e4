// `tinycoral generate --batch B` (generate_batch.h).
#include <iostream>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "generate_batch.h"
#include "llm/batch.h"
#include "llm/batch_chip.h"

namespace tinycoral::cli {

namespace {

// The chip's figures for the whole batch: modeled from the simulator's clock, per step and
// aggregate.
nlohmann::json chip_json(const llm::ChipBatchStats& s, const llm::BatchRun& run, bool simulated) {
  nlohmann::json j;
  j["matmuls_on_chip"] = s.chip_matmuls;
  j["matmuls_on_host"] = s.host_matmuls;
  if (!s.host_reason.empty()) j["host_reason"] = s.host_reason;
  // fused_layers: layers whose u (wo folded into the values) the host computes by choice.
  j["values_on_host_layers"] = s.host_values;
  j["programs_per_step"] = s.programs;
  j["program_runs"] = s.runs;
  j["resident_parameter_bytes"] = s.resident_bytes;
  j["fullest_tile_parameter_bytes"] = int64_t{s.max_tile_units} * 64;
  if (simulated && run.steps > 0 && run.positions > 0) {
    const runtime::StickTime& t = s.modeled;
    const double per_step = 1.0 / run.steps;
    nlohmann::json m;
    m["stick_ms_per_step"] = t.total_ms_high() * per_step;
    m["compute_ms_per_step"] = t.compute_ms_high * per_step;
    m["to_device_ms_per_step"] = t.to_device_ms * per_step;
    m["from_device_ms_per_step"] = t.from_device_ms * per_step;
    m["per_run_ms_per_step"] = t.per_run_ms * per_step;
    m["stick_tokens_per_second"] = 1e3 * double(run.positions) / t.total_ms_high();
    const double host_s = std::max(0.0, run.wall_s - s.chip_wall_s);
    m["host_ms_per_step_measured"] = host_s * 1e3 * per_step;
    m["tokens_per_second_with_host"] = double(run.positions) / (t.total_ms_high() / 1e3 + host_s);
    m["parameter_caching_ms"] = s.caching.total_ms_high();
    m["clock"] = "250 MHz";
    j["modeled"] = m;
  }
  return j;
}

}  // namespace

void generate_batch_command(const BatchOptions& o, const llm::Checkpoint& ck,
                            const llm::Tokenizer& tokenizer, llm::ThreadPool& pool,
                            runtime::EdgeTpu* tpu) {
  if (o.batch < 1) fail("--batch must be at least 1 (got ", o.batch, ")");
  if (o.batch > llm::kMaxBatch) fail("--batch ", o.batch, ": at most ", llm::kMaxBatch);
  const llm::Calibration cal = llm::calibrate(ck, pool, o.calibration);
  std::vector<llm::BatchRequest> requests;
  for (int i = 0; i < o.batch; ++i)
    requests.push_back({o.prompt, o.steps, o.temperature, o.topp, o.seed + uint64_t(i)});
  std::unique_ptr<llm::BatchMatmuls> matmuls;
  llm::ChipBatchMatmuls* chip = nullptr;
  if (tpu) {
    auto owned = std::make_unique<llm::ChipBatchMatmuls>(ck, pool, cal, *tpu, o.arithmetic,
                                                         o.values_on_host);
    chip = owned.get();
    matmuls = std::move(owned);
    if (chip->stats().host_matmuls > 0 && !o.json)
      std::cerr << "tinycoral: " << chip->stats().host_matmuls << " of "
                << chip->stats().host_matmuls + chip->stats().chip_matmuls
                << " layer matmuls run on the host (" << chip->stats().host_reason << ")\n";
  } else {
    matmuls = std::make_unique<llm::CpuBatchMatmuls>(ck, pool, cal, o.arithmetic);
  }
  const llm::BatchRun run = llm::generate_batch(ck, tokenizer, *matmuls, requests);
  const bool simulated = tpu && tpu->is_virtual();
  const std::string device = !tpu ? "cpu" : simulated ? "sim" : "usb";
  if (o.json) {
    nlohmann::json j;
    j["sequences"] = nlohmann::json::array();
    for (size_t i = 0; i < run.sequences.size(); ++i) {
      const llm::BatchSequence& s = run.sequences[i];
      j["sequences"].push_back({{"text", s.text},
                                {"tokens", s.result.tokens},
                                {"prompt_tokens", s.result.prompt_tokens},
                                {"positions", s.result.positions},
                                {"seed", requests[i].seed}});
    }
    j["batch"] = o.batch;
    j["device"] = device;
    j["arithmetic"] = "int8";
    j["positions"] = run.positions;
    j["steps"] = run.steps;
    j["tokens_per_second"] = run.tokens_per_second();
    if (chip) j["chip"] = chip_json(chip->stats(), run, simulated);
    j["checkpoint"] = llm::describe(ck);
    std::cout << j.dump() << "\n";
    return;
  }
  for (size_t i = 0; i < run.sequences.size(); ++i)
    std::cout << (i ? "\n" : "") << run.sequences[i].text << "\n";
  std::cerr << "tinycoral: batch of " << o.batch << ": " << run.positions << " tokens in "
            << run.steps << " steps, " << run.tokens_per_second() << " tok/s measured on "
            << (!tpu        ? "the CPU (int8)"
                : simulated ? "the virtual Edge TPU (simulated, every cycle)"
                            : tpu->description())
            << "\n";
  if (!chip) return;
  const llm::ChipBatchStats& s = chip->stats();
  std::cerr << "tinycoral: " << s.chip_matmuls << " layer matmuls on the chip as " << s.programs
            << " programs per step (" << s.runs << " runs), " << s.resident_bytes
            << " parameter bytes resident\n";
  if (simulated && run.steps > 0) {
    const nlohmann::json m = chip_json(s, run, true).at("modeled");
    std::cerr << "tinycoral: modeled stick: " << m.at("stick_tokens_per_second").get<double>()
              << " tok/s aggregate (" << m.at("stick_ms_per_step").get<double>()
              << " ms per step at 250 MHz: compute " << m.at("compute_ms_per_step").get<double>()
              << ", USB " << m.at("to_device_ms_per_step").get<double>() << " + "
              << m.at("from_device_ms_per_step").get<double>() << ", per-run cost "
              << m.at("per_run_ms_per_step").get<double>() << "); with the host's measured "
              << m.at("host_ms_per_step_measured").get<double>()
              << " ms per step: " << m.at("tokens_per_second_with_host").get<double>()
              << " tok/s (modeled)\n";
  }
}

}  // namespace tinycoral::cli
