// llama2.c checkpoints (karpathy/llama2.c's run.c, runq.c and export.py formats), read into float32
// weights. Three layouts exist:
//  - version 0 (legacy): 7 int32 (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size,
//    seq_len; a negative vocab_size means the classifier is not the token embedding), then float32
//    arrays in run.c's order, including two unused RoPE tables of seq_len * head_size / 2 each;
//  - version 1: a 256-byte header (magic "ak42", version, the 7 int32, a shared-classifier byte),
//    then float32 arrays: norms first, then the embedding and the layer matrices;
//  - version 2: the same header plus an int32 group size, norms in float32, then every matrix in
//    Q8_0 (int8 values, then one float32 scale per group of group_size values).
// Every size is checked against the file before anything is read: a truncated or inconsistent file
// is a tinycoral::Error naming what does not add up.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace tinycoral::llm {

struct Config {
  int dim = 0;
  int hidden_dim = 0;
  int n_layers = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int vocab_size = 0;  // always positive here
  int seq_len = 0;
  bool shared_classifier = true;

  int head_size() const { return dim / n_heads; }
  int kv_dim() const { return dim / n_heads * n_kv_heads; }
};

// Row-major float32 matrices, one vector per layer: w[l] is [rows][cols] as in y = W x.
struct LayerWeights {
  std::vector<float> rms_att, rms_ffn;  // [dim]
  std::vector<float> wq;                // [dim][dim]
  std::vector<float> wk, wv;            // [kv_dim][dim]
  std::vector<float> wo;                // [dim][dim]
  std::vector<float> w1, w3;            // [hidden][dim]
  std::vector<float> w2;                // [dim][hidden]
};

struct Checkpoint {
  Config config;
  int version = 0;                     // 0, 1 or 2
  int group_size = 0;                  // version 2 only
  std::vector<float> token_embedding;  // [vocab][dim]
  std::vector<LayerWeights> layers;
  std::vector<float> rms_final;   // [dim]
  std::vector<float> classifier;  // [vocab][dim]; empty when shared with token_embedding

  std::span<const float> wcls() const {
    return config.shared_classifier ? std::span<const float>(token_embedding)
                                    : std::span<const float>(classifier);
  }
};

// Parses a whole checkpoint file's bytes; throws tinycoral::Error on anything malformed.
Checkpoint parse_checkpoint(std::span<const uint8_t> bytes);
// Reads and parses a file (errors are prefixed with its path).
Checkpoint load_checkpoint(const std::filesystem::path& path);
// One line describing a checkpoint: version, shapes and parameter count.
std::string describe(const Checkpoint& c);

}  // namespace tinycoral::llm
