// The Keras LSTM's 16-bit op classes (docs/chip_ops.md section 7) run on tile 0 with Google's own
// instructions (gen2021 keras_lstm_mnist_ptq, skipped without ../shared/testdata):
//  - the cell update (word 1573, the 16-bit ADD) is c' = f c + i g / 4: operand 1 with the zero
//    point 32768, operand 2 with 16384, the weights (32767, 8192) the program's mesh fills build;
//  - the cell gate (word 1404) is 128 + 127.5 tanh(x) for negative x as well as positive: the
//    TANH table it loads (word 1324) covers x >= 0 only and the unit gives it x's sign.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>

#include "chip/ops/nlu.h"
#include "chip/ops_test_util.h"
#include "chip/program.h"
#include "container/edgetpu_model.h"
#include "host/ops/edgetpu_spline.h"
#include "support/testdata.h"

namespace tinycoral::chip {
namespace {

std::unique_ptr<Program> lstm_program(const std::filesystem::path& dir) {
  const auto compiled =
      container::read_edgetpu_model_file(dir / "gen2021/keras_lstm_mnist_ptq_edgetpu.tflite");
  for (const auto& exe : compiled.edgetpu_ops.at(0).options.packages.at(0).executables)
    if (exe.type == container::ExecutableType::kExecutionOnly)
      return Program::decode(exe.bitstreams.at(0).data);
  fail("the LSTM has no execution program");
}

template <typename T>
const T& item_at(const Program& p, uint32_t word) {
  for (const auto& item : p.items)
    if (item.word_offset == word) return std::get<T>(item.decoded);
  fail("no item at word ", word);
}

uint16_t u16_at(const Tile& tile, size_t at) {
  uint16_t v;
  std::memcpy(&v, &tile.narrow[at], 2);
  return v;
}

TEST(LstmOps, CellUpdateIsForgetTimesCellPlusAQuarterOfInputTimesGate) {
  TINYCORAL_REQUIRE_TESTDATA(dir);
  const auto program = lstm_program(dir);
  const auto& op = item_at<OpInstr>(*program, 1573);
  Tile tile;
  // The weight rows narrowToWide 1566 builds from the mesh fills 1536-1560: row r (units 0x206c +
  // 4 r) holds 32767 and 8192 as the two 16-bit halves of column r.
  for (int r = 0; r < 4; ++r) {
    const uint32_t word = 0x20007fff;
    std::memcpy(&tile.wide[(0x206c + 4 * r) * kWideUnitBytes + 4 * r], &word, 4);
  }
  std::mt19937 random(7);
  std::uniform_int_distribution<int> fc(-12000, 12000), ig(-16000, 16000);
  int a[20], b[20];
  for (int k = 0; k < 20; ++k) {
    a[k] = fc(random);  // f c in the cell's units, stored + 32768 (operand 1 at narrow 0x1ec)
    b[k] = ig(random);  // i g in a quarter of them, stored + 16384 (operand 2, 60 bytes on)
    const uint16_t sa = static_cast<uint16_t>(a[k] + 32768),
                   sb = static_cast<uint16_t>(b[k] + 16384);
    std::memcpy(&tile.narrow[0x1ec + 2 * k], &sa, 2);
    std::memcpy(&tile.narrow[0x228 + 2 * k], &sb, 2);
  }
  ops_test::run_class(op, tile);
  for (int k = 0; k < 20; ++k) {
    const double want = a[k] + b[k] / 4.0;
    const int got = u16_at(tile, 0x460 + 2 * static_cast<size_t>(k)) - 32768;
    EXPECT_LE(std::abs(got - want), 0.5 + 1e-3) << "cell " << k;
  }
}

TEST(LstmOps, CellGateIsAnOddTanh) {
  TINYCORAL_REQUIRE_TESTDATA(dir);
  const auto program = lstm_program(dir);
  const auto& op = item_at<OpInstr>(*program, 1404);
  Tile tile;
  tile.nlu = item_at<NluLoadInstr>(*program, 1324).table;
  // ADD's weight rows for equal scales as the mesh fills 1337-1391 and narrowToWide 1397 build
  // them (units 0x206c + 4 r): step (half h, operand o) reads row h + 2 o, whose columns 2h and
  // 2h + 1 take the two bytes with weight 1.
  for (int r = 0; r < 4; ++r) {
    const uint32_t words[4] = {1, 0x10000, 0, 0};
    std::memcpy(&tile.wide[(0x206c + 4 * r) * kWideUnitBytes + 8 * (r % 2)], words, 8);
  }
  // Both parts of the gate at the hidden zero point 127, except part 1 of cell k: 127 + 12 (k -
  // 10), so the gate's input is 12 (k - 10) steps of 0.00778 (-0.93 ... +0.84).
  TtuWalker in(op.in);
  do {
    tile.narrow[in.address()] = 127;
    tile.narrow[in.address() + 1] = 127;
  } while (in.next());
  for (int k = 0; k < 20; ++k) tile.narrow[0x180 + k] = static_cast<uint8_t>(127 + 12 * (k - 10));
  ops_test::run_class(op, tile);
  for (int k = 0; k < 20; ++k) {
    const double x = 12 * (k - 10) * static_cast<double>(op.mult);
    const double want = 128 + 127.5 * std::tanh(x);
    EXPECT_LE(std::abs(tile.narrow[0x1fc + k] - want), 1.0) << "cell " << k << ", x = " << x;
  }
}

// The host's `edgetpu` LSTM (docs/host_ops.md "The chip's LSTM") builds its splines from two base
// tables and the output scales it derives from the twin: they are the tables the program loads,
// bit for bit (words 1014: 255 sigma, 1324: 127.5 tanh, 1748: 16383.5 tanh).
void expect_same_table(const NluTable& chip, const host::ops::EdgeTpuSpline& host,
                       const char* what) {
  for (size_t i = 0; i < chip.coefficients.size(); ++i)
    EXPECT_EQ(std::bit_cast<uint32_t>(chip.coefficients[i]),
              std::bit_cast<uint32_t>(host.coefficients[i]))
        << what << " coefficient " << i;
  for (size_t i = 0; i < chip.breakpoints.size(); ++i)
    EXPECT_EQ(std::bit_cast<uint32_t>(chip.breakpoints[i]),
              std::bit_cast<uint32_t>(host.breakpoints[i]))
        << what << " breakpoint " << i;
}

TEST(LstmOps, HostSplinesAreTheTablesTheProgramLoads) {
  expect_same_table(ops::logistic_table(), host::ops::logistic_spline(1.0f / 256), "LOGISTIC");
  TINYCORAL_REQUIRE_TESTDATA(dir);
  const auto program = lstm_program(dir);
  expect_same_table(item_at<NluLoadInstr>(*program, 1014).table,
                    host::ops::logistic_spline(1.0f / 255), "gate sigmoid");
  expect_same_table(item_at<NluLoadInstr>(*program, 1324).table, host::ops::tanh_spline(2.0f / 255),
                    "cell gate tanh");
  expect_same_table(item_at<NluLoadInstr>(*program, 1748).table,
                    host::ops::tanh_spline(2.0f / 32767), "tanh of the cell");
  // The clamps the ops apply before those splines.
  EXPECT_EQ(item_at<OpInstr>(*program, 1094).clamp_max, host::ops::logistic_spline(1).clamp);
  EXPECT_EQ(item_at<OpInstr>(*program, 1404).clamp_max, host::ops::tanh_spline(1).clamp);
  EXPECT_EQ(item_at<OpInstr>(*program, 1798).clamp_max, host::ops::tanh_spline(1).clamp);
}

}  // namespace
}  // namespace tinycoral::chip
