// The batch path's layer matmuls on the Edge TPU (batch_chip.h).
#include "llm/batch_chip.h"

#include <algorithm>
#include <array>
#include <chrono>

#include "common/error.h"
#include "compiler/fc_batch_codegen.h"

namespace tinycoral::llm {

namespace {

constexpr int kTiles = 16;
constexpr int kMaxOutputs = 2048;  // outputs per program: two 64-output groups on each tile
constexpr int kKStep = 64;

runtime::StickTime& operator+=(runtime::StickTime& a, const runtime::StickTime& b) {
  a.compute_ms_high += b.compute_ms_high;
  a.compute_ms_max += b.compute_ms_max;
  a.to_device_ms += b.to_device_ms;
  a.from_device_ms += b.from_device_ms;
  a.per_run_ms += b.per_run_ms;
  return a;
}

// Tile memory as the placement sees it (step a's rule, chip_model.cpp): each group to the
// least-filled tile that has fewer than `per_tile` of this program's groups, at that tile's first
// free wide unit.
class TileAllocator {
 public:
  bool place(int groups, int units, compiler::FcPlacement& placement) {
    const int per_tile = groups > kTiles ? 2 : 1;
    std::array<int, kTiles> fill = fill_, used{};
    placement.tiles.clear();
    placement.param_units.clear();
    for (int g = 0; g < groups; ++g) {
      int best = -1;
      for (int t = 0; t < kTiles; ++t)
        if (used[size_t(t)] < per_tile && (best < 0 || fill[size_t(t)] < fill[size_t(best)]))
          best = t;
      if (best < 0 || fill[size_t(best)] + units > compiler::kFcParamUnits) return false;
      placement.tiles.push_back(best);
      placement.param_units.push_back(fill[size_t(best)]);
      fill[size_t(best)] += units;
      ++used[size_t(best)];
    }
    fill_ = fill;
    return true;
  }
  int max_fill() const { return *std::max_element(fill_.begin(), fill_.end()); }

