// The host's image popped in pieces for one run per tile (conv_input_pops.h).
#include "compiler/conv_input_pops.h"

#include <algorithm>
#include <cstdint>

#include "compiler/conv_plan.h"

namespace tinycoral::compiler::conv {

namespace {

// Chip cycles (250 MHz) of USB transfer at 330 MB/s of a pop's 2 instruction words (32 bytes)
// and of an infeed's 4 (64 bytes): what each more pop or infeed costs.
constexpr int64_t kPopCycles = 24, kInfeedCycles = 48;

int64_t dma_cycles(int units) { return 8 + (int64_t{units} * 8 + 63) / 64; }

// Whether a pop may start at unit c: every run crossing it has whole packets before it.
bool valid_cut(const std::vector<UnitRun>& runs, int c) {
  return std::all_of(runs.begin(), runs.end(), [&](const UnitRun& r) {
    return c <= r.u0 || c >= r.u1 || (c - r.u0) % kPieceUnits == 0;
  });
}

}  // namespace

std::vector<int> image_pop_cuts(const std::vector<UnitRun>& runs, int units) {
  // (Candidates: for each run, the first unit from its start on where a pop may start.)
  std::vector<int> at = {0};
  for (const UnitRun& r : runs)
    for (int c = r.u0; c < r.u1; c += kPieceUnits)
      if (c > 0 && valid_cut(runs, c)) {
        at.push_back(c);
        break;
      }
  std::sort(at.begin(), at.end());
  at.erase(std::unique(at.begin(), at.end()), at.end());
  at.push_back(units);
  // The pops from the first through one ending at at[j], the best found: each from the best
  // ending at an earlier point, by the modeled end of its infeeds plus the words' cycles.
  struct Best {
    int64_t pops = 0, infeeds = 0, words = 0;
    size_t from = 0;
  };
  std::vector<Best> best(at.size());
  for (size_t j = 1; j < at.size(); ++j) {
    for (size_t i = 0; i < j; ++i) {
      Best b = best[i];
      b.from = i;
      b.pops += dma_cycles(at[j] - at[i]);
      if (i > 0) b.words += kPopCycles;
      for (const UnitRun& r : runs) {
        const int u0 = std::max(r.u0, at[i]), u1 = std::min(r.u1, at[j]);
        if (u0 >= u1) continue;
        b.infeeds = std::max(b.infeeds, b.pops) + dma_cycles(u1 - u0);
        if (u0 > r.u0) b.words += kInfeedCycles;  // (the run's second piece or later)
      }
      const Best& c = best[j];
      if (i == 0 || b.infeeds + b.words < c.infeeds + c.words) best[j] = b;
    }
  }
  std::vector<int> cuts;
  for (size_t j = best.back().from; j > 0; j = best[j].from) cuts.push_back(at[j]);
  std::reverse(cuts.begin(), cuts.end());
  return cuts;
}

}  // namespace tinycoral::compiler::conv
