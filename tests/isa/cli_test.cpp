// The `disasm` and `asm` commands end to end: the round-trip gate over every real model, the
// hand-written example, and bad input (one error line naming the file, exit code 2).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "support/testdata.h"

namespace tinycoral {
namespace {

namespace fs = std::filesystem;
using testing::run_cli;

std::string last_line(const std::string& out) {
  std::string s = out;
  while (!s.empty() && s.back() == '\n') s.pop_back();
  const size_t nl = s.rfind('\n');
  return nl == std::string::npos ? s : s.substr(nl + 1);
}

size_t count_lines(const std::string& s) {
  return static_cast<size_t>(std::count(s.begin(), s.end(), '\n'));
}

fs::path temp_file(const std::string& name, const std::string& content) {
  const fs::path p = fs::temp_directory_path() / ("tinycoral_isa_cli_" + name);
  std::ofstream(p, std::ios::binary) << content;
  return p;
}

TEST(DisasmCli, CheckPassesOnEveryTestModel) {
  TINYCORAL_REQUIRE_TESTDATA(dir);
  std::string files;
  size_t models = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.size() > 15 && name.ends_with("_edgetpu.tflite")) {
      files += " '" + e.path().string() + "'";
      ++models;
    }
  }
  if (models == 0) GTEST_SKIP() << "no *_edgetpu.tflite under " << dir;
  const auto r = run_cli("disasm --check" + files);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string last = last_line(r.out);
  const size_t comma = last.find(" bitstreams, ");
  ASSERT_NE(comma, std::string::npos) << last;
  const std::string n = last.substr(0, comma);
  EXPECT_EQ(last, n + " bitstreams, " + n + " byte-identical");
  EXPECT_GE(std::stoul(n), 2 * models);  // every model has at least two executables
  EXPECT_EQ(count_lines(r.out), 1u) << "no check() findings expected on real programs:\n" << r.out;
}

TEST(DisasmCli, ListsAModelWithRelocationMarks) {
  TINYCORAL_REQUIRE_TESTDATA(dir);
  const fs::path model = dir / "gen2021" / "split_concat_edgetpu.tflite";
  if (!fs::exists(model)) GTEST_SKIP() << model << " is absent";
  const auto r = run_cli("disasm --executable 1 '" + model.string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("executable 1 (PARAMETER_CACHING), bitstream 0: 77 words, 56 instructions"),
            std::string::npos)
      << r.out.substr(0, 300);
  EXPECT_NE(r.out.find("bundle s_op=0x2f s_x=1  ; reloc PARAMETER lo"), std::string::npos);
  EXPECT_NE(r.out.find("    0: start length_bits=9600\n"), std::string::npos);
  EXPECT_NE(r.out.find("   71: halt code=4\n   72: nop\n"), std::string::npos);
  EXPECT_EQ(r.out.find("; check:"), std::string::npos);
}

TEST(AsmCli, ExampleAssemblesAndRoundTrips) {
  const fs::path source = testing::source_dir() / "examples" / "hello.s";
  const fs::path bin = fs::temp_directory_path() / "tinycoral_isa_cli_hello.bin";
  const auto a = run_cli("asm '" + source.string() + "' -o '" + bin.string() + "'");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.err, "") << "the example should pass every structural check";
  EXPECT_EQ(fs::file_size(bin), 22u * 16u);
  const auto c = run_cli("disasm --check '" + bin.string() + "'");
  EXPECT_EQ(c.exit_code, 0) << c.out;
  EXPECT_EQ(last_line(c.out), "1 bitstreams, 1 byte-identical");
  // The listing reassembles to the same bytes.
  const auto d = run_cli("disasm '" + bin.string() + "'");
  ASSERT_EQ(d.exit_code, 0);
  const fs::path listing = temp_file("listing.s", d.out);
  const fs::path bin2 = fs::temp_directory_path() / "tinycoral_isa_cli_hello2.bin";
  ASSERT_EQ(run_cli("asm '" + listing.string() + "' -o '" + bin2.string() + "'").exit_code, 0);
  std::ifstream f1(bin, std::ios::binary), f2(bin2, std::ios::binary);
  const std::string b1((std::istreambuf_iterator<char>(f1)), {}),
      b2((std::istreambuf_iterator<char>(f2)), {});
  EXPECT_EQ(b1, b2);
}

void expect_one_error_line(const std::string& args, const std::string& needle) {
  const auto r = run_cli(args);
  EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.out << r.err;
  EXPECT_EQ(count_lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
}

TEST(DisasmCli, BadInputGivesOneLineAndExitCode2) {
  const fs::path odd = temp_file("odd.bin", std::string(17, '\x01'));
  expect_one_error_line("disasm '" + odd.string() + "'",
                        odd.string() + ": raw bitstream: bitstream of 17 bytes");
  expect_one_error_line("disasm --check '" + odd.string() + "'",
                        "not a whole number of 16-byte words");
  std::string unknown(32, '\0');
  unknown[0] = '\x00';
  unknown[1] = '\x08';  // word 0 = nop, word 1 = opcode 0
  const fs::path unk = temp_file("unknown.bin", unknown);
  expect_one_error_line("disasm '" + unk.string() + "'", "word 1: unknown opcode 0x0");
  std::string cut(16, '\0');
  cut[0] = '\x40';  // opcode 0x01 needs 17 words
  const fs::path truncated = temp_file("truncated.bin", cut);
  expect_one_error_line("disasm --check '" + truncated.string() + "'", "needs 17 words");
  const fs::path empty = temp_file("empty.bin", "");
  expect_one_error_line("disasm '" + empty.string() + "'", "empty file");
  expect_one_error_line("disasm /no/such/file.bin", "/no/such/file.bin");
  std::string fake_tflite = "\x10\0\0\0TFL3" + std::string(8, '\xff');
  const fs::path bad_model = temp_file("bad_edgetpu.tflite", fake_tflite);
  expect_one_error_line("disasm '" + bad_model.string() + "'", bad_model.string());
}

TEST(AsmCli, BadSourceGivesOneLineAndExitCode2) {
  const fs::path src = temp_file("bad.s", "start length_bits=0\nhalt colour=3\n");
  const fs::path out = fs::temp_directory_path() / "tinycoral_isa_cli_bad.bin";
  expect_one_error_line("asm '" + src.string() + "' -o '" + out.string() + "'",
                        src.string() + ": line 2: halt has no field 'colour'");
  const fs::path blank = temp_file("blank.s", "; nothing\n");
  expect_one_error_line("asm '" + blank.string() + "' -o '" + out.string() + "'",
                        "no instructions");
}

}  // namespace
}  // namespace tinycoral
