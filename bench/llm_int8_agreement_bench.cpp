// How closely the int8 path (the Edge TPU's arithmetic for the layer matmuls) follows float32 on a
// llama2.c checkpoint: both are teacher-forced on the float model's own story (sampled at
// temperature 1 from BOS, seed 1), and for every position we compare the next-token choice (top-1
// agreement) and the distributions (KL(float || int8) in nats). Calibration: the first
// --calibration positions of a greedy float run, as `generate --int8` does. FUSED = 1: the
// --fused-layers arithmetic (int8_model.h); ATTENTION = 1 (with FUSED = 1): attention in the chip's
// arithmetic too (Int8Options::chip_attention), 0: the float path's scores and softmax.
// WEIGHTED_SUM (with ATTENTION = 1): Int8Options::weighted_sum, 0 the scalar core's head sums (the
// default), 1 per-head bytes (kPerHeadBytes), 2 the value cache (kValueCache). CHIP_ROPE = 1
// (with ATTENTION = 1): RoPE and r in the chip's ops on the chain's int8 q and k
// (Int8Options::chip_rope). CHIP_RMS = 1 (with FUSED = 1): RMSNorm's scale from the int8 bytes
// q, k, v read, in the scalar core's float32 ops (Int8Options::chip_rms). CHIP_RESIDUAL = 1 (with
// WEIGHTED_SUM = 2, CHIP_ROPE = 1, CHIP_RMS = 1): the residual stream in int8 between attention
// and the FFN and between layers (Int8Options::chip_residual).
//   llm_int8_agreement_bench CHECKPOINT [POSITIONS=256] [CALIBRATION=64] [FUSED=0] [ATTENTION=1]
//                            [WEIGHTED_SUM=0] [CHIP_ROPE=0] [CHIP_RMS=0] [CHIP_RESIDUAL=0]
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "common/error.h"
#include "llm/checkpoint.h"
#include "llm/int8_model.h"
#include "llm/sampler.h"
#include "llm/tokenizer.h"

int main(int argc, char** argv) {
  using namespace tinycoral::llm;
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: %s CHECKPOINT [POSITIONS] [CALIBRATION] [FUSED] [ATTENTION] "
                 "[WEIGHTED_SUM] [CHIP_ROPE] [CHIP_RMS] [CHIP_RESIDUAL]\n",
                 argv[0]);
    return 2;
  }
  try {
    const Checkpoint ck = load_checkpoint(argv[1]);
    const int positions = std::min(argc > 2 ? std::atoi(argv[2]) : 256, ck.config.seq_len);
    const int calibration = argc > 3 ? std::atoi(argv[3]) : 64;
    ThreadPool pool(1);
    const Calibration cal = calibrate(ck, pool, calibration);
    Transformer f(ck, pool);
    const bool fused = argc > 4 && std::atoi(argv[4]) != 0;
    const bool chip_attention = fused && (argc <= 5 || std::atoi(argv[5]) != 0);
    const int weighted_sum = argc > 6 ? std::atoi(argv[6]) : 0;
    if (weighted_sum < 0 || weighted_sum > 2) {
      std::fprintf(stderr, "error: WEIGHTED_SUM is 0, 1 or 2\n");
      return 2;
    }
    Int8Transformer q(
        ck, pool, cal,
        Int8Options{.fused_layers = fused,
                    .chip_attention = chip_attention,
                    .weighted_sum = WeightedSum(weighted_sum),
                    .chip_rope = chip_attention && argc > 7 && std::atoi(argv[7]) != 0,
                    .chip_rms = fused && argc > 8 && std::atoi(argv[8]) != 0,
                    .chip_residual = argc > 9 && std::atoi(argv[9]) != 0});
    Sampler sampler(1.0f, 0.0f, 1);
    int token = kBos, agree = 0;
    double kl = 0, kl_max = 0;
    for (int pos = 0; pos < positions; ++pos) {
      const std::span<float> lf = f.forward(token, pos);
      std::vector<float> pf(lf.begin(), lf.end());
      const std::span<float> lq = q.forward(token, pos);
      std::vector<float> pq(lq.begin(), lq.end());
      agree += argmax(pf) == argmax(pq);
      std::vector<float> next_logits = pf;
      token = sampler.sample(next_logits);
      softmax(pf);
      softmax(pq);
      double k = 0;
      for (size_t i = 0; i < pf.size(); ++i)
        if (pf[i] > 0) k += pf[i] * std::log(double(pf[i]) / std::max(double(pq[i]), 1e-30));
      kl += k;
      kl_max = std::max(kl_max, k);
    }
    std::printf(
        "%s\n%d positions (calibration %d%s%s%s%s): top-1 agreement %.1f%%, KL %.4f nats/token "
        "(max %.4f)\n",
        describe(ck).c_str(), positions, cal.positions,
        !chip_attention     ? (fused ? ", fused layers" : "")
        : weighted_sum == 1 ? ", fused layers, chip attention, per-head bytes"
        : weighted_sum == 2 ? ", fused layers, chip attention, value cache"
                            : ", fused layers, chip attention",
        q.options().chip_rope ? ", RoPE in chip ops" : "",
        q.options().chip_rms ? ", r from the chip's bytes" : "",
        q.options().chip_residual ? ", residual in int8" : "", 100.0 * agree / positions,
        kl / positions, kl_max);
  } catch (const tinycoral::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
  return 0;
}
