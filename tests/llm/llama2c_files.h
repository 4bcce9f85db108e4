// Checkpoints and tokenizers for the llama2.c tests: tiny random ones written here in each of the
// three formats, and the reference checkpoints of the test data, made by its make_checkpoint.py
// (too big to store) once per machine into a cache folder under the temp directory.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "llm/checkpoint.h"
#include "llm/tokenizer.h"
#include "support/testdata.h"

namespace tinycoral::testing {

struct TinyShape {
  int dim = 16, hidden = 40, layers = 2, heads = 4, kv_heads = 2, vocab = 300, seq_len = 32;
  bool shared = true;
};

inline void put_i32(std::vector<uint8_t>& b, int32_t v) {
  uint8_t c[4];
  std::memcpy(c, &v, 4);
  b.insert(b.end(), c, c + 4);
}
inline void put_f32(std::vector<uint8_t>& b, float v) {
  uint8_t c[4];
  std::memcpy(c, &v, 4);
  b.insert(b.end(), c, c + 4);
}
// A whole tensor at once: the same bytes as put_f32 on each value, without a call per value (the
// tests are built unoptimized under the sanitizers, where that took seconds for a larger model).
inline void put_f32s(std::vector<uint8_t>& b, const std::vector<float>& v) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(v.data());
  b.insert(b.end(), bytes, bytes + v.size() * sizeof(float));
}

// Random tensors of a tiny model, in the order of run.c's version-0 file.
struct TinyWeights {
  std::vector<std::vector<float>> tensors;  // emb, rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3,
                                            // rms_final, [wcls]
  explicit TinyWeights(const TinyShape& s, uint32_t seed = 7) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> g(0.0f, 1.0f);
    const int kv = s.dim / s.heads * s.kv_heads;
    auto rand = [&](size_t n, float scale) {
      std::vector<float> v(n);
      for (float& x : v) x = g(rng) * scale;
      return v;
    };
    auto norm = [&](size_t n) {
      std::vector<float> v(n);
      for (float& x : v) x = 1.0f + 0.1f * g(rng);
      return v;
    };
    const size_t L = size_t(s.layers), D = size_t(s.dim), H = size_t(s.hidden);
    const float sd = 1.0f / std::sqrt(float(s.dim)), sh = 1.0f / std::sqrt(float(s.hidden));
    tensors = {rand(size_t(s.vocab) * D, 0.1f),
               norm(L * D),
               rand(L * D * D, sd),
               rand(L * kv * D, sd),
               rand(L * kv * D, sd),
               rand(L * D * D, sd),
               norm(L * D),
               rand(L * H * D, sd),
               rand(L * D * H, sh),
               rand(L * H * D, sd),
               norm(D)};
    if (!s.shared) tensors.push_back(rand(size_t(s.vocab) * D, sd));
  }
};

inline std::vector<uint8_t> tiny_v0(const TinyShape& s, const TinyWeights& w) {
  std::vector<uint8_t> b;
  for (int v :
       {s.dim, s.hidden, s.layers, s.heads, s.kv_heads, s.shared ? s.vocab : -s.vocab, s.seq_len})
    put_i32(b, v);
  for (size_t t = 0; t < 11; ++t) put_f32s(b, w.tensors[t]);
  put_f32s(b, std::vector<float>(size_t(s.seq_len) * size_t(s.dim / s.heads)));  // the RoPE tables
  if (!s.shared) put_f32s(b, w.tensors[11]);
  return b;
}

// Version 1 (group_size 0) or 2 (Q8_0 in groups of group_size, quantized like export.py).
inline std::vector<uint8_t> tiny_versioned(const TinyShape& s, const TinyWeights& w,
                                           int group_size = 0) {
  std::vector<uint8_t> b;
  put_i32(b, 0x616b3432);
  put_i32(b, group_size ? 2 : 1);
  for (int v : {s.dim, s.hidden, s.layers, s.heads, s.kv_heads, s.vocab, s.seq_len}) put_i32(b, v);
  b.push_back(s.shared ? 1 : 0);
  if (group_size) put_i32(b, group_size);
  b.resize(256, 0);
  for (size_t t : {1, 6, 10}) put_f32s(b, w.tensors[t]);
  std::vector<size_t> order = {0, 2, 3, 4, 5, 7, 8, 9};
  if (!s.shared) order.push_back(11);
  for (size_t t : order) {
    // export.py writes each layer's matrix as its own Q8_0 tensor (values, then scales).
    const std::vector<float>& all = w.tensors[t];
    const size_t parts = (t == 0 || t == 11) ? 1 : size_t(s.layers);
    for (size_t part = 0; part < parts; ++part) {
      const size_t n = all.size() / parts;
      const float* v = all.data() + part * n;
      if (!group_size) {
        const auto* bytes = reinterpret_cast<const uint8_t*>(v);
        b.insert(b.end(), bytes, bytes + n * sizeof(float));
        continue;
      }
      std::vector<float> scales;
      for (size_t g = 0; g < n / size_t(group_size); ++g) {
        float m = 0;
        for (int i = 0; i < group_size; ++i) m = std::max(m, std::fabs(v[g * group_size + i]));
        const float sc = m / 127.0f;
        scales.push_back(sc);
        for (int i = 0; i < group_size; ++i)
          b.push_back(uint8_t(int8_t(std::lround(v[g * group_size + i] / sc))));
      }
      for (float sc : scales) put_f32(b, sc);
    }
  }
  return b;
}

