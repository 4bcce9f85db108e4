// The NLU load (0x19): the tile's non-linear unit table (40 coefficients, 7 breakpoints, the mode)
// that the ops' NLU stage reads (src/chip/ops/nlu.h).
#include "chip/units/tile_work.h"

namespace tinycoral::chip {

bool VirtualEdgeTpu::Impl::run_nlu_load(TileWork& t) {
  t.tile.nlu = std::get<NluLoadInstr>(t.item.decoded).table;
  charge();
  return true;
}

}  // namespace tinycoral::chip
