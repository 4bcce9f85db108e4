// A one-line reading of a scalar bundle (0x20) for the disassembly's comments, e.g.
// `[p0] s4 = s4 + 0x1; desc[1] = s5`. Operation names and slot meanings: isa.md 2.11.
#include <cstdio>

#include "isa/isa.h"

namespace tinycoral::isa {
namespace {

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

// A letter and a number, formatted in place: `"s" + std::to_string(n)` makes GCC 12 at -O3 raise a
// false -Wrestrict inside std::string (a known GCC 12 false positive).
std::string numbered(char letter, int64_t n) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%c%lld", letter, static_cast<long long>(n));
  return buf;
}

std::string reg(int64_t r) { return numbered('s', r & 31); }

// The ALU slot: s_x = s_y OP b, b the immediate (s_op bit 5) or register imm & 31.
std::string alu(const Instruction& in) {
  const int64_t s_op = in.value("s_op");
  if (s_op == 0) return "";
  const bool immediate = (s_op & kAluImmediateBit) != 0;
  const int64_t op = s_op & ~int64_t{kAluImmediateBit};
  const int64_t imm = in.value("imm");
  const std::string b = immediate ? hex(static_cast<uint64_t>(imm)) : reg(imm);
  const std::string x = reg(in.value("s_x"));
  const std::string y = reg(in.value("s_y"));
  const std::string p = numbered('p', in.value("s_x") & 7);
  auto binary = [&](const char* op_text) { return x + " = " + y + " " + op_text + " " + b; };
  auto compare = [&](const char* op_text) { return p + " = " + y + " " + op_text + " " + b; };
  auto floating = [&](const char* name) { return x + " = " + name + " " + y + ", " + b; };
  switch (op) {
    case kAluAdd:
      return binary("+");
    case kAluSub:
      return binary("-");
    case kAluAnd:
      return binary("&");
    case kAluOr:
      return binary("|");
    case kAluXor:
      return binary("^");
    case kAluShiftLeft:
      return binary("<<");
    case kAluShiftRight:
      return binary(">>u");
    case kAluShiftRightSigned:
      return binary(">>");
    case kAluEqual:
      return compare("==");
    case kAluNotEqual:
      return compare("!=");
    case kAluGreaterSigned:
      return compare(">s");
    case kAluLessSigned:
      return compare("<s");
    case kAluGreaterEqualUnsigned:
      return compare(">=u");
    case kAluGreaterEqualSigned:
      return compare(">=s");
    case kAluMove:
      return x + " = " + b;
    case kAluIntToFloat:
      return x + " = i2f " + b;
    case kAluFloatToInt:
      return x + " = f2i " + b;
    case kAluFloatAdd:
      return floating("fadd");
    case kAluFloatSub:
      return floating("fsub");
    case kAluFloatMul:
      return floating("fmul");
    case kAluFloatMax:
      return floating("fmax");
    case kAluFloatMin:
      return floating("fmin");
    default:
      break;
  }
  return "alu op " + hex(static_cast<uint64_t>(s_op));
}

// The memory / descriptor slot (v_op) and the load slot (enable_vector).
std::string memory(const Instruction& in) {
  std::string out;
  const auto add = [&out](const std::string& s) { out += (out.empty() ? "" : "; ") + s; };
  const int64_t ev = in.value("enable_vector");
  if (ev == 1)
    add(reg(in.value("vs_reg_v1")) + " = smem[" + hex(static_cast<uint64_t>(in.value("imm_size"))) +
        "]");
  if (ev == 2 || ev == 3) {
    const int64_t addr = in.value("imm_size");
    add(reg(in.value("vs_reg_v1")) + " = smem[" + reg(addr) + (ev == 3 ? "++" : "") + "]");
  }
  const std::string src = reg(in.value("vs_reg"));
  switch (in.value("v_op")) {
    case kVectorNone:
      break;
    case kStoreToWordAddress:
      add("smem[" + hex(static_cast<uint64_t>(in.value("v_cmd") << 8 | in.value("v_offset"))) +
          "] = " + src);
      break;
    case kStore:
      add("smem[" + reg(in.value("v_offset")) + "] = " + src);
      break;
    case kStorePostIncrement:
      add("smem[" + reg(in.value("v_offset")) + "++] = " + src);
      break;
    case kPushToHost:
      add("push " + src);
      break;
    case kDescriptorWord:
      add("desc[" + std::to_string(in.value("v_offset")) + "] = " + src);
      break;
    case kDescriptorIssue:
      add("issue desc");
      break;
    default:
      add("v_op " + hex(static_cast<uint64_t>(in.value("v_op"))));
  }
  static const char* const kSfu[] = {nullptr, nullptr, "recip", "exp2"};
  const int64_t f = in.value("v_op2");
  if (f == 2 || f == 3) {
    add(reg(in.value("sfu_dst")) + " = " + kSfu[f] + " " + reg(in.value("vs_reg_w")));
  } else if (f != 0) {
    add("sfu op " + std::to_string(f));
  }
  return out;
}

}  // namespace

std::string describe_bundle(const Instruction& in) {
  if (in.spec->opcode != kBundle) return "";
  std::string out = alu(in);
  const std::string mem = memory(in);
  if (!mem.empty()) out += (out.empty() ? "" : "; ") + mem;
  if (!out.empty() && in.value("gate") == 1) {
    out = std::string(in.value("pred_pol") ? "[" : "[!") + "p" +
          std::to_string(in.value("pred_reg")) + "] " + out;
  }
  return out;
}

}  // namespace tinycoral::isa
