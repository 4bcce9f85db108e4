// libFuzzer target: the runtime's executable loader and the virtual Edge TPU behind it. With the
// first byte odd, the rest is a serialized executable as it is; otherwise the input mutates a
// working one (a round-trip program with an input and an output layer) field by field - layer
// dimensions, padded sizes, execution counts, scratch size, DMA hints, output layouts, the
// bitstream's bytes - which our writer serializes and our reader reads back. Whatever loads is run
// once on the virtual Edge TPU with budgets close to the real ones. Everything must load and run or
// end in an Error: no crash, no hang, no out-of-bounds access, no gigabytes.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "chip/round_trip_program.h"
#include "chip/virtual_edge_tpu.h"
#include "common/error.h"
#include "container/package.h"
#include "fuzz_input.h"
#include "runtime/device_select.h"
#include "runtime/hostile_models.h"
#include "runtime/program.h"

namespace {

using namespace tinycoral;
using tinycoral::fuzz::FuzzInput;

void mutate_layer(container::Layer& l, FuzzInput& in) {
  switch (in.byte() % 8) {
    case 0:
      l.y_dim = in.wild(0, 8);
      break;
    case 1:
      l.x_dim = in.wild(0, 8);
      break;
    case 2:
      l.z_dim = in.wild(0, 64);
      break;
    case 3:
      l.size_bytes = in.wild(0, 256);
      break;
    case 4:
      l.execution_count_per_inference = in.wild(1, 4);
      break;
    case 5:
      l.data_type = static_cast<container::DataType>(in.byte() % 10);
      break;
    case 6: {
      container::OutputLayout layout;
      for (auto* v :
           {&layout.y_coordinate_to_linear_tile_id_map, &layout.x_coordinate_to_linear_tile_id_map,
            &layout.linearized_tile_byte_offset, &layout.x_coordinate_to_local_byte_offset,
            &layout.y_coordinate_to_local_y_offset, &layout.x_coordinate_to_local_y_row_size}) {
        v->resize(in.byte() % 5);
        for (auto& x : *v) x = in.wild(0, 64);
      }
      l.output_layout = layout;
      break;
    }
    default:
      l.name = in.byte() & 1 ? "in" : "out";
  }
}

container::Executable mutated(FuzzInput& in) {
  const uint32_t bytes = 8 * (1 + in.byte() % 8);
  container::Executable e = testing::sim_executable(
      chip::testing::round_trip_program(0x100 + in.byte(), bytes), int32_t(bytes), int32_t(bytes));
  const int edits = 1 + in.byte() % 6;
  for (int k = 0; k < edits; ++k) {
    switch (in.byte() % 6) {
      case 0:
        mutate_layer(e.input_layers[0], in);
        break;
      case 1:
        mutate_layer(e.output_layers[0], in);
        break;
      case 2:
        e.scratch_size_bytes = in.wild(0, 4096);
        break;
      case 3: {  // a DMA hint's offset, size, kind or target
        auto& hints = e.dma_hints.hints;
        auto& h = hints[in.byte() % hints.size()];
        h.offset_in_bytes = in.wild(-8, 64);
        h.size_in_bytes = in.wild(-8, 64);
        h.chunk_index = in.wild(-1, 2);
        h.interrupt_type = in.wild(-1, 4);
        h.meta.desc = static_cast<container::BufferKind>(in.byte() % 4);
        break;
      }
      case 4: {  // bitstream bytes
        auto& b = e.bitstreams[0].data;
        for (int n = in.byte() % 16; n > 0; --n) b[in.u32() % b.size()] = in.byte();
        break;
      }
      default:
        e.batch_size = in.byte() % 4 == 0 ? in.wild(0, 3) : 1;
    }
  }
  return e;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  FuzzInput in(std::span(data + 1, size - 1));
  try {
    const container::Executable e =
        data[0] & 1 ? container::read_executable(std::span(data + 1, size - 1))
                    : container::read_executable(container::write_executable(mutated(in)));
    auto program = std::make_shared<runtime::Program>(e);
    for (size_t i = 0; i < program->num_inputs(); ++i) {
      std::vector<uint8_t> input(program->input_bytes(i));
      for (auto& b : input) b = in.byte();
      program->set_input(i, input);
    }
    chip::ChipOptions chip_options;
    chip_options.instruction_budget = 10'000'000;
    chip_options.max_work_items = 1'000'000;
    auto chip = std::make_shared<chip::VirtualEdgeTpu>(chip_options);
    auto tpu = runtime::open_virtual_edgetpu({}, chip);
    tpu->run(nullptr, program);
    for (size_t i = 0; i < program->num_outputs(); ++i) {
      std::vector<uint8_t> out(program->output_bytes(i));
      program->get_output(i, out);
    }
  } catch (const Error&) {
  }
  return 0;
}
