// FIFO rounds of the step-loop ops (step_loop.h): with a partial last round (`loop_last`, bits
// 174-190) the last iteration of the loops outside loop0 reads fewer FIFO rows, so those rows
// get one fill fewer from their feeder than the op has rounds (the Keras LSTM's f x c reads 20
// 16-bit cells as 4 rows x 2 halves over 3 rounds, the last of 2 rows: rows 2 and 3 hold 2 fills).
#pragma once

#include <cstdint>

#include "chip/tile.h"

namespace tinycoral::chip::ops {

// Fills of wide row `row` (unit / 4) that `op` reads when every row of a round takes `fills`:
// `fills` - 1 for a row its partial last round of loop0 does not reach, else `fills`.
uint32_t fifo_fills_of_row(const OpInstr& op, uint32_t fills, int64_t row);

}  // namespace tinycoral::chip::ops
