// Pixel bands (stage_of with pixels, pixel_stage) keep to the rules of row bands about the stage's
// first image: every tile may keep the whole image (LayerShape::full) only when no residual ADD
// reads it later, since an image an ADD keeps takes the band's geometry (keep_operands). The
// pixel branch once tried the whole image whenever there were several tiles.
#include <gtest/gtest.h>

#include <vector>

#include "compiler/conv_plan.h"

namespace tinycoral::compiler::conv {
namespace {

ConvLayer layer(int size, int cin, int cout, int k) {
  ConvLayer l;
  l.h = l.w = l.oh = l.ow = size;
  l.cin = cin;
  l.cout = cout;
  l.kh = l.kw = k;
  l.pad_top = l.pad_left = k / 2;
  return l;
}

// 8 x 8 x 16: a 3x3 layer, then two 1x1 layers (the pixel stage), an ADD of the second one's
// output and the stage's first image when `residual`, and a last 1x1 layer.
ConvChain chain_of(bool residual) {
  ConvChain chain;
  chain.layers = {layer(8, 16, 16, 3), layer(8, 16, 16, 1), layer(8, 16, 16, 1)};
  if (residual) {
    ConvLayer add = layer(8, 16, 16, 1);
    add.residual_of = 1;
    chain.layers.push_back(add);
  }
  chain.layers.push_back(layer(8, 16, 16, 1));
  return chain;
}

TEST(PixelBandsPlan, TheFirstImageIsWholeOnEveryTileUnlessAnAddKeepsIt) {
  for (const bool residual : {false, true}) {
    SCOPED_TRACE(residual ? "an ADD reads the first image" : "no ADD");
    const ConvChain chain = chain_of(residual);
    const Shapes shapes = shapes_of(chain);
    ASSERT_TRUE(pixel_stage(chain, shapes, 1, 3));
    const Stage s = stage_of(chain, shapes, 1, 3, 0, 4, true);
    ASSERT_EQ(s.tiles.size(), 4u);
    for (const Plan& t : s.tiles) {
      EXPECT_TRUE(t.pixel_band());
      EXPECT_EQ(t.layers[1].full, !residual) << "tile " << t.tile;
    }
  }
}

}  // namespace
}  // namespace tinycoral::compiler::conv
