// The layer matmuls on the Edge TPU, weights resident (chip_model.h).
#include "llm/chip_model.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <numeric>

#include "common/error.h"
#include "compiler/fc_codegen.h"

namespace tinycoral::llm {

namespace {

constexpr int kTiles = 16;
constexpr int kMaxOutputs = 1024;  // outputs per program (the generator's N limit)
constexpr int kKStep = 64;

runtime::StickTime& operator+=(runtime::StickTime& a, const runtime::StickTime& b) {
  a.compute_ms_high += b.compute_ms_high;
  a.compute_ms_max += b.compute_ms_max;
  a.to_device_ms += b.to_device_ms;
  a.from_device_ms += b.from_device_ms;
  a.per_run_ms += b.per_run_ms;
  return a;
}

// Rows [row0, row0 + rows) of a quantized matmul as a generator layer, K padded with zero columns.
compiler::FcLayer fc_layer_of(const QuantizedMatmul& q, int row0, int rows, int k_padded) {
  compiler::FcLayer l;
  l.n = rows;
  l.k = k_padded;
  l.weights.assign(size_t(rows) * size_t(k_padded), 0);
  for (int r = 0; r < rows; ++r)
    std::copy_n(q.w.data() + size_t(row0 + r) * size_t(q.cols), q.cols,
                l.weights.data() + size_t(r) * size_t(k_padded));
  l.mult.assign(q.multiplier.begin() + row0, q.multiplier.begin() + row0 + rows);
  // The chip works in uint8: every zero point + 128; int8 boundaries (the host flips the sign bit).
  l.in_zp = q.in.zero_point + 128;
  l.out_zp = q.out.zero_point + 128;
  l.in_scale = q.in.scale;
  l.out_scale = q.out.scale;
  l.clamp_min = q.clamp_lo;
  l.clamp_max = q.clamp_hi;
  l.input_name = "x";
  l.output_name = "y";
  l.signed_input = l.signed_output = true;
  return l;
}

// Tile memory as the placement sees it: each tile's parameters fill wide units from 0 up. A
// program's groups go to the least-filled tiles, each at that tile's first free unit (the program
// then has one op per distinct unit), so the tiles fill evenly: stories15M's six layers fill the
// fullest tile to 90%.
class TileAllocator {
 public:
  // False when `units` more per tile do not fit on the `groups` least-filled tiles.
  bool place(int groups, int units, compiler::FcPlacement& placement) {
    std::array<int, kTiles> order{};
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return fill_[size_t(a)] < fill_[size_t(b)]; });
    if (fill_[size_t(order[size_t(groups - 1)])] + units > compiler::kFcParamUnits) return false;
    placement.tiles.assign(order.begin(), order.begin() + groups);
    placement.param_units.clear();
    for (int t : placement.tiles) {
      placement.param_units.push_back(fill_[size_t(t)]);
      fill_[size_t(t)] += units;
    }
    return true;
  }
  int max_fill() const { return *std::max_element(fill_.begin(), fill_.end()); }

 private:
  std::array<int, kTiles> fill_{};  // units, always a multiple of 4 (whole rows)
};

}  // namespace

struct ChipTransformer::Part {
  int row0 = 0, rows = 0;
  std::shared_ptr<runtime::Program> execution, caching;
};

struct ChipTransformer::ChipMatmul {
  int k_padded = 0;
  std::vector<Part> parts;  // empty: on the host
};

