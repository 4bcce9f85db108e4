// The scalar core of the virtual Edge TPU (isa.md 2.11): 32 registers, 8 predicates, 16 KiB scalar
// memory, VLIW bundles (0x20) with predication, hardware loops (0x23), branches (0x22), host DMA
// descriptors, scalar fences (0x24) and halt. It executes the stream in order and hands tile and
// DMA instructions to their queues (dispatch.cpp).
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "chip/machine.h"
#include "common/error.h"

namespace tinycoral::chip {
namespace {

[[noreturn]] void fail_scalar(const ProgramItem& item, const std::string& what) {
  fail("scalar core at word ", item.word_offset, " (", opcode_name(item.opcode), "): ", what);
}

float as_float(uint32_t v) { return std::bit_cast<float>(v); }
uint32_t as_bits(float f) { return std::bit_cast<uint32_t>(f); }

// F2I rounds to nearest (isa.md 2.11; device softmax); out-of-range values saturate.
uint32_t float_to_int(float f) {
  if (std::isnan(f)) return 0;
  const double r = std::nearbyint(static_cast<double>(f));
  if (r >= 2147483647.0) return 0x7fffffffu;
  if (r <= -2147483648.0) return 0x80000000u;
  return static_cast<uint32_t>(static_cast<int32_t>(r));
}

}  // namespace

bool VirtualEdgeTpu::Impl::scsync_ready(const ScSyncInstr& s, uint64_t /*order*/) {
  // tokwait: the tiles in tmask delivered the tokens of the fences issued before, i.e. every tile
  // instruction dispatched so far on them completed. Counter waits (PRODUCER_A >= n ...) are
  // modelled as "every tile and DMA instruction dispatched so far completed" (docs/chip.md
  // "Fences").
  if (s.tokwait) {
    for (uint32_t t = 0; t < kTileCount; ++t) {
      if (!(s.tmask >> t & 1)) continue;
      if (tile_state[t].busy != 0) return false;
    }
    for (uint32_t id : syncs)
      if (!works[id].done && works[id].tile >= 0 && (s.tmask >> works[id].tile & 1)) return false;
  }
  if (s.wait) {
    if (!all_works_done()) return false;
  }
  return true;
}

void VirtualEdgeTpu::Impl::issue_descriptor(const ProgramItem& item) {
  const auto& d = scalar.descriptor;
  const uint32_t tag = d[3];
  switch (tag) {
    case 0:
      fail_scalar(item, "a host DMA descriptor with tag 0 (instructions flow host to device only)");
    case 1:  // "send me these bytes": the data comes on the host stream of that tag
    case 2:
    case 4:  // interrupts 0-3
    case 5:
    case 6:
    case 7:
      break;
    case 3:  // "take these bytes": the outfeeds and pushes that follow fill it
      if (d[2] > 0) open_outputs.push_back({d[2], {}});
      break;
    default:
      fail_scalar(item, cat("a host DMA descriptor with unknown tag ", tag));
  }
  // Every descriptor is reported as an event; the USB side forwards those its descr_ep register
  // enables (tags 4-7 by default; all of them when the host serves device-requested DMAs).
  if (events.size() >= options.max_pending_events)
    fail_scalar(item, cat("more than ", options.max_pending_events,
                          " DMA descriptors the host has not taken"));
  events.push_back({uint64_t{d[0]} | uint64_t{d[1]} << 32, d[2], static_cast<uint8_t>(tag)});
}

// Scalar ALU slot: s_x = s_y OP b, from the operands as they were at the bundle's start.
void VirtualEdgeTpu::Impl::execute_alu(const ScalarBundle& b, uint32_t alu_a, uint32_t alu_reg,
                                       const ProgramItem& item) {
  const uint32_t op = b.s_op & ~isa::kAluImmediateBit;
  const uint32_t a = alu_a;
  const uint32_t v = (b.s_op & isa::kAluImmediateBit) ? b.imm : alu_reg;
  const auto sa = static_cast<int32_t>(a), sv = static_cast<int32_t>(v);
  auto set = [&](uint32_t value) { scalar.regs[b.s_x] = value; };
  auto pred = [&](bool value) { scalar.preds[b.s_x & 7] = value; };
  switch (op) {
    case isa::kAluAdd:
      set(a + v);
      break;
    case isa::kAluSub:
      set(a - v);
      break;
    case isa::kAluAnd:
      set(a & v);
      break;
    case isa::kAluOr:
      set(a | v);
      break;
    case isa::kAluXor:
      set(a ^ v);
      break;
    case isa::kAluShiftLeft:
      set(v >= 32 ? 0 : a << v);
      break;
    case isa::kAluShiftRight:
      set(v >= 32 ? 0 : a >> v);
      break;
    case isa::kAluShiftRightSigned:
      set(static_cast<uint32_t>(sa >> (v >= 32 ? 31 : v)));
      break;
    case isa::kAluEqual:
      pred(a == v);
      break;
    case isa::kAluNotEqual:
      pred(a != v);
      break;
    case isa::kAluGreaterSigned:
      pred(sa > sv);
      break;
    case isa::kAluLessSigned:
      pred(sa < sv);
      break;
    case isa::kAluGreaterEqualUnsigned:
      pred(a >= v);
      break;  // unsigned per tinycoral's interpreter (isa.md 2.11: unverified)
    case isa::kAluGreaterEqualSigned:
      pred(sa >= sv);
      break;
    case isa::kAluMove:
      set(v);
      break;
    case isa::kAluIntToFloat:
      set(as_bits(static_cast<float>(static_cast<int32_t>(alu_reg))));
      break;
    case isa::kAluFloatToInt:
      set(float_to_int(as_float(alu_reg)));
      break;
    case isa::kAluFloatAdd:
      set(as_bits(as_float(a) + as_float(v)));
      break;
    case isa::kAluFloatSub:
      set(as_bits(as_float(a) - as_float(v)));
      break;
    case isa::kAluFloatMul:
      set(as_bits(as_float(a) * as_float(v)));
      break;
    case isa::kAluFloatMax:
      set(as_bits(std::fmax(as_float(a), as_float(v))));
      break;
    case isa::kAluFloatMin:
      set(as_bits(std::fmin(as_float(a), as_float(v))));
      break;
    default:
      fail_scalar(item, cat("unknown scalar ALU operation s_op 0x", std::hex, int{b.s_op}));
  }
}

void VirtualEdgeTpu::Impl::execute_bundle(const ScalarBundle& b, const ProgramItem& item) {
  // Every slot reads the registers as they were at the bundle's start: the operands are read
  // before any slot writes (copying all 32 registers per bundle cost more than the bundle).
  const auto& regs = scalar.regs;
  const uint32_t alu_a = regs[b.s_y], alu_reg = regs[b.imm & 31];
  const uint32_t load_address = regs[b.imm_size & 31];
  const uint32_t store_address = regs[b.v_offset & 31], vector_value = regs[b.vs_reg];
  const uint32_t sfu_operand = regs[b.vs_reg_w];
  auto smem_word = [&](uint32_t word) -> uint8_t* {
    if (word >= kScalarMemoryBytes / 4)
      fail_scalar(item,
                  cat("scalar memory word ", word, " outside ", kScalarMemoryBytes / 4, " words"));
    return scalar.smem.data() + 4 * size_t{word};
  };

  if (b.s_op != 0) execute_alu(b, alu_a, alu_reg, item);

  // Memory slot: loads from scalar memory (word addresses), optional post-increment.
  if (b.enable_vector >= 2) {
    const uint32_t addr_reg = b.imm_size & 31;
    uint32_t value;
    std::memcpy(&value, smem_word(load_address), 4);
    scalar.regs[b.vs_reg_v1] = value;
    if (b.enable_vector == 3 || (b.imm_size & 0x20)) scalar.regs[addr_reg] = load_address + 1;
  } else if (b.enable_vector == 1) {  // load from the immediate word address (docs/isa.md)
    uint32_t value;
    std::memcpy(&value, smem_word(b.imm_size), 4);
    scalar.regs[b.vs_reg_v1] = value;
  }

  // Vector slot: stores, host pushes, DMA descriptors (most bundles have none: a plain test, not
  // the jump table's indirect jump, skips it).
  if (b.v_op != 0) {
    switch (b.v_op) {
      case isa::kStoreToWordAddress:  // the store to the immediate word address v_cmd:v_offset
                                      // (docs/isa.md)
        std::memcpy(smem_word(uint32_t{b.v_cmd} << 8 | b.v_offset), &vector_value, 4);
        break;
      case isa::kStore:
        std::memcpy(smem_word(store_address), &vector_value, 4);
        break;
      case isa::kStorePostIncrement:  // the store with post-increment of its address register
                                      // (docs/isa.md 2.11)
        std::memcpy(smem_word(store_address), &vector_value, 4);
        scalar.regs[b.v_offset & 31] = store_address + 1;
        break;
      case isa::kPushToHost: {
        uint8_t bytes[4];
        std::memcpy(bytes, &vector_value, 4);
        deliver_output_bytes(bytes);
        break;
      }
      case isa::kDescriptorWord:
        if (b.v_offset > 3)
          fail_scalar(item, cat("descriptor word ", int{b.v_offset}, " (0..3 exist)"));
        scalar.descriptor[b.v_offset] = vector_value;
        break;
      case isa::kDescriptorIssue:
        issue_descriptor(item);
        break;
      default:
        fail_scalar(item, cat("unknown vector-slot operation v_op 0x", std::hex, int{b.v_op}));
    }
  }

  // Special-function unit: 2 reciprocal, 3 exp2 (correctly rounded here; the chip is within a few
  // ulp, isa.md 2.11).
  if (b.v_op2 != 0) {
    const float x = as_float(sfu_operand);
    float y = 0;
    if (b.v_op2 == 2)
      y = 1.0f / x;
    else if (b.v_op2 == 3)
      y = std::exp2(x);
    else
      fail_scalar(item, cat("unknown special-function operation v_op_2 ", int{b.v_op2}));
    scalar.regs[b.sfu_dst] = as_bits(y);
  }
}

bool VirtualEdgeTpu::Impl::run_bundles() {
  // Everything step_scalar does for a bundle, in one loop over the run of bundles at pc (the device
  // softmax: 57K bundles per MobileNet inference, in three hardware loops). The instruction count
  // and budget are added up at the end (also when a bundle fails); the loop end is looked up only
  // when pc reaches it.
  const Program& p = *program;
  const size_t count = p.items.size();
  const bool tracing = options.trace != nullptr;
  const uint64_t budget_left =
      options.instruction_budget > budget_used ? options.instruction_budget - budget_used : 0;
  uint32_t pc = scalar.pc;
  uint64_t executed = 0;
  struct Count {
    Impl& m;
    const uint64_t& executed;
    ~Count() {
      m.budget_used += executed;
      m.stats.instructions[static_cast<size_t>(UnitId::kScalar)] += executed;
    }
  } count_at_exit{*this, executed};
  uint32_t loop_end = scalar.loops.empty() ? kNone : scalar.loops.back().end_item;
  while (pc < count && p.opcodes[pc] == isa::kBundle) {
    const ScalarBundle& b = p.bundles[pc];
    if (b.gate && scalar.preds[b.pred_reg] != b.pred_pol) {
      // predicated off
    } else if (b.alu_only) {
      execute_alu(b, scalar.regs[b.s_y], scalar.regs[b.imm & 31], p.items[pc]);
    } else {
      // Loads must see what outfeeds write to scalar memory: wait for them.
      if (b.enable_vector != 0 && scalar_writes_pending()) break;
      if (b.enable_vector != 0)  // clock: the load waits for the outfeeds into scalar memory
        clock.scalar_wait_until(clock.scalar_memory_ready, scalar_executed() + executed);
      // A completion interrupt is only sent when everything before it finished.
      if (b.v_op == 0xc && scalar.descriptor[3] >= 4 &&
          (!all_works_done() || !open_outputs.empty()))
        break;
      execute_bundle(b, p.items[pc]);
    }
    if (++executed > budget_left) {  // over the budget: charge() fails with the usual message
      budget_used += executed;
      stats.instructions[static_cast<size_t>(UnitId::kScalar)] += executed;
      executed = 0;
      charge(0);
    }
    if (tracing) {
      const uint64_t now = clock.scalar_now(scalar_executed() + executed);
      options.trace->record(
          {programs_received, p.items[pc].word_offset, isa::kBundle, -1, "scalar", now, now});
    }
    if (++pc == loop_end) {
      pc = next_pc(pc);
      loop_end = scalar.loops.empty() ? kNone : scalar.loops.back().end_item;
    }
  }
  scalar.pc = pc;
  return executed > 0;
}

bool VirtualEdgeTpu::Impl::scalar_writes_pending() const {
  for (uint32_t id : scalar_region)
    for (const Access& a : works[id].accesses)
      if (a.write && a.space == Space::kScalarMemory && !works[id].done) return true;
  return false;
}

uint32_t VirtualEdgeTpu::Impl::next_pc(uint32_t next) {
  // Hardware loops: at the end of a body, repeat or leave.
  while (!scalar.loops.empty() && next == scalar.loops.back().end_item) {
    LoopFrame& f = scalar.loops.back();
    if (f.remaining > 0) {
      --f.remaining;
      return f.first_item;
    }
    scalar.loops.pop_back();
  }
  return next;
}

bool VirtualEdgeTpu::Impl::step_scalar() {
  if (!scalar.running || !program) return false;
  if (run_bundles()) return true;
  if (scalar.pc >= program->items.size()) fail("scalar core ran past the end of the bitstream");
  const uint32_t index = scalar.pc;
  // The item itself is read only off the bundle path (and for errors and traces).
  const ProgramItem& item = program->items[index];
  const uint8_t opcode = program->opcodes[index];
  uint32_t next = index + 1;
  switch (opcode) {
    case isa::kStart:
    case isa::kEnd:
      break;
    case isa::kBundle:
      return false;  // run_bundles ran every bundle it could: this one waits
    case isa::kHalt:
      scalar.running = false;
      scalar.halt_code = std::get<HaltInstr>(item.decoded).code;
      charge();
      stats.instructions[static_cast<size_t>(UnitId::kScalar)]++;
      return true;
    case isa::kBranch:
      if (!std::get<BranchInstr>(item.decoded).conditional || scalar.preds[0]) {
        const int64_t target =
            int64_t{item.word_offset} + std::get<BranchInstr>(item.decoded).offset;
        if (target < 0 || target >= static_cast<int64_t>(program->item_at_word.size()) ||
            program->item_at_word[target] == kNone)
          fail_scalar(item,
                      cat("branch to word ", target, ", not an instruction of this bitstream"));
        next = program->item_at_word[target];
      }
      break;
    case isa::kLoop: {
      const auto& l = std::get<LoopInstr>(item.decoded);
      const uint64_t end_word = uint64_t{item.word_offset} + 1 + l.body;
      uint32_t end_item = kNone;
      if (end_word == program->item_at_word.size())
        end_item = static_cast<uint32_t>(program->items.size());
      else if (end_word < program->item_at_word.size())
        end_item = program->item_at_word[end_word];
      if (end_item == kNone || l.body == 0)
        fail_scalar(item,
                    cat("loop body of ", l.body, " words does not end on an instruction boundary"));
      if (l.count == 0) {
        next = end_item;
      } else {
        if (scalar.loops.size() >= 64) fail_scalar(item, "more than 64 nested hardware loops");
        scalar.loops.push_back({index + 1, end_item, l.count - 1});
      }
      break;
    }
    case isa::kScalarSync: {
      const auto& s = std::get<ScSyncInstr>(item.decoded);
      if (!scsync_ready(s, next_order)) return false;
      // clock: the scalar core waited for what the fence waits for
      for (uint32_t t = 0; s.tokwait && t < kTileCount; ++t)
        if (s.tmask >> t & 1) clock.scalar_wait_until(clock.latest(int(t)), scalar_executed());
      if (s.wait) clock.scalar_wait_until(clock.latest(-1), scalar_executed());
      for (int k = 0; k < 9; ++k) {
        if (!(s.smask >> k & 1)) continue;
        ++stats.scalar_counter_ops[k];
        if (!(s.wait >> k & 1)) scalar.counters[k] = s.value;
      }
      if (s.tokwait) {  // a scalar fence ends the region of scalar-memory hazards
        for (uint32_t id : scalar_region) works[id].region_open = false;
        scalar_region.clear();
      }
      break;
    }
    case isa::kPop:
    case isa::kInfeed:
    case isa::kOutfeed:
    case isa::kTensorOp:
    case isa::kPoolOp:
    case isa::kReduceOp:
    case isa::kRingProducer:
    case isa::kRingConsumer0:
    case isa::kRingConsumer1:
    case isa::kNarrowToWide:
    case isa::kWideToNarrow:
    case isa::kMeshSouth:
    case isa::kMeshWest:
    case isa::kMeshNorth:
    case isa::kMeshEast:
    case isa::kNluLoad:
    case isa::kTileSync:
      dispatch(index);
      break;
    default:
      fail_scalar(item, "opcode the simulator cannot execute");
  }
  charge();
  stats.instructions[static_cast<size_t>(UnitId::kScalar)]++;
  if (options.trace) {
    const uint64_t now = clock.scalar_now(scalar_executed());
    options.trace->record(
        {programs_received, item.word_offset, item.opcode, -1, "scalar", now, now});
  }
  scalar.pc = next_pc(next);
  return true;
}

}  // namespace tinycoral::chip
