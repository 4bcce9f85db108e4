#include "llm/checkpoint.h"

#include <cstring>
#include <limits>

#include "common/error.h"
#include "common/file.h"

namespace tinycoral::llm {

namespace {

constexpr uint32_t kMagic = 0x616b3432;  // "ak42" in a little-endian uint32
constexpr size_t kVersionedHeader = 256;

// Reads the file front to back; every read is checked against what is left.
class Reader {
 public:
  explicit Reader(std::span<const uint8_t> bytes) : bytes_(bytes) {}
  size_t offset() const { return at_; }
  size_t left() const { return bytes_.size() - at_; }
  void seek(size_t offset) { at_ = offset; }
  template <typename T>
  T scalar(const char* what) {
    if (left() < sizeof(T)) fail("truncated: the file ends inside the header (", what, ")");
    T v;
    std::memcpy(&v, bytes_.data() + at_, sizeof v);
    at_ += sizeof v;
    return v;
  }
  std::vector<float> floats(uint64_t n) {
    std::vector<float> v(n);
    std::memcpy(v.data(), bytes_.data() + at_, n * 4);
    at_ += n * 4;
    return v;
  }
  // A Q8_0 tensor: n int8 values then n / group float32 scales, dequantized as runq.c does.
  std::vector<float> q8(uint64_t n, int group) {
    std::vector<float> v(n);
    const auto* q = reinterpret_cast<const int8_t*>(bytes_.data() + at_);
    const uint8_t* scales = bytes_.data() + at_ + n;
    for (uint64_t g = 0; g < n / group; ++g) {
      float s;
      std::memcpy(&s, scales + g * 4, 4);
      for (int i = 0; i < group; ++i) v[g * group + i] = float(q[g * group + i]) * s;
    }
    at_ += n + n / group * 4;
    return v;
  }

