// The llama2.c readers: the three checkpoint formats give the same model, and truncated or
// inconsistent checkpoints and tokenizers are clear errors.
#include <gtest/gtest.h>

#include "common/error.h"
#include "llama2c_files.h"
#include "llm/checkpoint.h"
#include "llm/generate.h"
#include "llm/tokenizer.h"
#include "support/error_of.h"

namespace tinycoral::testing {
namespace {

TEST(Llama2cCheckpoint, VersionsZeroAndOneHoldTheSameWeights) {
  for (bool shared : {true, false}) {
    TinyShape s;
    s.shared = shared;
    const TinyWeights w(s);
    const llm::Checkpoint a = llm::parse_checkpoint(tiny_v0(s, w));
    const llm::Checkpoint b = llm::parse_checkpoint(tiny_versioned(s, w));
    EXPECT_EQ(a.version, 0);
    EXPECT_EQ(b.version, 1);
    EXPECT_EQ(a.config.vocab_size, s.vocab);
    EXPECT_EQ(a.config.shared_classifier, shared);
    EXPECT_EQ(b.config.shared_classifier, shared);
    EXPECT_EQ(a.token_embedding, w.tensors[0]);
    EXPECT_EQ(a.layers[1].wv, b.layers[1].wv);
    EXPECT_EQ(a.layers[0].w2, b.layers[0].w2);
    EXPECT_EQ(a.rms_final, b.rms_final);
    EXPECT_EQ(a.wcls().size(), b.wcls().size());
    EXPECT_TRUE(std::equal(a.wcls().begin(), a.wcls().end(), b.wcls().begin()));
    if (!shared) {
      EXPECT_EQ(std::vector<float>(a.wcls().begin(), a.wcls().end()), w.tensors[11]);
    }
  }
}

TEST(Llama2cCheckpoint, VersionTwoDequantizesQ8Groups) {
  TinyShape s;
  const TinyWeights w(s);
  const llm::Checkpoint q = llm::parse_checkpoint(tiny_versioned(s, w, 8));
  EXPECT_EQ(q.version, 2);
  EXPECT_EQ(q.group_size, 8);
  // Each value within half a step (max|group| / 127 / 2) of the float original.
  const std::vector<float>& orig = w.tensors[7];  // w1
  std::vector<float> all;
  for (const auto& l : q.layers) all.insert(all.end(), l.w1.begin(), l.w1.end());
  ASSERT_EQ(all.size(), orig.size());
  for (size_t g = 0; g < orig.size() / 8; ++g) {
    float m = 0;
    for (size_t i = 0; i < 8; ++i) m = std::max(m, std::fabs(orig[g * 8 + i]));
    for (size_t i = 0; i < 8; ++i) EXPECT_NEAR(all[g * 8 + i], orig[g * 8 + i], m / 127 * 0.51f);
  }
  EXPECT_EQ(q.layers[0].rms_att, llm::parse_checkpoint(tiny_versioned(s, w)).layers[0].rms_att);
}

TEST(Llama2cCheckpoint, EveryTruncationIsAClearError) {
  TinyShape s;
  s.shared = false;
  const TinyWeights w(s);
  for (int version : {0, 1, 2}) {
    const std::vector<uint8_t> full =
        version == 0 ? tiny_v0(s, w) : tiny_versioned(s, w, version == 2 ? 8 : 0);
    for (size_t cut :
         {size_t(0), size_t(3), size_t(20), size_t(100), full.size() / 2, full.size() - 1}) {
      const std::vector<uint8_t> part(full.begin(), full.begin() + std::ptrdiff_t(cut));
      const std::string e = error_of([&] { llm::parse_checkpoint(part); });
      EXPECT_NE(e.find("truncated"), std::string::npos)
          << version << " cut at " << cut << ": " << e;
    }
    std::vector<uint8_t> longer = full;
    longer.push_back(0);
    EXPECT_NE(error_of([&] { llm::parse_checkpoint(longer); }).find("left over"),
              std::string::npos);
  }
}

TEST(Llama2cCheckpoint, InconsistentHeadersAreClearErrors) {
  TinyShape s;
  const TinyWeights w(s);
  const std::vector<uint8_t> v0 = tiny_v0(s, w);
  auto with = [&](std::vector<uint8_t> b, size_t offset, int32_t v) {
    std::memcpy(b.data() + offset, &v, 4);
    return error_of([&] { llm::parse_checkpoint(b); });
  };
  EXPECT_NE(with(v0, 0, 0).find("dim is 0"), std::string::npos);
  EXPECT_NE(with(v0, 0, -5).find("dim is -5"), std::string::npos);
  EXPECT_NE(with(v0, 12, 3).find("not a multiple of n_heads"), std::string::npos);
  EXPECT_NE(with(v0, 16, 3).find("not a multiple of n_kv_heads"), std::string::npos);
  EXPECT_NE(with(v0, 16, 8).find("n_kv_heads is 8"), std::string::npos);
  {
    std::vector<uint8_t> big = v0;
    const int32_t layers = 1024, seq = 1 << 20;
    std::memcpy(big.data() + 8, &layers, 4);
    std::memcpy(big.data() + 24, &seq, 4);
    EXPECT_NE(error_of([&] { llm::parse_checkpoint(big); }).find("KV cache"), std::string::npos);
  }
  EXPECT_NE(with(v0, 20, INT32_MIN).find("vocab_size"), std::string::npos);
  // A larger layer count than the file holds: the sizes do not add up.
  EXPECT_NE(with(v0, 8, 3).find("truncated"), std::string::npos);
  const std::vector<uint8_t> v2 = tiny_versioned(s, w, 8);
  EXPECT_NE(with(v2, 4, 3).find("unsupported version 3"), std::string::npos);
  EXPECT_NE(with(v2, 37, 0).find("group size 0"), std::string::npos);
  EXPECT_NE(with(v2, 37, 7).find("groups of 7"), std::string::npos);
}

TEST(Llama2cTokenizer, EncodesLikeRunC) {
  const llm::Tokenizer t = llm::Tokenizer::parse(tiny_tokenizer(300), 300);
  // BOS, the " " prefix, then letters; unknown bytes fall back to <0xNN> = byte + 3.
  const std::vector<int> ids = t.encode("ab\x01");
  ASSERT_EQ(ids.size(), 5u);
  EXPECT_EQ(ids[0], llm::kBos);
  EXPECT_EQ(t.piece(ids[1]), " ");
  EXPECT_EQ(t.piece(ids[2]), "a");
  EXPECT_EQ(t.piece(ids[3]), "b");
  EXPECT_EQ(ids[4], 1 + 3);
  EXPECT_EQ(t.encode(""), std::vector<int>{llm::kBos});
  EXPECT_EQ(t.decode(5, 3 + 'A'), "A");     // <0x41>
  EXPECT_EQ(t.decode(5, 3 + 1), "");        // an unprintable byte prints nothing
  EXPECT_EQ(t.decode(llm::kBos, 259), "");  // " " after BOS loses its space
}

TEST(Llama2cTokenizer, MergesTheBestScoringPair) {
  // A real merge: " the" scores best, then " t" + "he"...: use the test data's tokenizer.
  TINYCORAL_REQUIRE_TESTDATA(data);
  const llm::Tokenizer t = llm::Tokenizer::load(llama2c_dir(data) / "tokenizer.bin", 32000);
  const std::vector<int> ids = t.encode("Once upon a time");
  // SentencePiece's Llama 2 ids for this sentence (BOS, "▁Once", "▁upon", "▁a", "▁time").
  EXPECT_EQ(ids, (std::vector<int>{1, 9038, 2501, 263, 931}));
  EXPECT_EQ(t.max_token_length(), 27);
}

TEST(Llama2cTokenizer, MismatchedOrTruncatedFilesAreClearErrors) {
  const std::vector<uint8_t> good = tiny_tokenizer(300);
  EXPECT_NE(error_of([&] { llm::Tokenizer::parse(good, 301); }).find("truncated"),
            std::string::npos);
  EXPECT_NE(error_of([&] { llm::Tokenizer::parse(good, 299); }).find("does not match"),
            std::string::npos);
  for (size_t cut : {size_t(0), size_t(2), size_t(6), good.size() - 1}) {
    const std::vector<uint8_t> part(good.begin(), good.begin() + std::ptrdiff_t(cut));
    EXPECT_NE(error_of([&] { llm::Tokenizer::parse(part, 300); }).find("truncated"),
              std::string::npos)
        << cut;
  }
  std::vector<uint8_t> zero_max = good;
  zero_max[0] = 0;
  EXPECT_NE(error_of([&] { llm::Tokenizer::parse(zero_max, 300); }).find("max_token_length"),
            std::string::npos);
  std::vector<uint8_t> too_long = good;
  too_long[0] = 3;  // "<unk>" is 5 bytes
  EXPECT_NE(error_of([&] { llm::Tokenizer::parse(too_long, 300); }).find("longer than"),
            std::string::npos);
  // A vocabulary without the " " piece cannot encode a prompt.
  const llm::Tokenizer small = llm::Tokenizer::parse(tiny_tokenizer(200), 200);
  EXPECT_NE(error_of([&] { small.encode("x"); }).find("no \" \" token"), std::string::npos);
}

TEST(Llama2cGenerate, PromptsLongerThanSeqLenAreRefused) {
  TinyShape s;
  const llm::Checkpoint ck = llm::parse_checkpoint(tiny_v0(s, TinyWeights(s)));
  const llm::Tokenizer t = llm::Tokenizer::parse(tiny_tokenizer(s.vocab), s.vocab);
  llm::ThreadPool pool(1);
  llm::Transformer model(ck, pool);
  llm::Sampler sampler(0.0f, 0.9f, 1);
  const auto ignore = [](const std::string&) {};
  // 31 single-letter tokens + BOS + " " = 33 > seq_len 32.
  const std::string long_prompt(31, 'q');
  EXPECT_NE(error_of([&] {
              llm::generate(model, t, sampler, long_prompt, 0, ignore);
            }).find("more than seq_len 32"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              llm::generate(model, t, sampler, std::string(5000, 'q'), 0, ignore);
            }).find("cannot fit"),
            std::string::npos);
  // 30 letters fit exactly: the run is the prompt, seq_len positions.
  const llm::GenerateResult r = llm::generate(model, t, sampler, std::string(30, 'q'), 0, ignore);
  EXPECT_EQ(r.positions, 32);
  EXPECT_EQ(r.prompt_tokens, 32);
}

// The fuzzer's seeds (tests/data/fuzz/llama2c_fuzz/, first byte odd: a checkpoint; even: a
// tokenizer whose vocabulary size - 1 is the next two bytes) must parse, so that fuzzing starts
// from valid files of every format.
TEST(Llama2cFuzzSeeds, EverySeedParses) {
  int count = 0;
  for (const auto& e :
       std::filesystem::directory_iterator(source_dir() / "tests/data/fuzz/llama2c_fuzz")) {
    SCOPED_TRACE(e.path().string());
    std::ifstream in(e.path(), std::ios::binary);
    const std::vector<uint8_t> b((std::istreambuf_iterator<char>(in)),
                                 std::istreambuf_iterator<char>());
    ASSERT_GE(b.size(), 3u);
    const std::span<const uint8_t> rest(b.data() + 3, b.size() - 3);
    if (b[0] & 1)
      EXPECT_NO_THROW(llm::parse_checkpoint(rest));
    else
      EXPECT_NO_THROW(llm::Tokenizer::parse(rest, 1 + (b[1] | (b[2] << 8))));
    ++count;
  }
  EXPECT_EQ(count, 4);
}

}  // namespace
}  // namespace tinycoral::testing
