// The batch path's speed (issue 14, step e) for B = 1, 16, 64, 256 sequences (or the batches
// given): the stick's tok/s modeled from the virtual Edge TPU's cycles and bytes (every layer
// matmul one batched program over all rows, weights resident; runtime/stick_time.h), and the
// int8 batch path measured on this machine's CPU. Figures per step do not depend on the weights or
// the position, so a few steps suffice. stories15M's shapes: the test data's fixture script,
//   python3 ../shared/testdata/llama2c/make_checkpoint.py /tmp/rand15M.bin rand15M
//   llm_batch_bench /tmp/rand15M.bin ../shared/testdata/llama2c/tokenizer.bin [STEPS=4] [B...]
//     [--unfused-layers] [--values-on-host] [--split-ffn]
// (the default arithmetic is the fused layers', int8_model.h; --unfused-layers the older one;
// --values-on-host: the host computes the fused layers' u, batch_chip.h; --split-ffn: w1 + w3 and
// w2 as two programs with the gate on the host, as before the batched fused FFN).
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"
#include "llm/batch.h"
#include "llm/batch_chip.h"
#include "runtime/device_select.h"

int main(int argc, char** argv) {
  using namespace tinycoral;
  using namespace tinycoral::llm;
  Int8Options arithmetic;
  bool values_on_host = false, split_ffn = false, unfused_layers = false;
  std::string checkpoint, tokenizer;
  int steps = 4;
  std::vector<int> batches{1, 16, 64, 256};
  CLI::App app{"The batch path's modeled stick tok/s and the CPU's measured tok/s"};
  app.add_option("checkpoint", checkpoint, "llama2.c checkpoint")->required();
  app.add_option("tokenizer", tokenizer, "tokenizer.bin")->required();
  app.add_option("steps", steps, "steps per batch")->check(CLI::PositiveNumber);
  app.add_option("batches", batches, "batch sizes")->check(CLI::PositiveNumber);
  app.add_flag("--unfused-layers", unfused_layers, "the older, unfused arithmetic");
  app.add_flag("--values-on-host", values_on_host, "the host computes the fused layers' u");
  app.add_flag("--split-ffn", split_ffn, "w1 + w3 and w2 as two programs, the gate on the host");
  CLI11_PARSE(app, argc, argv);
  arithmetic.fused_layers = !unfused_layers;
  const bool ffn_programs = !split_ffn;
  try {
    const Checkpoint ck = load_checkpoint(checkpoint);
    const Tokenizer tok = Tokenizer::load(tokenizer, ck.config.vocab_size);
    const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    ThreadPool pool(threads);
    const Calibration cal = calibrate(ck, pool, 8);
    std::printf("%s, %d steps per batch, %s layers%s, FFN %s, CPU: %d threads\n\n",
                describe(ck).c_str(), steps, arithmetic.fused_layers ? "fused" : "unfused",
                values_on_host ? ", u on the host" : "",
                ffn_programs ? "one program" : "split (gate on the host)", threads);
    std::printf(
        "| batch | modeled stick tok/s | modeled ms per step (compute + USB in + USB out + "
        "per-run) | runs per step | CPU int8 tok/s (measured) | host's u ms per step (measured, "
        "one thread) |\n|---|---|---|---|---|---|\n");
    for (int b : batches) {
      std::vector<BatchRequest> requests;
      for (int i = 0; i < b; ++i) requests.push_back({"", steps, 1.0f, 0.9f, uint64_t(1 + i)});
      auto tpu = runtime::open_virtual_edgetpu();
      ChipBatchMatmuls chip(ck, pool, cal, *tpu, arithmetic, values_on_host, ffn_programs);
      const BatchRun on_chip = generate_batch(ck, tok, chip, requests);
      CpuBatchMatmuls cpu(ck, pool, cal, arithmetic);
      const BatchRun on_cpu = generate_batch(ck, tok, cpu, requests);
      for (size_t i = 0; i < requests.size(); ++i)
        if (on_chip.sequences[i].result.tokens != on_cpu.sequences[i].result.tokens)
          fail("batch ", b, ": sequence ", i, " differs between the chip and the CPU");
      const runtime::StickTime& t = chip.stats().modeled;
      const double per = 1.0 / on_chip.steps;
      // What the host pays for computing u (fused layers: wo folded into the values) for every row
      // and layer of a step, instead of the chip returning it: one thread, as a sequence does.
      double values_ms = 0;
      if (chip.stats().host_values > 0) {
        const Config& c = ck.config;
        std::vector<int8_t> v(size_t(c.kv_dim()), 1), u(size_t(c.n_heads) * size_t(c.dim));
        const auto start = std::chrono::steady_clock::now();
        for (int row = 0; row < b; ++row)
          for (int l = 0; l < c.n_layers; ++l) chip.weights()->values_q(l, v.data(), u.data());
        values_ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                .count();
      }
      std::printf(
          "| %d | %.0f (modeled) | %.2f = %.3f + %.2f + %.2f + %.2f | %.1f | %.1f | %.2f |\n", b,
          1e3 * double(on_chip.positions) / t.total_ms_high(), t.total_ms_high() * per,
          t.compute_ms_high * per, t.to_device_ms * per, t.from_device_ms * per, t.per_run_ms * per,
          double(chip.stats().runs) * per, on_cpu.tokens_per_second(), values_ms);
      std::fflush(stdout);
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
  return 0;
}