// A tokenizer.bin of `vocab` tokens: <unk>, BOS, EOS, the 256 byte tokens, " ", then pairs of
// letters (scores favour longer pieces).
inline std::vector<uint8_t> tiny_tokenizer(int vocab) {
  std::vector<std::string> pieces = {"<unk>", "\n<s>\n", "\n</s>\n"};
  char hex[8];
  for (int i = 0; i < 256; ++i) {
    std::snprintf(hex, sizeof hex, "<0x%02X>", i);
    pieces.push_back(hex);
  }
  pieces.push_back(" ");
  for (char c = 'a'; int(pieces.size()) < vocab && c <= 'z'; ++c)
    pieces.push_back(std::string(1, c));
  for (char c = 'a'; int(pieces.size()) < vocab; c = char(c == 'z' ? 'a' : c + 1))
    pieces.push_back(std::string(" ") + c + std::to_string(pieces.size()));
  pieces.resize(size_t(vocab));
  std::vector<uint8_t> b;
  put_i32(b, 16);
  for (size_t i = 0; i < pieces.size(); ++i) {
    put_f32(b, -float(i));
    put_i32(b, int32_t(pieces[i].size()));
    b.insert(b.end(), pieces[i].begin(), pieces[i].end());
  }
  return b;
}

inline void write_bytes(const std::filesystem::path& p, const std::vector<uint8_t>& b) {
  std::ofstream(p, std::ios::binary)
      .write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}

inline std::filesystem::path llama2c_dir(const std::filesystem::path& testdata) {
  return testdata / "llama2c";
}

// `tinycoral generate CHECKPOINT -z TOKENIZER OPTIONS` with the test data's tokenizer.
inline std::string generate_args(const std::filesystem::path& testdata,
                                 const std::filesystem::path& checkpoint,
                                 const std::string& options) {
  return "generate '" + checkpoint.string() + "' -z '" +
         (llama2c_dir(testdata) / "tokenizer.bin").string() + "' " + options;
}

// The test data's checkpoint `name` (make_checkpoint.py's shapes), made once into a cache folder
// keyed by the script's contents; nullopt (with `why`) if python3 or the script is missing.
inline std::optional<std::filesystem::path> reference_checkpoint(
    const std::filesystem::path& testdata, const std::string& name, std::string& why) {
  const auto script = llama2c_dir(testdata) / "make_checkpoint.py";
  std::ifstream in(script, std::ios::binary);
  if (!in) {
    why = "no " + script.string();
    return std::nullopt;
  }
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto dir = std::filesystem::temp_directory_path() /
                   ("tinycoral_llama2c_" + std::to_string(std::hash<std::string>{}(text)));
  std::filesystem::create_directories(dir);
  const auto out = dir / (name + ".bin");
  if (std::filesystem::exists(out)) return out;
  const auto partial = dir / (name + ".bin." + std::to_string(::getpid()));
  const CommandResult r =
      run_shell("python3 '" + script.string() + "' '" + partial.string() + "' '" + name + "'");
  if (r.exit_code != 0) {
    std::filesystem::remove(partial);
    why = "make_checkpoint.py " + name + " failed (python3 missing?): " + r.err;
    return std::nullopt;
  }
  std::filesystem::rename(partial, out);  // atomic: a parallel test never sees half a file
  return out;
}

// A checkpoint with its tokenizer, as the tests load them.
struct LoadedModel {
  llm::Checkpoint ck;
  llm::Tokenizer tok;
};

// A tiny version-0 checkpoint of `shape` and its tokenizer, written to files and read back through
// the loaders (a folder of their own per call, removed after reading).
inline LoadedModel tiny_model(const TinyShape& shape, const TinyWeights& weights) {
  static int calls = 0;
  const auto dir =
      std::filesystem::temp_directory_path() /
      ("tinycoral_tiny_model_" + std::to_string(::getpid()) + "_" + std::to_string(calls++));
  std::filesystem::create_directories(dir);
  write_bytes(dir / "model.bin", tiny_v0(shape, weights));
  write_bytes(dir / "tokenizer.bin", tiny_tokenizer(shape.vocab));
  LoadedModel model{llm::load_checkpoint(dir / "model.bin"),
                    llm::Tokenizer::load(dir / "tokenizer.bin", shape.vocab)};
  std::filesystem::remove_all(dir);
  return model;
}

// The test data's checkpoint `name` loaded with the test data's tokenizer; nullopt (with `why`)
// as for reference_checkpoint.
inline std::optional<LoadedModel> reference_model(const std::filesystem::path& testdata,
                                                  const std::string& name, std::string& why) {
  const auto path = reference_checkpoint(testdata, name, why);
  if (!path) return std::nullopt;
  llm::Checkpoint ck = llm::load_checkpoint(*path);
  llm::Tokenizer tok =
      llm::Tokenizer::load(llama2c_dir(testdata) / "tokenizer.bin", ck.config.vocab_size);
  return LoadedModel{std::move(ck), std::move(tok)};
}

// Runs `check` on each test checkpoint, rand_gqa then rand15M, traced with its name; without them
// the test is skipped (the caller goes on: call this last, or return when IsSkipped()).
inline void for_each_reference_model(
    const std::filesystem::path& testdata,
    const std::function<void(const std::string& name, const LoadedModel& model)>& check) {
  for (const std::string name : {"rand_gqa", "rand15M"}) {
    SCOPED_TRACE(name);
    std::string why;
    const auto model = reference_model(testdata, name, why);
    if (!model) GTEST_SKIP() << why;
    check(name, *model);
  }
}

}  // namespace tinycoral::testing
