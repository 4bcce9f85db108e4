// The parameter stream of a conv chain (conv_parameters): per part of each layer its multiplier
// (and bias) rows, the weight zero-point row, then the weight rows - diagonal rows for depthwise
// layers, window rows for convolutions - in the order the segments load them.
#include <bit>

#include "compiler/conv_plan.h"

namespace tinycoral::compiler::conv {

namespace {

void put32(std::vector<uint8_t>& out, uint32_t v) {
  for (int b = 0; b < 4; ++b) out.push_back(static_cast<uint8_t>(v >> (8 * b)));
}

}  // namespace

std::vector<uint8_t> parameters_of(const Shapes& p) {
  std::vector<uint8_t> out;
  size_t rows = 0;
  for (const Segment& seg : p.segments) rows += static_cast<size_t>(seg.rows);
  out.reserve(rows * kRowBytes);
  // Column c of group g of layer lp: output channel oc of block pixel r.
  auto column_of = [](const LayerPlan& lp, int g, int c, int& oc, int& r) {
    const ConvLayer& l = *lp.l;
    // (Fan-out heads in blocks: each head's block in its own group.)
    r = lp.block > 1 ? c / block_cout(l) : 0;
    oc = g * kColumns + (lp.block > 1 ? c % block_cout(l) : c);
    return c < lp.group_ch && oc < l.cout;
  };
  // The window rows of a convolution's groups [g0, g1): row (ky, word w) of the window; byte b
  // of it is tap byte t = 4w + b - offset - r s Cin.
  auto weight_rows = [&](const LayerPlan& lp, int g0, int g1) {
    const ConvLayer& l = *lp.l;
    const size_t per_out = static_cast<size_t>(l.kh) * l.kw * l.cin;
    int oc = 0, r = 0;
    for (int g = g0; g < g1; ++g)
      for (int ky = 0; ky < l.kh; ++ky)
        for (int w = 0; w < lp.window_words; ++w)
          for (int c = 0; c < kColumns; ++c) {
            const bool real = column_of(lp, g, c, oc, r);
            for (int b = 0; b < 4; ++b) {
              const int t = 4 * w + b - lp.window_off - r * l.stride_w * l.cin;
              uint8_t v = static_cast<uint8_t>(real ? l.weight_zp_of(oc) : l.weight_zp);
              if (real && t >= 0 && t < l.kw * l.cin)
                v = l.weights[static_cast<size_t>(oc) * per_out +
                              static_cast<size_t>(ky) * l.kw * l.cin + static_cast<size_t>(t)];
              out.push_back(v);
            }
          }
  };
  for (const LayerPlan& lp : p.layers)
    for (const Part& part : lp.parts) {
      const ConvLayer& l = *lp.l;
      auto column = [&](int g, int c, int& oc, int& r) { return column_of(lp, g, c, oc, r); };
      int oc = 0, r = 0;
      for (int g = part.g0; g < part.g1; ++g) {
        for (int c = 0; c < kColumns; ++c) {
          const bool real = column(g, c, oc, r);
          put32(out, std::bit_cast<uint32_t>(real ? l.mult[static_cast<size_t>(oc)] : 0.0f));
        }
        for (int c = 0; c < kColumns && !l.bias.empty(); ++c) {
          const bool real = column(g, c, oc, r);
          put32(out, static_cast<uint32_t>(real ? l.bias[static_cast<size_t>(oc)] : 0));
        }
      }
      // One weight zero point per column (merged fan-out heads may differ: ConvLayer::heads).
      for (int c = 0; c < kColumns; ++c) {
        const bool real = !l.depthwise && column(part.g0, c, oc, r);
        put32(out, static_cast<uint32_t>(real ? l.weight_zp_of(oc) : l.weight_zp));
      }
      if (l.depthwise) {
        // Entry (group, word j, ky, kx): the 4x4 diagonal of word j - column b holds the tap's
        // weight of channel 64 group + 4 j + b at byte b - and the weight zero point everywhere
        // else. Dense layers keep just these 16 bytes, one after the other, padded to a whole
        // row; shared rows fill the rest of each row with the zero point (columns 4..63 are not
        // read: the op's groups are 4 channels wide).
        const int columns = lp.dense() ? kEntryBytes / 4 : kColumns;
        const size_t start = out.size();
        for (int g = part.g0; g < (lp.shared_rows ? part.g0 + 1 : part.g1); ++g)
          for (int j = 0; j < (lp.same_words ? 1 : lp.dw_words); ++j)
            for (int ky = 0; ky < l.kh; ++ky)
              for (int kx = 0; kx < l.kw; ++kx)
                for (int c = 0; c < columns; ++c) {
                  const int channel = g * kColumns + 4 * j + c;
                  for (int b = 0; b < 4; ++b) {
                    uint8_t v = static_cast<uint8_t>(l.weight_zp);
                    if (c < 4 && b == c && channel < l.cout)
                      v = l.weights[(static_cast<size_t>(ky) * l.kw + static_cast<size_t>(kx)) *
                                        static_cast<size_t>(l.cout) +
                                    static_cast<size_t>(channel)];
                    out.push_back(v);
                  }
                }
        while ((out.size() - start) % kRowBytes != 0)
          out.push_back(static_cast<uint8_t>(l.weight_zp));
        continue;
      }
      // (A FIFO part's window: its first group's rows, until the broadcast fills it; a
      // K-chunked window and its psum rows: zeros, which the broadcast and the op overwrite.)
      if (lp.fifo && lp.chunk > 0)
        out.insert(out.end(), static_cast<size_t>(lp.window_rows()) * kRowBytes, 0);
      else
        weight_rows(lp, part.g0, lp.fifo ? part.g0 + 1 : part.g1);
    }
  // The owner tiles' runs of FIFO parts, after every segment (Part::Owned::offset).
  for (const LayerPlan& lp : p.layers)
    for (const Part& part : lp.parts)
      for (const Part::Owned& run : part.owned) {
        // (The run's rows of its groups' rows.)
        const size_t start = out.size();
        weight_rows(lp, part.g0 + run.r0 / lp.kwords, part.g0 + (run.r1 - 1) / lp.kwords + 1);
        const auto skip = static_cast<ptrdiff_t>(run.r0 % lp.kwords) * kRowBytes;
        out.erase(out.begin() + static_cast<ptrdiff_t>(start),
                  out.begin() + static_cast<ptrdiff_t>(start) + skip);
        out.resize(start + static_cast<size_t>(run.r1 - run.r0) * kRowBytes);
      }
  // The residual ADDs' cached weight rows (LayerPlan::add_row), as the fills build them: row
  // h + 2o gives columns 2h, 2h + 1 the half-words (w_o, 0) and (0, w_o); the other columns 0.
  for (const LayerPlan& lp : p.layers) {
    if (lp.add_row < 0) continue;
    const auto w1 = static_cast<uint32_t>(lp.l->add_w1), w2 = static_cast<uint32_t>(lp.l->add_w2);
    for (int r = 0; r < kAddWeightRows; ++r) {
      const size_t start = out.size();
      const uint32_t w = r < 2 ? w1 : w2;
      for (int c = 0; c < 4; ++c) put32(out, c / 2 == r % 2 ? (c % 2 == 0 ? w : w << 16) : 0);
      out.resize(start + kRowBytes);
    }
  }
  // The held tap entries of split dense depthwise layers (LayerPlan::holds): each held part's
  // entries again, copied from its own rows, part after part.
  for (const LayerPlan& lp : p.layers)
    for (const HeldTaps& hold : lp.holds)
      for (int k = hold.p0; k < hold.p1; ++k) {
        const Part& part = lp.parts[static_cast<size_t>(k)];
        const Segment& seg = p.segments[static_cast<size_t>(part.segment)];
        const size_t from = seg.offset + static_cast<size_t>(lp.weight_row(part) - seg.base_row) *
                                             static_cast<size_t>(kRowBytes);
        const size_t bytes = static_cast<size_t>(lp.trip_rows(part.g0, part.g1)) * kRowBytes;
        const std::vector<uint8_t> rows(out.begin() + static_cast<ptrdiff_t>(from),
                                        out.begin() + static_cast<ptrdiff_t>(from + bytes));
        out.insert(out.end(), rows.begin(), rows.end());
      }
  return out;
}

}  // namespace tinycoral::compiler::conv
