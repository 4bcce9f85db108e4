// The layer matmuls' program planner (matmul_plan.h).
#include "llm/matmul_plan.h"

#include <algorithm>

#include "common/error.h"
#include "compiler/fc_batch_codegen.h"

namespace tinycoral::llm {

namespace {

bool same_input(const QParams& a, const QParams& b) {
  return a.scale == b.scale && a.zero_point == b.zero_point;
}

}  // namespace

bool TileAllocator::place(int groups, int units, compiler::FcPlacement& placement) {
  std::array<int, kPlanTiles> room;
  room.fill(groups);
  return place(groups, units, placement, room);
}

bool TileAllocator::place(int groups, int units, compiler::FcPlacement& placement,
                          const std::array<int, kPlanTiles>& room) {
  const int per_tile = groups > kPlanTiles ? 2 : 1;
  std::array<int, kPlanTiles> fill = fill_, used{};
  placement.tiles.clear();
  placement.param_units.clear();
  for (int g = 0; g < groups; ++g) {
    int best = -1;
    for (int t = 0; t < kPlanTiles; ++t)
      if (used[size_t(t)] < std::min(per_tile, room[size_t(t)]) &&
          (best < 0 || fill[size_t(t)] < fill[size_t(best)]))
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

bool TileAllocator::place_pairs(int pairs, int units, compiler::FcPlacement& placement) {
  std::array<int, kPlanTiles> fill = fill_;
  std::array<bool, kPlanTiles> used{};
  placement.tiles.clear();
  placement.param_units.clear();
  for (int i = 0; i < pairs; ++i) {
    int best = -1;
    for (int t = 0; t < kPlanTiles; ++t)
      if (!used[size_t(t)] && (best < 0 || fill[size_t(t)] < fill[size_t(best)])) best = t;
    if (best < 0 || fill[size_t(best)] + 2 * units > compiler::kFcParamUnits) return false;
    for (int k = 0; k < 2; ++k) {
      placement.tiles.push_back(best);
      placement.param_units.push_back(fill[size_t(best)]);
      fill[size_t(best)] += units;
    }
    used[size_t(best)] = true;
  }
  fill_ = fill;
  return true;
}

bool TileAllocator::place_sharing(int groups, int units, int copy_units,
                                  std::array<int, kPlanTiles>& copies,
                                  compiler::FcPlacement& placement) {
  return place_sharing_on(std::vector<int>(size_t(std::max(groups, 0)), -1), units, copy_units,
                          copies, placement);
}

bool TileAllocator::place_sharing_on(const std::vector<int>& prefer, int units, int copy_units,
                                     std::array<int, kPlanTiles>& copies,
                                     compiler::FcPlacement& placement) {
  const int groups = int(prefer.size()), per_tile = groups > kPlanTiles ? 2 : 1;
  std::array<int, kPlanTiles> fill = fill_, copy = copies, used{};
  placement.tiles.clear();
  placement.param_units.clear();
  placement.weight_units.clear();
  const auto need = [&](int t) { return units + (copy[size_t(t)] < 0 ? copy_units : 0); };
  const auto fits = [&](int t) { return fill[size_t(t)] + need(t) <= compiler::kFcParamUnits; };
  for (const int want : prefer) {
    int best = want >= 0 && want < kPlanTiles && used[size_t(want)] < 2 && fits(want) ? want : -1;
    if (best < 0) {  // the least-filled tile with fewer than per_tile groups, if it fits
      for (int t = 0; t < kPlanTiles; ++t)
        if (used[size_t(t)] < per_tile &&
            (best < 0 || fill[size_t(t)] + need(t) < fill[size_t(best)] + need(best)))
          best = t;
      if (best < 0 || !fits(best)) return false;
    }
    if (copy[size_t(best)] < 0) {
      copy[size_t(best)] = fill[size_t(best)];
      fill[size_t(best)] += copy_units;
    }
    placement.tiles.push_back(best);
    placement.param_units.push_back(fill[size_t(best)]);
    // (The copy is a whole FC's stream: its multiplier and zero-point rows, then the weights.)
    placement.weight_units.push_back(copy[size_t(best)] + compiler::kFcAuxUnits);
    fill[size_t(best)] += units;
    ++used[size_t(best)];
  }
  fill_ = fill;
  copies = copy;
  return true;
}

int TileAllocator::take(int tile, int units) {
  if (tile < 0 || tile >= kPlanTiles || units <= 0 || units % 4 != 0 ||
      fill_[size_t(tile)] + units > compiler::kFcParamUnits)
    return -1;
  const int at = fill_[size_t(tile)];
  fill_[size_t(tile)] += units;
  return at;
}

int TileAllocator::max_fill() const { return *std::max_element(fill_.begin(), fill_.end()); }

InputSetPlan plan_input_set(std::span<const PlannedMatmul> set, int layer, TileAllocator& tiles) {
  InputSetPlan out;
  std::vector<FcProgramPlan> made;
  std::vector<int> owner;  // made[i]'s first matmul (index into set)
  for (size_t i = 0; i < set.size(); ++i) {
    const QuantizedMatmul& q = *set[i].q;
    const int k_padded = (q.cols + kKStep - 1) / kKStep * kKStep;
    const bool joins = q.rows <= kMaxProgramOutputs && !made.empty() &&
                       made.back().segments.front().rows <= kMaxProgramOutputs &&
                       made.back().k_padded == k_padded &&
                       made.back().outputs + whole_groups(q.rows) <= kMaxProgramOutputs &&
                       same_input(set[size_t(owner.back())].q->in, q.in);
    for (int row0 = 0; row0 < q.rows; row0 += kMaxProgramOutputs) {
      const int rows = std::min(kMaxProgramOutputs, q.rows - row0);
      if (!joins || row0 > 0) {
        made.emplace_back();
        made.back().k_padded = k_padded;
        owner.push_back(int(i));
      }
      FcProgramPlan& p = made.back();
      p.segments.push_back({set[i].id, row0, rows, p.outputs});
      p.outputs += whole_groups(rows);
    }
  }
  const auto name_of = [&](int id) {
    for (const PlannedMatmul& m : set)
      if (m.id == id) return m;
    fail("no matmul ", id, " in the set");
  };
  std::vector<bool> placed(made.size(), false);
  for (size_t i = 0; i < made.size(); ++i) {
    FcProgramPlan& p = made[i];
    const int groups = compiler::fc_groups(p.outputs);
    const int slots = groups > kPlanTiles ? 2 : 1;
    const std::string why = compiler::fc_batch_unsupported(p.outputs, p.k_padded, 1, slots);
    placed[i] = why.empty() &&
                tiles.place(groups, compiler::fc_units_per_tile(p.k_padded, false), p.placement);
    if (placed[i]) continue;
    for (const FcProgramPlan::Segment& s : p.segments)
      if (std::find(out.on_host.begin(), out.on_host.end(), s.id) == out.on_host.end())
        out.on_host.push_back(s.id);
    if (out.host_reason.empty()) {
      const PlannedMatmul m = name_of(p.segments.front().id);
      out.host_reason =
          cat("layer ", layer, " ", m.name, " (", m.q->rows, " x ", m.q->cols,
              "): ", why.empty() ? "the weights before it fill the tile memory" : why);
    }
  }
  // A matmul is on the chip only when all its programs are (a program that did not fit sends its
  // matmuls, and the chunks of them elsewhere, to the host).
  for (size_t i = 0; i < made.size(); ++i) {
    bool host = !placed[i];
    for (const FcProgramPlan::Segment& s : made[i].segments)
      host |= std::find(out.on_host.begin(), out.on_host.end(), s.id) != out.on_host.end();
    if (!host) out.programs.push_back(std::move(made[i]));
  }
  return out;
}

FfnPlan plan_ffn(int k_padded, int w1_rows, int w2_rows) {
  FfnPlan plan;
  plan.up.k_padded = k_padded;
  for (int g = 0; g < compiler::fc_groups(whole_groups(w1_rows)); ++g)
    for (LayerMatmul m : {LayerMatmul::kW1, LayerMatmul::kW3}) {
      plan.up.segments.push_back({int(m), 64 * g, std::min(64, w1_rows - 64 * g), plan.up.outputs});
      plan.up.outputs += 64;
    }
  plan.down.k_padded = whole_groups(w1_rows);
  plan.down.segments.push_back({int(LayerMatmul::kW2), 0, w2_rows, 0});
  plan.down.outputs = whole_groups(w2_rows);
  return plan;
}

void set_ffn_gate(const QuantizedGate& q, compiler::FfnLayer& f) {
  f.h1_zp = q.h1.zero_point + 128;
  f.h3_zp = q.h3.zero_point + 128;
  f.a_zp = q.a.zero_point + 128;
  f.h1_scale = q.h1.scale;
  f.mult_a = q.mult_a;
  f.a_clamp_min = q.a_lo;
  f.a_clamp_max = q.a_hi;
  f.mult_m = q.mult_m;
  f.m_clamp_min = q.m_lo;
  f.m_clamp_max = q.m_hi;
}

namespace {

// A signed int8 FC's input and output grids (the chip's bytes are stored +128), clamps and names.
void set_int8_io(compiler::FcLayer& l, QParams in, QParams out, float lo, float hi,
                 const char* input_name, const char* output_name) {
  l.in_zp = in.zero_point + 128;
  l.in_scale = in.scale;
  l.out_zp = out.zero_point + 128;
  l.out_scale = out.scale;
  l.clamp_min = lo;
  l.clamp_max = hi;
  l.input_name = input_name;
  l.output_name = output_name;
  l.signed_input = l.signed_output = true;
}

}  // namespace

compiler::FcLayer residual_add_layer(const QuantizedAdd& add, int dim) {
  compiler::FcLayer a;
  a.n = whole_groups(dim);
  a.k = 128;  // pairwise: group g reads x2's 64 values of it, then w2's
  a.weights.assign(size_t(a.n) * size_t(a.k), 0);
  a.mult.assign(size_t(a.n), 0.0f);
  a.bias.assign(size_t(a.n), 0);
  for (int r = 0; r < dim; ++r) {
    a.weights[size_t(r) * size_t(a.k) + size_t(r % 64)] = static_cast<int8_t>(add.a);
    a.weights[size_t(r) * size_t(a.k) + size_t(64 + r % 64)] = static_cast<int8_t>(add.b);
    a.mult[size_t(r)] = add.mult;
    // The chip takes f's zero point off every input; x2's own comes back through the bias.
    a.bias[size_t(r)] = add.a * (add.f.zero_point - add.x.zero_point);
  }
  set_int8_io(a, add.f, add.out, add.lo, add.hi, "x", "y");
  return a;
}

compiler::FcLayer rms_input_layer(const QuantizedRmsInput& q, int dim) {
  compiler::FcLayer l;
  l.n = whole_groups(dim);
  l.k = 64;
  l.weights.assign(size_t(l.n) * size_t(l.k), 0);
  l.mult.assign(size_t(l.n), 0.0f);
  for (int j = 0; j < dim; ++j) {
    l.weights[size_t(j) * size_t(l.k) + size_t(j % 64)] = q.sign[size_t(j)];
    l.mult[size_t(j)] = q.base[size_t(j)];
  }
  set_int8_io(l, q.in, q.out, q.lo, q.hi, "x2", "ffn_in");
  return l;
}

compiler::FcLayer fc_layer_of(const FcProgramPlan& p,
                              const std::function<const QuantizedMatmul&(int id)>& matmul) {
  compiler::FcLayer l;
  l.n = p.outputs;
  l.k = p.k_padded;
  l.weights.assign(size_t(l.n) * size_t(l.k), 0);
  l.mult.assign(size_t(l.n), 0.0f);
  const QuantizedMatmul& first = matmul(p.segments.front().id);
  l.in_zp = first.in.zero_point + 128;
  l.in_scale = first.in.scale;
  for (const FcProgramPlan::Segment& s : p.segments) {
    const QuantizedMatmul& q = matmul(s.id);
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

const std::vector<std::vector<LayerMatmul>>& input_sets() {
  static const std::vector<std::vector<LayerMatmul>> sets = {
      {LayerMatmul::kQ, LayerMatmul::kK, LayerMatmul::kV},
      {LayerMatmul::kO},
      {LayerMatmul::kW1, LayerMatmul::kW3},
      {LayerMatmul::kW2}};
  return sets;
}

}  // namespace tinycoral::llm
