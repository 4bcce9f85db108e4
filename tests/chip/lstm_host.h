// Test helper: one inference of Google's gen2021 Keras LSTM on a bare virtual Edge TPU, the test
// playing the host. The program sends each time step's hidden state to a host scratch buffer and,
// after its time loop, asks for the whole sequence back (device-reported DMA descriptors that its
// DMA hints do not list); this host knows that program and answers it, independently of the
// runtime's general serving of device requests (src/usb/requested_dmas.cpp), which it checks.
#pragma once

#include <cstdint>
#include <vector>

#include "chip/sim_runner.h"

namespace tinycoral::chip::testing {

inline constexpr int kLstmSteps = 28, kLstmCells = 20;

// The state inputs at their zero points: int8 -1 -> 127 (24 bytes, padded); int16 0 -> 0x8000.
inline std::vector<uint8_t> lstm_initial_hidden() { return std::vector<uint8_t>(24, 127); }
inline std::vector<uint8_t> lstm_initial_cell() {
  std::vector<uint8_t> cell;
  for (int i = 0; i < kLstmCells; ++i) cell.insert(cell.end(), {0x00, 0x80});
  return cell;
}

// Every output DMA of one inference, in order: the 28 hidden states (the program's scratch), the
// class scores (16 bytes), the final hidden state (24) and the final cell state (40, 16-bit).
inline std::vector<std::vector<uint8_t>> lstm_inference(VirtualEdgeTpu& chip,
                                                        const container::Executable& exe,
                                                        const std::vector<uint8_t>& image,
                                                        const std::vector<uint8_t>& hidden,
                                                        const std::vector<uint8_t>& cell) {
  Buffers inputs;
  inputs["serving_default_x:0"] = image;
  inputs["tfl.pseudo_qconst"] = hidden;
  inputs["tfl.pseudo_qconst1"] = cell;
  run_executable(chip, exe, inputs);  // the hints hold no outputs: all come below
  std::vector<std::vector<uint8_t>> outputs;
  std::vector<uint8_t> scratch;
  for (int round = 0; round < 1000; ++round) {
    const RunState state = chip.advance();
    if (state == RunState::kFaulted) fail("chip faulted: ", chip.fault());
    bool progress = false;
    while (auto out = chip.take_output()) {
      outputs.push_back(*out);
      progress = true;
      if (outputs.size() <= kLstmSteps) scratch.insert(scratch.end(), out->begin(), out->end());
      // After the time loop the program pops the whole sequence back from the scratch buffer.
      if (outputs.size() == kLstmSteps) chip.receive(DmaTag::kInput, scratch);
    }
    while (chip.take_event()) progress = true;
    if (state == RunState::kIdle && !progress) break;
  }
  return outputs;
}

}  // namespace tinycoral::chip::testing