 private:
  std::array<int, kTiles> fill_{};
};

const std::vector<std::vector<LayerMatmul>>& input_sets() {
  static const std::vector<std::vector<LayerMatmul>> sets = {
      {LayerMatmul::kQ, LayerMatmul::kK, LayerMatmul::kV},
      {LayerMatmul::kO},
      {LayerMatmul::kW1, LayerMatmul::kW3},
      {LayerMatmul::kW2}};
  return sets;
}

int whole_groups(int rows) { return (rows + 63) / 64 * 64; }

bool same_input(const QParams& a, const QParams& b) {
  return a.scale == b.scale && a.zero_point == b.zero_point;
}

int power_of_two_at_least(int n) {
  int p = 1;
  while (p < n) p *= 2;
  return p;
}

}  // namespace

// One program: whole matmuls of one input side by side (or one chunk of a matmul with more than
// 2048 outputs), each segment starting at a 64-output group; one execution program per row count.
struct ChipBatchMatmuls::Program {
  struct Segment {
    LayerMatmul m;
    int row0, rows, out_at;
  };
  int layer = 0;
  std::vector<Segment> segments;
  int outputs = 0, k_padded = 0, max_rows = 0;
  compiler::FcPlacement placement;
  std::shared_ptr<runtime::Program> caching;
  std::map<int, std::shared_ptr<runtime::Program>> execution;
};

ChipBatchMatmuls::ChipBatchMatmuls(const Checkpoint& ck, ThreadPool& pool,
                                   const Calibration& calibration, runtime::EdgeTpu& tpu)
    : BatchMatmuls(ck, pool, calibration), tpu_(tpu) {
  const Config& c = ck.config;
  TileAllocator tiles;
  plans_.resize(size_t(c.n_layers) * kLayerMatmuls);
  for (int l = 0; l < c.n_layers; ++l) {
    for (const std::vector<LayerMatmul>& set : input_sets()) {
      std::vector<Program> made;
      std::vector<LayerMatmul> on_host;
      for (LayerMatmul m : set) {
        const QuantizedMatmul& q = matmul(l, m);
        const int k_padded = (q.cols + kKStep - 1) / kKStep * kKStep;
        const bool joins = q.rows <= kMaxOutputs && !made.empty() &&
                           made.back().segments.front().rows <= kMaxOutputs &&
                           made.back().outputs + whole_groups(q.rows) <= kMaxOutputs &&
                           same_input(matmul(l, made.back().segments.front().m).in, q.in);
        for (int row0 = 0; row0 < q.rows; row0 += kMaxOutputs) {
          const int rows = std::min(kMaxOutputs, q.rows - row0);
          if (!joins || row0 > 0) {
            made.emplace_back();
            made.back().layer = l;
            made.back().k_padded = k_padded;
          }
          Program& p = made.back();
          p.segments.push_back({m, row0, rows, p.outputs});
          p.outputs += whole_groups(rows);
        }
      }
      for (Program& p : made) {
        const int groups = compiler::fc_groups(p.outputs);
        const int slots = groups > kTiles ? 2 : 1;
        const int units = compiler::fc_units_per_tile(p.k_padded, false);
        const std::string why = compiler::fc_batch_unsupported(p.outputs, p.k_padded, 1, slots);
        if (!why.empty() || !tiles.place(groups, units, p.placement)) {
          for (const Program::Segment& s : p.segments)
            if (std::find(on_host.begin(), on_host.end(), s.m) == on_host.end())
              on_host.push_back(s.m);
          if (stats_.host_reason.empty())
            stats_.host_reason =
                cat("layer ", l, " ", matmul_name(p.segments.front().m), ": ",
                    why.empty() ? "the weights before it fill the tile memory" : why);
          continue;
        }
        p.max_rows = compiler::fc_batch_max_rows(p.k_padded, slots);
        const compiler::FcLayer fc = fc_layer(l, p);
        p.caching = std::make_shared<runtime::Program>(compiler::fc_caching(fc, p.placement));
        stats_.resident_bytes += static_cast<int64_t>(p.caching->executable().parameters.size());
      }
      // A matmul is on the chip only when all its programs are.
      for (Program& p : made) {
        bool host = p.caching == nullptr;
        for (const Program::Segment& s : p.segments)
          host |= std::find(on_host.begin(), on_host.end(), s.m) != on_host.end();
        if (host) continue;
        programs_.push_back(std::move(p));
        for (const Program::Segment& s : programs_.back().segments) {
          std::vector<int>& list = plans_[size_t(l) * kLayerMatmuls + size_t(s.m)];
          if (list.empty() || list.back() != int(programs_.size()) - 1)
            list.push_back(int(programs_.size()) - 1);
        }
      }
      for (LayerMatmul m : set) {
        const bool host = std::find(on_host.begin(), on_host.end(), m) != on_host.end();
        if (host) plans_[size_t(l) * kLayerMatmuls + size_t(m)].clear();
        ++(host ? stats_.host_matmuls : stats_.chip_matmuls);
      }
    }
  }
  std::vector<bool> used(programs_.size(), false);
  for (const std::vector<int>& plan : plans_)
    for (int p : plan) used[size_t(p)] = true;
  for (size_t p = 0; p < programs_.size(); ++p) {
    if (used[p])
      ++stats_.programs;
    else
      programs_[p].caching.reset();
  }
  stats_.max_tile_units = tiles.max_fill();
  cache_all();
}

ChipBatchMatmuls::~ChipBatchMatmuls() = default;

// A program's segments as one generator layer, in the chip's uint8 domain with int8 boundaries
// (step a's layer, chip_model.cpp).
compiler::FcLayer ChipBatchMatmuls::fc_layer(int layer, const Program& p) const {
  compiler::FcLayer l;
  l.n = p.outputs;
  l.k = p.k_padded;
  l.weights.assign(size_t(l.n) * size_t(l.k), 0);
  l.mult.assign(size_t(l.n), 0.0f);
  const QuantizedMatmul& first = matmul(layer, p.segments.front().m);
  l.in_zp = first.in.zero_point + 128;
  l.in_scale = first.in.scale;
  for (const Program::Segment& s : p.segments) {
    const QuantizedMatmul& q = matmul(layer, s.m);
    for (int r = 0; r < s.rows; ++r) {
      std::copy_n(q.w.data() + size_t(s.row0 + r) * size_t(q.cols), q.cols,
                  l.weights.data() + size_t(s.out_at + r) * size_t(l.k));
      l.mult[size_t(s.out_at + r)] = q.multiplier[size_t(s.row0 + r)];
    }
    for (int g = 0; g < compiler::fc_groups(s.rows); ++g) {
      l.group_out_zp.push_back(q.out.zero_point + 128);
      l.group_clamp_min.push_back(q.clamp_lo);
      l.group_clamp_max.push_back(q.clamp_hi);
    }
  }
  l.out_zp = l.group_out_zp.front();
  l.out_scale = first.out.scale;
  l.clamp_min = l.group_clamp_min.front();
  l.clamp_max = l.group_clamp_max.front();
  l.input_name = "x";
  l.output_name = "y";
  l.signed_input = l.signed_output = true;
  return l;
}

void ChipBatchMatmuls::cache_all() {
  stats_.caching = {};
  for (const Program& p : programs_) {
    if (!p.caching) continue;
    tpu_.run(nullptr, p.caching);
    stats_.caching += runtime::stick_time(tpu_.last_run().inference);
  }
  recoveries_seen_ = tpu_.recoveries();
}

std::shared_ptr<runtime::Program> ChipBatchMatmuls::execution(Program& p, int rows) {
  std::shared_ptr<runtime::Program>& exe = p.execution[rows];
  if (!exe)
    exe = std::make_shared<runtime::Program>(
        compiler::generate_fc_batch(fc_layer(p.layer, p), p.placement, rows));
  return exe;
}

void ChipBatchMatmuls::run_chunk(Program& p, int layer, LayerMatmul called,
                                 std::span<const int> sequences, const int8_t* xq, int8_t* yq) {
  const int n = static_cast<int>(sequences.size());
  const int bucket = std::min(power_of_two_at_least(n), p.max_rows);
  const QuantizedMatmul& first = matmul(layer, p.segments.front().m);
  const size_t k = size_t(p.k_padded), cols = size_t(first.cols);
  // Padding (columns past K, rows past n) holds the zero point: it adds nothing.
  x_.assign(size_t(bucket) * k, static_cast<int8_t>(first.in.zero_point));
  for (size_t i = 0; i < size_t(n); ++i) std::copy_n(xq + i * cols, cols, x_.data() + i * k);
  const std::shared_ptr<runtime::Program> exe = execution(p, bucket);
  exe->set_input(0, std::span(reinterpret_cast<const uint8_t*>(x_.data()), x_.size()));
  tpu_.run(nullptr, exe);
  if (tpu_.recoveries() != recoveries_seen_) {
    // A recovered stick was re-opened: its tile memory no longer holds the weights.
    cache_all();
    tpu_.run(nullptr, exe);
  }
  stats_.modeled += runtime::stick_time(tpu_.last_run().inference);
  ++stats_.runs;
  y_.resize(exe->output_bytes(0));
  exe->get_output(0, std::span(reinterpret_cast<uint8_t*>(y_.data()), y_.size()));
  for (const Program::Segment& s : p.segments) {
    const QuantizedMatmul& q = matmul(layer, s.m);
    const bool whole = plans_[size_t(layer) * kLayerMatmuls + size_t(s.m)].size() == 1;
    if (s.m != called && !whole) continue;  // a chunk alone would be half a result
    for (int i = 0; i < n; ++i) {
      int8_t* dest = yq + size_t(i) * size_t(q.rows);
      if (s.m != called) {
        Pending& pending = pending_[{sequences[size_t(i)], int(s.m)}];
        pending.layer = layer;
        pending.xq.assign(xq + size_t(i) * cols, xq + (size_t(i) + 1) * cols);
        pending.out.resize(size_t(q.rows));
        dest = pending.out.data();
      }
      for (int r = 0; r < s.rows; ++r)
        dest[s.row0 + r] = y_[compiler::fc_batch_output_index(bucket, i, s.out_at + r)];
    }
  }
}

void ChipBatchMatmuls::matmul_q(int layer, LayerMatmul m, std::span<const int> sequences,
                                const int8_t* xq, int8_t* yq) {
  const std::vector<int>& plan = plans_[size_t(layer) * kLayerMatmuls + size_t(m)];
  if (plan.empty()) {
    cpu_matmul_q(layer, m, sequences.size(), xq, yq);
    return;
  }
  const QuantizedMatmul& q = matmul(layer, m);
  const size_t cols = size_t(q.cols), outs = size_t(q.rows), n = sequences.size();
  // Computed already by the program of an earlier matmul of this input, for every row: the same
  // quantized input gives the same result.
  bool pending = true;
  for (size_t i = 0; i < n && pending; ++i) {
    const auto at = pending_.find({sequences[i], int(m)});
    pending = at != pending_.end() && at->second.layer == layer &&
              std::equal(at->second.xq.begin(), at->second.xq.end(), xq + i * cols);
  }
  if (pending) {
    for (size_t i = 0; i < n; ++i) {
      Pending& p = pending_[{sequences[i], int(m)}];
      std::copy_n(p.out.data(), outs, yq + i * outs);
      p.layer = -1;
    }
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  for (int index : plan) {
    Program& p = programs_[size_t(index)];
    const size_t chunks = (n + size_t(p.max_rows) - 1) / size_t(p.max_rows);
    const size_t per = (n + chunks - 1) / chunks;
    for (size_t at = 0; at < n; at += per)
      run_chunk(p, layer, m, sequences.subspan(at, std::min(per, n - at)), xq + at * cols,
                yq + at * outs);
  }
  stats_.chip_wall_s +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace tinycoral::llm