ChipTransformer::ChipTransformer(const Checkpoint& ck, ThreadPool& pool,
                                 const Calibration& calibration, runtime::EdgeTpu& tpu)
    : Int8Transformer(ck, pool, calibration), tpu_(tpu) {
  const Config& c = ck.config;
  TileAllocator tiles;
  int widest = 0;
  for (int l = 0; l < c.n_layers; ++l) {
    for (int m = 0; m < kLayerMatmuls; ++m) {
      const QuantizedMatmul& q = matmul(l, LayerMatmul(m));
      ChipMatmul cm;
      cm.k_padded = (q.cols + kKStep - 1) / kKStep * kKStep;
      widest = std::max({widest, cm.k_padded, q.rows});
      std::string why = compiler::fc_unsupported(std::min(q.rows, kMaxOutputs), cm.k_padded);
      for (int row0 = 0; why.empty() && row0 < q.rows; row0 += kMaxOutputs) {
        const int rows = std::min(kMaxOutputs, q.rows - row0);
        compiler::FcPlacement placement;
        const int units = compiler::fc_units_per_tile(cm.k_padded, false);
        if (!tiles.place(compiler::fc_groups(rows), units, placement)) {
          why = "the weights before it fill the tile memory";
          break;
        }
        compiler::FcPrograms p =
            compiler::generate_fc(fc_layer_of(q, row0, rows, cm.k_padded), placement);
        stats_.resident_bytes += static_cast<int64_t>(p.caching.parameters.size());
        Part part;
        part.row0 = row0;
        part.rows = rows;
        part.execution = std::make_shared<runtime::Program>(std::move(p.execution));
        part.caching = std::make_shared<runtime::Program>(std::move(p.caching));
        cm.parts.push_back(std::move(part));
      }
      if (!why.empty()) {
        cm.parts.clear();
        ++stats_.host_matmuls;
        if (stats_.host_reason.empty())
          stats_.host_reason = cat("layer ", l, " ", matmul_name(LayerMatmul(m)), " (", q.rows,
                                   " x ", q.cols, "): ", why);
      } else {
        ++stats_.chip_matmuls;
        stats_.programs += static_cast<int>(cm.parts.size());
      }
      chip_.push_back(std::move(cm));
    }
  }
  stats_.max_tile_units = tiles.max_fill();
  xq_.resize(size_t(widest));
  yq_.resize(size_t(widest));
  cache_all();
}

ChipTransformer::~ChipTransformer() = default;

void ChipTransformer::cache_all() {
  stats_.caching = {};
  for (const ChipMatmul& cm : chip_) {
    for (const Part& p : cm.parts) {
      tpu_.run(nullptr, p.caching);
      stats_.caching += runtime::stick_time(tpu_.last_run().inference);
    }
  }
  recoveries_seen_ = tpu_.recoveries();
}

void ChipTransformer::layer_matmul(int layer, LayerMatmul m, const float* in, float* out) {
  const ChipMatmul& cm = chip_[size_t(layer) * kLayerMatmuls + size_t(m)];
  if (cm.parts.empty()) {
    Int8Transformer::layer_matmul(layer, m, in, out);
    return;
  }
  const QuantizedMatmul& q = matmul(layer, m);
  quantize(in, q.cols, q.in, xq_.data());
  // Padded inputs meet zero weights; the zero point keeps them out of the sum either way.
  std::fill(xq_.begin() + q.cols, xq_.begin() + cm.k_padded, static_cast<int8_t>(q.in.zero_point));
  const auto start = std::chrono::steady_clock::now();
  for (const Part& p : cm.parts) {
    p.execution->set_input(
        0, std::span(reinterpret_cast<const uint8_t*>(xq_.data()), size_t(cm.k_padded)));
    tpu_.run(nullptr, p.execution);
    if (tpu_.recoveries() != recoveries_seen_) {
      // A recovered stick was re-opened: its tile memory no longer holds the weights.
      cache_all();
      tpu_.run(nullptr, p.execution);
    }
    stats_.modeled += runtime::stick_time(tpu_.last_run().inference);
    ++stats_.runs;
    p.execution->get_output(0, std::span(reinterpret_cast<uint8_t*>(yq_.data()), size_t(p.rows)));
    for (int r = 0; r < p.rows; ++r)
      out[p.row0 + r] =
          static_cast<float>(int32_t{yq_[size_t(r)]} - q.out.zero_point) * q.out.scale;
  }
  stats_.chip_wall_s +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace tinycoral::llm