 private:
  std::span<const uint8_t> bytes_;
  size_t at_ = 0;
};

void check_config(const Config& c) {
  auto in_range = [](const char* name, int v, int hi) {
    if (v <= 0 || v > hi) fail("bad header: ", name, " is ", v, " (must be 1..", hi, ")");
  };
  in_range("dim", c.dim, 1 << 16);
  in_range("hidden_dim", c.hidden_dim, 1 << 18);
  in_range("n_layers", c.n_layers, 1 << 10);
  in_range("n_heads", c.n_heads, c.dim);
  in_range("n_kv_heads", c.n_kv_heads, c.n_heads);
  in_range("vocab_size", c.vocab_size, 1 << 22);
  in_range("seq_len", c.seq_len, 1 << 20);
  if (c.dim % c.n_heads != 0)
    fail("bad header: dim ", c.dim, " is not a multiple of n_heads ", c.n_heads);
  if (c.n_heads % c.n_kv_heads != 0)
    fail("bad header: n_heads ", c.n_heads, " is not a multiple of n_kv_heads ", c.n_kv_heads);
  if (c.head_size() % 2 != 0)
    fail("bad header: head size ", c.head_size(), " is odd (RoPE rotates pairs)");
  // The KV cache a run needs (two float32 caches) must be allocatable on an ordinary machine.
  const uint64_t kv = uint64_t(c.n_layers) * uint64_t(c.seq_len) * uint64_t(c.kv_dim()) * 8;
  if (kv > (uint64_t{1} << 34))
    fail("bad header: the KV cache for seq_len ", c.seq_len, " would take ", kv >> 20, " MiB");
}

// The number of values in each tensor, in the order the file stores them.
struct Sizes {
  uint64_t emb, dim, qo, kv, ffn, cls;
  explicit Sizes(const Config& c)
      : emb(uint64_t(c.vocab_size) * c.dim),
        dim(c.dim),
        qo(uint64_t(c.dim) * c.dim),
        kv(uint64_t(c.kv_dim()) * c.dim),
        ffn(uint64_t(c.hidden_dim) * c.dim),
        cls(c.shared_classifier ? 0 : emb) {}
  uint64_t matrix_values(int layers) const {
    return layers * (2 * qo + 2 * kv + 3 * ffn) + emb + cls;
  }
  uint64_t norm_values(int layers) const { return uint64_t(layers) * 2 * dim + dim; }
};

void expect_size(uint64_t need, size_t have) {
  if (have < need)
    fail("truncated: the header's shapes need ", need, " bytes, the file has ", have);
  if (have > need)
    fail("inconsistent: the header's shapes need ", need, " bytes, the file has ", have, " (",
         have - need, " left over)");
}

// The seven int32 of every header, in llama2.c's order; returns vocab_size as written (version 0
// stores it negated when the classifier is the checkpoint's own).
int32_t read_shape(Reader& r, Config& c) {
  c.dim = r.scalar<int32_t>("dim");
  c.hidden_dim = r.scalar<int32_t>("hidden_dim");
  c.n_layers = r.scalar<int32_t>("n_layers");
  c.n_heads = r.scalar<int32_t>("n_heads");
  c.n_kv_heads = r.scalar<int32_t>("n_kv_heads");
  const int32_t vocab = r.scalar<int32_t>("vocab_size");
  c.seq_len = r.scalar<int32_t>("seq_len");
  return vocab;
}

Checkpoint parse_v0(Reader& r, size_t file_size) {
  Checkpoint ck;
  Config& c = ck.config;
  const int32_t vocab = read_shape(r, c);
  c.shared_classifier = vocab > 0;
  c.vocab_size = vocab == std::numeric_limits<int32_t>::min() ? 0 : (vocab < 0 ? -vocab : vocab);
  check_config(c);
  const Sizes s(c);
  const uint64_t rope = uint64_t(c.seq_len) * c.head_size();  // two tables of half that
  expect_size(28 + 4 * (s.matrix_values(c.n_layers) + s.norm_values(c.n_layers) + rope), file_size);
  const int L = c.n_layers;
  ck.layers.resize(L);
  ck.token_embedding = r.floats(s.emb);
  for (auto& l : ck.layers) l.rms_att = r.floats(s.dim);
  for (auto& l : ck.layers) l.wq = r.floats(s.qo);
  for (auto& l : ck.layers) l.wk = r.floats(s.kv);
  for (auto& l : ck.layers) l.wv = r.floats(s.kv);
  for (auto& l : ck.layers) l.wo = r.floats(s.qo);
  for (auto& l : ck.layers) l.rms_ffn = r.floats(s.dim);
  for (auto& l : ck.layers) l.w1 = r.floats(s.ffn);
  for (auto& l : ck.layers) l.w2 = r.floats(s.ffn);
  for (auto& l : ck.layers) l.w3 = r.floats(s.ffn);
  ck.rms_final = r.floats(s.dim);
  r.seek(r.offset() + rope * 4);
  if (!c.shared_classifier) ck.classifier = r.floats(s.cls);
  return ck;
}

Checkpoint parse_versioned(Reader& r, size_t file_size) {
  Checkpoint ck;
  ck.version = r.scalar<int32_t>("version");
  if (ck.version != 1 && ck.version != 2)
    fail("unsupported version ", ck.version, " (llama2.c's export.py writes 1 and 2)");
  Config& c = ck.config;
  c.vocab_size = read_shape(r, c);
  const uint8_t shared = r.scalar<uint8_t>("shared classifier flag");
  if (shared > 1) fail("bad header: shared classifier flag is ", int(shared), " (0 or 1)");
  c.shared_classifier = shared == 1;
  if (ck.version == 2) ck.group_size = r.scalar<int32_t>("group size");
  if (file_size < kVersionedHeader) fail("truncated: the file ends inside the 256-byte header");
  check_config(c);
  const Sizes s(c);
  const int L = c.n_layers;
  const uint64_t norms = s.norm_values(L), matrices = s.matrix_values(L);
  const int gs = ck.group_size;
  if (ck.version == 2) {
    if (gs <= 0 || gs > (1 << 20)) fail("bad header: group size ", gs);
    for (uint64_t n : {s.emb, s.qo, s.kv, s.ffn})
      if (n % gs != 0)
        fail("inconsistent: a tensor of ", n, " values is not a whole number of groups of ", gs);
    expect_size(kVersionedHeader + 4 * norms + matrices + matrices / gs * 4, file_size);
  } else {
    expect_size(kVersionedHeader + 4 * (norms + matrices), file_size);
  }
  r.seek(kVersionedHeader);
  ck.layers.resize(L);
  for (auto& l : ck.layers) l.rms_att = r.floats(s.dim);
  for (auto& l : ck.layers) l.rms_ffn = r.floats(s.dim);
  ck.rms_final = r.floats(s.dim);
  auto matrix = [&](uint64_t n) { return ck.version == 2 ? r.q8(n, gs) : r.floats(n); };
  ck.token_embedding = matrix(s.emb);
  for (auto& l : ck.layers) l.wq = matrix(s.qo);
  for (auto& l : ck.layers) l.wk = matrix(s.kv);
  for (auto& l : ck.layers) l.wv = matrix(s.kv);
  for (auto& l : ck.layers) l.wo = matrix(s.qo);
  for (auto& l : ck.layers) l.w1 = matrix(s.ffn);
  for (auto& l : ck.layers) l.w2 = matrix(s.ffn);
  for (auto& l : ck.layers) l.w3 = matrix(s.ffn);
  if (!c.shared_classifier) ck.classifier = matrix(s.cls);
  return ck;
}

}  // namespace

Checkpoint parse_checkpoint(std::span<const uint8_t> bytes) {
  Reader r(bytes);
  const uint32_t first = r.scalar<uint32_t>("magic or dim");
  if (first == kMagic) return parse_versioned(r, bytes.size());
  r.seek(0);
  return parse_v0(r, bytes.size());
}

Checkpoint load_checkpoint(const std::filesystem::path& path) {
  const std::vector<uint8_t> bytes = read_file(path);
  return with_context(path.string(), [&] { return parse_checkpoint(bytes); });
}

std::string describe(const Checkpoint& ck) {
  const Config& c = ck.config;
  const Sizes s(c);
  const uint64_t params = s.matrix_values(c.n_layers) + s.norm_values(c.n_layers);
  return cat("llama2.c version ", ck.version,
             ck.version == 2 ? cat(" (Q8_0, groups of ", ck.group_size, ")") : "", ": dim ", c.dim,
             ", hidden ", c.hidden_dim, ", ", c.n_layers, " layers, ", c.n_heads, " heads (",
             c.n_kv_heads, " kv), vocab ", c.vocab_size, ", seq_len ", c.seq_len,
             c.shared_classifier ? ", shared classifier" : ", own classifier", ", ",
             double(params) / 1e6, "M parameters");
}

}  // namespace tinycoral::llm
