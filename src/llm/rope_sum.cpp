#include "llm/rope_sum.h"

#include <algorithm>
#include <bit>

#include "common/error.h"
#include "compiler/fc_batch_codegen.h"
#include "llm/int8_model.h"

namespace tinycoral::llm {

namespace {
constexpr int kGroup = 64;
int whole(int n) { return (n + kGroup - 1) / kGroup * kGroup; }
}  // namespace

int RopeSumShape::q_outputs() const { return whole(q_channels); }

int RopeSumShape::key_outputs() const {
  return packed_keys ? whole(kv_heads * head_size) : kv_heads * whole(head_size);
}

int RopeSumShape::key_at(int h) const {
  return q_outputs() + h * (packed_keys ? head_size : whole(head_size));
}

int RopeSumShape::channel(int o) const {
  if (o < q_outputs()) return o < q_channels ? o : -1;
  const int i = o - q_outputs();
  if (packed_keys) return i < kv_heads * head_size ? i : -1;
  const int h = i / whole(head_size), j = i % whole(head_size);
  return h < kv_heads && j < head_size ? h * head_size + j : -1;
}

namespace {
// n outputs of the sum, output o's weights 1 on P1_o and on R_(o^1) where `used(o)`.
template <typename Used>
compiler::FcLayer sum_of(int n, float in_scale, Used used) {
  compiler::FcLayer l;
  l.n = n;
  l.k = 2 * kGroup;
  l.weights.assign(size_t(l.n) * size_t(l.k), 0);
  for (int o = 0; o < l.n; ++o) {
    if (!used(o)) continue;
    l.weights[size_t(o) * size_t(l.k) + size_t(o % kGroup)] = 1;
    l.weights[size_t(o) * size_t(l.k) + size_t(kGroup + ((o % kGroup) ^ 1))] = 1;
  }
  l.mult.assign(size_t(l.n), 0.0f);
  l.in_zp = l.out_zp = 128;  // P, q~ and k~ are symmetric: zero point 0, + 128 on the chip
  l.in_scale = in_scale;
  l.out_scale = 1.0f;
  l.clamp_min = -kSymmetricClamp;
  l.clamp_max = kSymmetricClamp;
  l.input_name = "x";
  l.output_name = "y";
  l.signed_input = l.signed_output = true;
  return l;
}
}  // namespace

compiler::FcLayer rope_sum_layer(const QuantizedRope& q, const RopeSumShape& s,
                                 std::vector<int>& in_at) {
  if (s.q_channels <= 0 || int(q.base.size()) < s.q_channels || s.kv_heads < 0 ||
      (s.kv_heads > 0 && s.head_size <= 0))
    fail("a RoPE sum of ", s.q_channels, " channels and ", s.kv_heads, " keys of ", s.head_size);
  compiler::FcLayer l =
      sum_of(s.outputs(), q.product_scale, [&](int o) { return s.channel(o) >= 0; });
  in_at.clear();
  for (int g = 0; g < l.n / kGroup; ++g) in_at.push_back(2 * kGroup * g);
  return l;
}

compiler::FcLayer rope_sum_weight_copies(int copies) {
  return sum_of(copies * kGroup, 1.0f, [](int) { return true; });
}

compiler::FcRowWrite rope_sum_aux_rows(const compiler::FcPlacement& at,
                                       const std::vector<float>& base) {
  if (!base.empty() && base.size() != at.tiles.size() * size_t(kGroup))
    fail(base.size(), " multiplier constants for ", at.tiles.size(), " groups");
  compiler::FcRowWrite w;
  for (size_t g = 0; g < at.tiles.size(); ++g) {
    const int unit = at.param_units.empty() ? 0 : at.param_units[g];
    w.rows.push_back({at.tiles[g], unit});
    w.bytes.insert(w.bytes.end(), 4 * kGroup, uint8_t{0});  // float32 0
    w.rows.push_back({at.tiles[g], unit + 4});
    for (int c = 0; c < kGroup; ++c)  // int32 128: the stored weights' zero point
      w.bytes.insert(w.bytes.end(), {uint8_t{128}, uint8_t{0}, uint8_t{0}, uint8_t{0}});
    if (base.empty()) continue;
    w.rows.push_back({at.tiles[g], unit + compiler::kMultBaseRowUnit});
    compiler::append_constants_row(w.bytes, base, {}, g * kGroup);
  }
  return w;
}

void rope_sum_input(const RopeSumShape& s, const int8_t* q_p1, const int8_t* q_p2,
                    const int8_t* k_p1, const int8_t* k_p2, int8_t* row) {
  std::fill_n(row, 2 * s.outputs(), int8_t{0});
  int end = 0;
  rope_sum_input(s, rope_sum_slots(s.outputs() / kGroup, {}, end), q_p1, q_p2, k_p1, k_p2, row);
}

void rope_sum_input(const RopeSumShape& s, const std::vector<int>& slot, const int8_t* q_p1,
                    const int8_t* q_p2, const int8_t* k_p1, const int8_t* k_p2, int8_t* row) {
  if (int(slot.size()) != s.outputs() / kGroup)
    fail(slot.size(), " row places for a RoPE sum of ", s.outputs() / kGroup, " groups");
  for (int o = 0; o < s.outputs(); ++o) {
    const int c = s.channel(o), at = slot[size_t(o / kGroup)];
    if (c < 0 || at < 0) continue;
    const bool key = o >= s.q_outputs();
    // R_i = P2 of the pair's other channel (channels pair within a group: even offsets and sizes).
    row[at + o % kGroup] = key ? k_p1[c] : q_p1[c];
    row[at + kGroup + o % kGroup] = key ? k_p2[c ^ 1] : q_p2[c ^ 1];
  }
}

std::vector<int> rope_sum_slots(int groups, const std::vector<int>& elsewhere, int& end) {
  std::vector<bool> kept(size_t(std::max(groups, 0)), false);
  for (const int g : elsewhere) {
    if (g < 0 || g >= groups) fail("a RoPE sum group kept on its tile that the sum does not have");
    kept[size_t(g)] = true;
  }
  std::vector<int> slot(kept.size(), -1);
  end = 0;
  for (size_t g = 0; g < slot.size(); ++g)
    if (!kept[g]) {
      slot[g] = end;
      end += 2 * kGroup;
    }
  return slot;
}

int rope_scores_row_bytes(int scores_row_bytes, int sum_outputs, int slots_end) {
  return (std::max({scores_row_bytes, sum_outputs, slots_end, 2 * kGroup}) + 7) / 8 * 8;
}

compiler::FcRowWrite rope_sum_multipliers(const QuantizedRope& q, const QuantizedRope* k,
                                          const RopeSumShape& s, float r,
                                          const compiler::FcPlacement& at) {
  if (s.kv_heads > 0 && !k) fail("a RoPE sum with a key needs the key's rotation");
  compiler::FcRowWrite w;
  for (size_t g = 0; g < at.tiles.size(); ++g) {
    w.rows.push_back({at.tiles[g], at.param_units.empty() ? 0 : at.param_units[g]});
    for (int i = 0; i < kGroup; ++i) {
      const int o = int(g) * kGroup + i, c = s.channel(o);
      const float m = c < 0               ? 0.0f
                      : o < s.q_outputs() ? rope_multiplier(q, c, r)
                                          : rope_multiplier(*k, c, r);
      const uint32_t bits = std::bit_cast<uint32_t>(m);
      for (int b = 0; b < 4; ++b) w.bytes.push_back(static_cast<uint8_t>(bits >> (8 * b)));
    }
  }
  return w;
}

compiler::ScalarRopeMultipliers rope_sum_scalar_multipliers(const QuantizedRope& q,
                                                            const QuantizedRope* k,
                                                            const RopeSumShape& s) {
  if (s.kv_heads > 0 && !k) fail("a RoPE sum with a key needs the key's rotation");
  compiler::ScalarRopeMultipliers m;
  for (int o = 0; o < s.outputs(); ++o) {
    const int c = s.channel(o);
    m.padding.push_back(c < 0);
    m.base.push_back(c < 0 ? 0.0f : (o < s.q_outputs() ? q : *k).base[size_t(c)]);
  }
  return m;
}

}  // namespace tinycoral::llm
