// The chip path, step a (issue 14, 5a): every layer matmul runs on an Edge TPU (the virtual one or
// a real stick) as a FULLY_CONNECTED program our code generator writes, with all layers' weights
// resident in tile memory; the rest runs on the host exactly as the int8 path does. The programs
// compute the int8 path's arithmetic (int8_model.h), so both write the same text.
//
// Shapes: K is padded to a multiple of 64 with zero weight columns (the padded inputs then add
// nothing), N is cut into programs of at most 2048 outputs; matmuls of the same input (q, k, v;
// w1, w3) share one program when they fit in 32 groups together, each group with its matmul's own
// output stage (fewer runs per token: stories15M's 42 matmuls are 24 programs). Each program's
// output groups go to the least-filled tiles, each at its tile's first free wide unit
// (FcPlacement), and every caching program runs once at construction. K > 1024 (past the FC
// generator's input scatter) runs as a one-row batched FC program (compiler/fc_batch_codegen.h)
// over the same parameters. A matmul whose weights no longer fit in tile memory runs on the host
// in the same arithmetic; stats() counts them, so callers can say so. The classifier stays on the
// host in float32 (docs/llm.md). With Int8Options::chip_scores, attention's scores of each layer
// run on the chip too, the int8 keys resident and written as tokens arrive (issue 14 step d's
// start). With WeightedSum::kValueCache, each layer's weighted sum is a program too
// (llm/value_sum.h), its weights the v~ cache, the new column and the multipliers streamed per
// token by the program itself; with the scores on the chip too, the sum runs inside the scores'
// program (e and the multipliers handed from the scalar core to the tiles); wo then runs on the
// host. With the scores on the chip, RoPE and RMSNorm on the chip and the key's column written by
// the program (--scores-on-chip --chip-rope --chip-rms --key-column-write), each layer's scores
// run inside the program before them (join step 4, docs/llm.md: one run for both, the key's
// products moved on the chip; stats().joined_layers counts the layers joined). With
// Int8Options::chip_residual the programs computing q, k and v return v~ (wv's output stage with
// the multipliers f32(v_base_j r), compiler::FcChainAfterR) in v's place, which the host's value
// cache takes (stats().value_tilde_layers); the residual adds around attention and the FFN's
// RMSNorm run on the host in the int8 path's arithmetic; with the value cache on the chip each
// layer's joined program also writes v~ into the cache and runs the weighted sum (and wo).
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compiler/fc_batch_codegen.h"
#include "compiler/fc_layer.h"
#include "llm/group_program.h"
#include "llm/int8_model.h"
#include "llm/matmul_plan.h"
#include "runtime/edgetpu.h"
#include "runtime/stick_time.h"

namespace tinycoral::llm {

struct ChipPathStats {
  int chip_matmuls = 0, host_matmuls = 0;  // per layer stack (one forward pass)
  int programs = 0;                        // execution programs per forward pass
  int fused_ffns = 0;                      // layers whose whole FFN is one program
  int scores_layers = 0;   // layers whose attention scores run on the chip (Int8Options)
  int softmax_layers = 0;  // of them, with the softmax on the scalar core in that program
  // Of them, with the new key's column written by the chip (Int8Options::chip_key_write).
  int key_write_layers = 0;
  int chained_layers = 0;  // of them, with the residual add and the next q, k, v (fused_layers)
  // Of them, with RMSNorm's scale r of the add's bytes computed in that program on the scalar
  // core and returned (Int8Options::chip_rms; compiler::FcChainRms).
  int rms_layers = 0;
  // Layers whose v~ (Int8Options::chip_residual) the program computing their v returns in v's
  // place, its groups waiting for r (compiler::FcChainAfterR).
  int value_tilde_layers = 0;
  // Layers whose RoPE products (Int8Options::chip_rope) the program computing q and k computes.
  int rope_layers = 0;
  // Layers whose RoPE sum of q (q~) runs in the scores' program, before the scores.
  int rope_sum_layers = 0;
  // Of them, with the key's sum there too, written into the key's column by that program.
  int key_sum_layers = 0;
  int key_sum_groups = 0;  // the key's output groups in those sums (kv_dim's, or per kv head)
  // Of the RoPE sum layers, those whose program makes the sum's multipliers from r (chip_rms).
  int rope_mult_layers = 0;
  // Of them, reading q's products from the resident rows where the program computing q left them
  // (Int8Options::keep_rope_products): those products never cross USB.
  int rope_kept_layers = 0;
  // Bytes of the input rows of the scores' programs that run the softmax (the count included) in
  // one forward pass.
  int scores_row_bytes = 0;
  int rope_tables = 0;       // RoPE table pairs built for the programs' inputs (once per token)
  int value_sum_layers = 0;  // layers whose weighted sum (WeightedSum::kValueCache) is a program
  // Of them, with the weighted sum inside the scores' program (scores, softmax, sum: one run).
  int attention_layers = 0;
  int wo_layers = 0;  // of them, with wo after the sum in that program (it returns o)
  // Of resident_bytes, those wo groups' (64 x (8 + weight_k) a group: the heads side by side,
  // K = n_heads x head_size, where head_size allows).
  int64_t wo_resident_bytes = 0;
  // Layers whose scores and softmax (with the RoPE sums and the key's column) run inside the
  // previous layer's chain (compiler::generate_ffn_chain_softmax): one run for both.
  int joined_layers = 0;
  // Of them, the last layer's: its rest after wo and its FFN in that program too
  // (Int8Options::join_layers; compiler::FcLayerRest): its FFN's own run goes.
  int rest_layers = 0;
  // Layers whose joined program runs behind the previous layer's rest in that layer's program
  // (Int8Options::layers_per_run; compiler::FcLayerRest::next): one run less a token each.
  int composed_layers = 0;
  // Of the placed rests' add and norm groups, those reading a byte-identical weight block another
  // group keeps on their tile (ChipTransformer::place_rest): their aux rows alone are theirs.
  int rest_shared_groups = 0;
  int64_t resident_bytes = 0;  // parameter bytes cached in tile memory
  int max_tile_units = 0;      // the fullest tile's parameter units (of 8192)
  // Each tile's parameter units (TileAllocator::fills): the units past them are its free run.
  std::array<int, kPlanTiles> tile_units{};
  // Of them, q's kept products' rows: one on each tile that computes some layer's q with them.
  int rope_kept_rows = 0;
  std::string host_reason;  // why the first host matmul is not on the chip
  // Modeled stick time (runtime/stick_time.h) summed over every execution run so far, and the
  // one-time parameter caching.
  runtime::StickTime modeled, caching;
  int runs = 0;
  uint64_t bytes_to_device = 0, bytes_from_device = 0;  // over those runs (instructions included)
  double chip_wall_s = 0;  // wall time inside EdgeTpu::run (the simulation, on --device sim)
  // Of it, the host's time preparing the programs that write the key in the scores' run (the
  // scores' own with the softmax, the attention program, the joined one) past the constructor:
  // rewriting their position's fields (all are generated in the constructor).
  double key_program_build_s = 0;
  // Those programs generated that run (one per layer and 64-position group, in the constructor;
  // a layer behind a composed layer's rest none).
  int key_programs = 0;
  // Of them, the joined ones that run (in the constructor: one per joined layer and 64-position
  // group, a layer behind a composed layer's rest none: its head's carry it).
  int joined_programs = 0;
  // The instruction bytes the joined programs' runs sent, by part (compiler::Emitter::part), in
  // the order the parts first came; docs/llm.md "Where a token's bytes go".
  std::vector<std::pair<std::string, uint64_t>> joined_part_bytes;
};

// With late_wo, where the first placement leaves the last layer's rest off the chip (`plain`), the
// placement again with that layer's wo and rest first (`early`) is kept only where it has the rest
// on the chip and no fewer joined layers and layers keeping q's products (totals: the two
// placements could trade one layer's join for another's, which this does not see).
bool keep_early_placement(const ChipPathStats& plain, const ChipPathStats& early);

class ChipTransformer : public Int8Transformer {
 public:
  // `tpu` must outlive the transformer; its tile memory is filled with the layers' weights here.
  // With options.fused_layers, a layer's FFN, the residual add and the next layer's q, k, v run
  // as one program where they fit (compiler::generate_ffn_chain; issue 14 step c).
  ChipTransformer(const Checkpoint& ck, ThreadPool& pool, const Calibration& calibration,
                  runtime::EdgeTpu& tpu, Int8Options options = {});
  ~ChipTransformer() override;
  const ChipPathStats& stats() const { return stats_; }
  // Tests only (null otherwise): called before each joined program with a rest is generated, with
  // the rests it carries (add and norm placed); a throw there is the generator's refusal.
  static inline void (*rest_check_for_tests)(const std::vector<const compiler::FcLayerRest*>&) =
      nullptr;

 protected:
  void matmul_q(int layer, LayerMatmul m, const int8_t* xq, int8_t* yq) override;
  void ffn_q(int layer, const int8_t* xq, int8_t* yq) override;
  void qkv_q(int layer, const int8_t* xq, int8_t* q, int8_t* k, int8_t* v) override;
  void ffn_add_q(int layer, const int8_t* xq, const int8_t* x2q, int8_t* yq, int8_t* next) override;
  void values_q(int layer, const int8_t* v, int8_t* u) override;
  void scores_q(int layer, int pos, const int8_t* q8, int8_t* scores) override;
  void softmax_q(int layer, int pos, const int8_t* q8, uint8_t* e, float* inv_sum) override;
  void value_sum_q(int layer, int pos, const uint8_t* e, const float* inv_sum, int8_t* a) override;
  void wo_q(int layer, const int8_t* a, int8_t* o) override;
  void qkv(int layer, int pos, const float* x, float* q, float* k, float* v) override;
  void rope_products_q(int layer, int pos, const int8_t* q, const int8_t* k, int8_t* p1,
                       int8_t* p2) override;
  void rope_sum_q(int layer, int pos, float r, const int8_t* p1, const int8_t* p2,
                  int8_t* q_rot) override;
  // chip_rms: r as the previous layer's chain computed it where it did (rms_layers).
  float rms_scale_q(int layer, const int8_t* xq, const float* x) override;
  // chip_residual: v~ as the program computing q, k and v returned it in v's place where its v
  // groups waited for r (v_tilde_layer_), else the host's.
  void value_tilde_q(int layer, const int8_t* xq, const int8_t* v, float r,
                     int8_t* v_tilde) override;

 private:
  struct Program;
  struct MatmulPlan;
  struct FfnProgram;
  bool fuse_ffn(int layer, TileAllocator& tiles);
  bool chain_ffn(int layer, TileAllocator& tiles, bool with_values);
  bool first_layer(TileAllocator& tiles, bool with_values);
  struct ScoresProgram;
  bool scores_program(int layer, TileAllocator& tiles);
  std::shared_ptr<runtime::Program> scores_caching(const ScoresProgram& p) const;
  // The program that writes the keys of the 64-position group holding `pos` (current bytes).
  std::shared_ptr<runtime::Program> key_write(ScoresProgram& p, int pos) const;
  // The groups holding `pos` in every head, as a layer and placement of their own.
  compiler::FcParameterWrite key_part(const ScoresProgram& p, int pos) const;
  // Layer `layer`'s key of `pos` into the scores program's weights (on the host), and with
  // write_key on the chip too (a caching run).
  void add_key(ScoresProgram& p, int layer, int pos);
  // chip_rope: q's RoPE sum in front of the scores (compiler::FcScoresInput) where it fits: its
  // layer and placement, its input row from the products stashed by rope_sum_q, and its
  // per-token multiplier rows f32(base_j r).
  bool rope_sum_program(int layer, ScoresProgram& p, TileAllocator& tiles);
  // With chip_key_write: the key's sum in that FC too, its bytes the key's column (no key from
  // the host), where tile memory and the generator take it.
  bool key_sum_program(int layer, ScoresProgram& p, TileAllocator& tiles);
  // keep_rope_products: the program computing `layer`'s q leaves q's products in a resident row
  // of each of its tiles and the layer's scores' program reads them there (FcScoresInput::
  // resident), where the rows fit and both programs generate; else false and nothing changes.
  bool keep_rope_products(int layer, ScoresProgram& s, TileAllocator& tiles);
  // The tile and byte in its block of products (compiler::fc_product_bytes) of each of q's groups
  // of `layer` where the program computing them does (empty: none).
  std::vector<std::pair<int, int>> q_product_places(int layer) const;
  // The resident row of each tile that holds kept products (one layer's at a time: a layer's
  // scores read them before the next layer's are computed), -1: none.
  std::array<int, kPlanTiles> kept_rows_ = filled(-1);
  // The last run that left products in kept_rows_, to run again (before their reader) after a
  // recovery emptied tile memory.
  struct KeptRun {
    std::shared_ptr<runtime::Program> program;
    std::vector<int8_t> in;
    int recoveries = 0;  // tpu_.recoveries() after the run: a later recovery emptied the rows
  };
  KeptRun kept_run_;
  // The RoPE sums' one copy of their weights per tile, for every layer's groups (wide unit of the
  // copy's block, -1: none on that tile; rope_sum.h).
  std::array<int, kPlanTiles> rope_copies_ = filled(-1);
  static constexpr std::array<int, kPlanTiles> filled(int v) {
    std::array<int, kPlanTiles> a{};
    a.fill(v);
    return a;
  }
  // Bytes a sum's `groups` (with their constants' rows: base_rows) and the copies it added
  // (`copies` against rope_copies_) keep resident.
  int64_t rope_resident_bytes(int groups, bool base_rows,
                              const std::array<int, kPlanTiles>& copies) const;
  // The copies and every layer's sum groups' aux rows in one caching program (null: no sums).
  std::shared_ptr<runtime::Program> rope_caching() const;
  // joined_layers: the program before layer `layer`'s scores (the previous layer's chain, or
  // layer 0's q, k, v program) and the scores and softmax as one program per 64-position group,
  // where that program keeps every q group's products (and past layer 0 computes r), and the
  // scores' program computes the key and writes its column with its multipliers from r (no value
  // cache); built at the first position of every group, else false and nothing changes (the two
  // programs run apart). With chip_residual and the value cache (the attention program built:
  // ValueSumProgram::joined) the program also writes the program before's v~ into the cache
  // (compiler::FcChainValueWrite, each cache group's staging row taken from `tiles`) and runs the
  // weighted sum (and wo) after the softmax, returning a (or o) instead of e and 1 / S.
  bool join_scores(int layer, TileAllocator& tiles);
  // join_layers: the rest of `layer` (the last) after its joined program's wo, and its FFN, into
  // joined_[layer].rest, the add and the norm placed on `tiles`; false (nothing placed) where
  // the layer has no wo on the chip, no FFN program, or the groups do not fit.
  // (`two_a_tile`: place_rest's; Joined::two_a_tile tells whether a tile took a second group.)
  bool layer_rest(int layer, TileAllocator& tiles, bool two_a_tile = true);
  // The last layer's wo (its heads' bytes side by side, as every layer's: wo_after_sum in
  // chip_model.cpp) and rest placed before the attention's other placements; false (nothing
  // placed) where the heads cannot sit side by side or the groups do not fit. join_attention and
  // layer_rest take them. (`two_a_tile`: place_rest's.)
  struct RestPlacement {
    compiler::FcPlacement add_at, norm_at;
    // A tile took a second group of one FC (which place_rest's two_a_tile alone allows): only
    // then can placing again without two_a_tile change the layout.
    bool two_a_tile = false;
  };
  bool early_rest(TileAllocator& tiles, bool two_a_tile = true);
  std::optional<compiler::FcPlacement> early_wo_;
  std::optional<RestPlacement> early_rest_;
  // join_scores found the generator refusing early_rest_ where it put two groups of one FC on a
  // tile: the constructor places everything again with early_rest's two_a_tile false.
  bool early_rest_refused_ = false;
  // Layer `layer`'s rest's add and norm (residual_add_layer, rms_input_layer) placed on `tiles`,
  // for early_rest and layer_rest alike: each group's aux rows (compiler::kFcAuxUnits, a bias's
  // row more for the add) on a tile of its own (at most one of the FC's groups a tile), its
  // weights read (FcPlacement::weight_units) from a byte-identical block already resident on
  // that tile (rest_blocks: the norms' identity blocks, one layer's add blocks) where one is,
  // those tiles preferred; else a whole group (aux rows, then its weights: the new copy). With
  // `two_a_tile` a group may join another group of the same FC on a tile whose copy it reads (the
  // add's full groups of one layer are one block, and so are the norm's with positive gains): two
  // groups a tile there (their ops one after the other); callers place again without where the
  // generator refuses that. False (nothing placed) where a group does not fit.
  bool place_rest(int layer, TileAllocator& tiles, RestPlacement& at, bool two_a_tile = true) const;
  // The rests' weight blocks resident on the tiles: each group that holds its own weights (an
  // owner: weight_units -1) of every placed rest (the last layer's with_rest, the composed ones),
  // with its tile, the wide unit of its weights and their bytes (fc_parameters').
  struct RestBlock {
    int tile = 0, unit = 0;
    std::vector<uint8_t> bytes;
  };
  std::vector<RestBlock> rest_blocks() const;
  // The placed rests' caching: the owners' whole groups (at most two a tile per program: the
  // compiler's FC geometry takes no more groups on a tile; it takes two where their units do not
  // overlap), the sharing groups' aux rows as rows; empty without a rest. Built once the placement
  // is final (the constructor's end) into rest_caching_, which cache_all runs.
  std::vector<std::shared_ptr<runtime::Program>> rest_caching() const;
  std::vector<std::shared_ptr<runtime::Program>> rest_caching_;
  // The resident rows of layer `layer`'s rest's norm constants (FcLayerRest::norm_const_units;
  // none where its rest is not in a program), which wo's caching program writes.
  compiler::FcRowWrite rest_constants(size_t layer) const;
  // Bytes a rest's add and norm keep resident: an owner's whole group, a sharing group's aux rows.
  static int64_t rest_resident_bytes(const compiler::FcLayerRest& rest);
  // fn(layer, placement) for a rest's add and norm; for those of every placed rest (the last
  // layer's with_rest, the composed ones), in layer order.
  template <class Fn>
  static void for_each_rest_fc(const compiler::FcLayerRest& rest, Fn&& fn) {
    fn(rest.add, rest.add_at);
    fn(rest.norm, rest.norm_at);
  }
  template <class Fn>
  void for_each_placed_rest_fc(Fn&& fn) const {
    for (const Joined& j : joined_)
      if (j.with_rest || j.composed) for_each_rest_fc(j.rest, fn);
  }
  // D.2/D.3 (layers_per_run != 1): for each boundary l = 0..L-2 in order, layer l's rest (no
  // FFN) and behind it layer l+1's joined program (compiler::FcLayerRest::next) in the program of
  // the layer heading them (head_of): one run less a token each. Where a boundary does not fit or
  // generate, or would put more than Int8Options::layers_per_run (> 0) layers in one program, that
  // layer is restored and the next layer's program runs apart. Returns the boundaries composed.
  int compose(TileAllocator& tiles);
  // Where a joined program's outputs lie (found by name): the chain's, r's, the sum's (or wo's),
  // y's (-1: none).
  struct JoinedOutputs {
    int chain = 0, r = 1, sum = 2, y = -1;
  };
  // The last composed run (a head's, pos_ its position), which the seams of the layers behind
  // its head take their outputs from.
  std::shared_ptr<runtime::Program> composed_program_;
  int composed_pos_ = -1;
  struct Joined {
    // [pos / 64] the program of one 64-position group, generated at its first position, its key
    // column write's scatter addresses marked (joined_run rewrites them to pos), with `values` the
    // value write's landings and rows too; empty: not joined.
    std::vector<GroupProgram> groups;
    // The program writes v~ into the value cache and returns the weighted sum (or wo's o).
    bool values = false;
    // Per RoPE sum group, the product group of the program before it reads on the chip (-1: a q
    // group reading its kept row).
    std::vector<int> moved;
    // The layer's rest and its FFN after wo (layer_rest), y the program's last output; the
    // rest's add and norm placed (place_rest) and cached (rest_caching()).
    bool with_rest = false;
    compiler::FcLayerRest rest;
    // The rest's placement put two groups of one FC on a tile (RestPlacement::two_a_tile).
    bool two_a_tile = false;
    // compose: the layer's rest (`rest`, no FFN) and layer + 1's program behind it, in the
    // program of head_of(layer) (whose groups carry them all; layer + 1's own groups are dropped).
    bool composed = false;
    // In a composed program (of head_of(layer)): this layer's outputs in it, found by name.
    JoinedOutputs out;
  };
  std::vector<Joined> joined_;  // [layer of the scores]
  // join_scores joined `layer`'s scores to the program before (its own groups, or behind a
  // composed layer's rest: its head's; false past the last layer).
  bool is_joined(int layer) const;
  // The first layer of the program that computes `layer`'s joined part (itself unless the
  // layer before is composed).
  int head_of(int layer) const;
  // The group program of the group starting at `first` (composed: with the layers behind it).
  GroupProgram joined_program(int layer, int first) const;
  // Those of every 64-position group, in order (join_scores, compose).
  std::vector<GroupProgram> joined_groups(int layer) const;
  // The output names of a layer's joined program (a layer behind a head: names of its own).
  struct JoinedNames {
    std::string chain, r, sum, y;
  };
  JoinedNames joined_names(int layer) const;
  // A layer's arguments of the generator at `first`, kept while it generates.
  struct JoinedParts;
  void joined_parts(int layer, int first, JoinedParts& p) const;
  // `g` rewritten to pos (group_program.h), the host's time in stats_.key_program_build_s.
  const std::shared_ptr<runtime::Program>& rewritten(const GroupProgram& g, int pos);
  // The programs of every 64-position group of `layer`'s scores (or its
  // attention program) where they run apart from the program before: as the joined ones, each
  // generated at its group's first position and rewritten to each run's.
  void key_group_programs(int layer);
  // The joined program of `layer` at pos_ (its group's, the column rewritten to pos_ % 64), and
  // its input: the count block (with r at layer 0) after the program before's `in_bytes` (which
  // become the whole input's).
  std::shared_ptr<runtime::Program> joined_run(int layer, int8_t* in, int& in_bytes, float r);
  // That program's output `output` (e and 1 / S) into e_stash_ for softmax_q, or with the value
  // cache joined (Joined::values) the sum's (or wo's) bytes into the layer's ValueSumProgram::a
  // for value_sum_q and wo_q.
  void stash_softmax(int layer, const runtime::Program& program, int output);
  // y of `layer`'s FFN, computed inside a joined run (its rest's FFN): ffn_q takes it.
  void stash_ffn(int layer, const runtime::Program& program, int output);
  // The value write of layer `layer`'s joined program generated at `first`: its cache, staging
  // rows and the program before's v~ groups (the follower `follower` of its chain).
  compiler::FcChainValueWrite value_write(int layer, int first) const;
  // The staging rows of `p` (compiler::FcValueWrite) holding the host's copy of the cache's quad
  // of pos_ (position 4 (pos_ / 4) + b at bytes 64 b ..): what a caching run writes after a
  // recovery, so that the next transposing write finds the quad's earlier positions there.
  struct ValueSumProgram;
  compiler::FcRowWrite staging_rows(const ValueSumProgram& p) const;
  // e and 1 / S of layer e_stash_layer_ at e_stash_pos_, as the joined run before its softmax_q
  // returned them.
  std::vector<uint8_t> e_stash_;
  int e_stash_layer_ = -1, e_stash_pos_ = -1;
  // y of layer ffn_stash_layer_'s FFN at ffn_stash_pos_, as the joined run with the rest
  // returned it (ffn_q hands it over instead of running).
  std::vector<int8_t> ffn_stash_;
  int ffn_stash_layer_ = -1, ffn_stash_pos_ = -1;
  // The layer's position-0 program with the sum in front, built as a trial (a rejected
  // multipliers-from-r form once more with the host's rows, mult_base cleared); false if rejected.
  bool first_sum_program(int layer, ScoresProgram& p);
  std::vector<int8_t> scores_row(const ScoresProgram& p, int layer, int pos, const int8_t* q8);
  // The RoPE sum's multiplier rows for this token's r, none where the program makes them.
  compiler::FcRowWrite rope_multipliers(const ScoresProgram& p, int layer) const;
  // With chip_rms, the sum's constants base_j into p.rope_sum: the program forms f32(base_j r)
  // from the r in its input row (scores_row); and the form it takes (base_rows: the loop over
  // resident constants where compiler::fc_multipliers_loop_pays), before the groups are placed.
  void rope_multipliers_from_r(ScoresProgram& p, int layer) const;
  // The scores' and softmax's program of `layer` (one per 64 positions) streaming the key of
  // `pos` first (its groups, or with chip_key_write its column, the scatters' addresses marked),
  // and with the RoPE sum in front `mults` after it: key_group_programs (in the constructor) and
  // first_sum_program's trial build it here, so they cannot drift apart.
  GroupProgram softmax_program(int layer, const ScoresProgram& p, int pos,
                               const compiler::FcRowWrite& mults) const;
  // The key's write of `pos` as the programs take it: chip_key_write (the chip writes the column
  // into the groups holding pos, its scatters' addresses marked fields) or the groups holding pos
  // streamed whole. Either way (and with the v~ row's address marked) one program per 64-position
  // group, rewritten to each run's position (group_program.h).
  compiler::FcColumnWrite key_column(const ScoresProgram& p, const compiler::FcParameterWrite& key,
                                     int pos) const;
  // The parameters the key's write takes, in front of the program's other parameters.
  std::vector<uint8_t> key_parameters(const ScoresProgram& p, int pos) const;
  std::vector<int8_t> rope_q_p1_, rope_q_p2_;
  float rope_r_ = 0;
  int rope_sum_layer_ = -1, rope_sum_pos_ = -1;
  void write_key(ScoresProgram& p, int layer, int pos);
  std::vector<ScoresProgram>
      scores_;  // [layer]; without a program where the scores are on the host
  // WeightedSum::kValueCache: the weighted sum of one layer as an FC program (llm/value_sum.h).
  bool value_sum_program(int layer, TileAllocator& tiles);
  std::vector<ValueSumProgram> value_sums_;  // [layer]; empty where it runs on the host
  // The weighted sum joined to the layer's scores and softmax (compiler::
  // generate_fc_batch_attention) where both are on the chip and scalar memory holds it all, and
  // wo after it where its weights fit in tile memory.
  bool join_attention(int layer, TileAllocator& tiles, bool with_wo);
  // wo after the sum of a layer joined without it, where it fits now (tile memory and the
  // attention program): the chains' joins place their RoPE sums and kept products before wo.
  bool join_wo(int layer, TileAllocator& tiles);
  // The attention program's inputs and parameters for `pos`, and its run: wo's input into `a`.
  void attention_q(int layer, int pos, const int8_t* q8);
  // The attention program's weight rows of v~ for positions 4 unit .. 4 unit + 3, and with the RoPE
  // sum in front this token's multiplier rows after them.
  compiler::FcRowWrite attention_values(int layer, const ScoresProgram& s, const ValueSumProgram& p,
                                        int unit) const;
  // The attention program of `layer` (one per 64-position group, its v~ rows and with
  // chip_key_write its column marked) with pos's key and `values` as its parameters:
  // every place that makes one builds it here, so they cannot drift apart.
  GroupProgram attention_program(int layer, const ScoresProgram& s, const ValueSumProgram& p,
                                 int pos, const compiler::FcRowWrite& values) const;
  // chip_rope: RoPE's products of layer `layer`'s q and k inside the program computing them
  // (compiler::FcTableProducts over its layer `rope_layer`), the tables of `pos` as that program's
  // input after its own `at` bytes, from the next whole 256 (rope_input returns the bytes it wrote
  // from `at`), and the products it returns (after everything else, 128 bytes per q and k group)
  // into rope_p1_ and rope_p2_ for rope_products_q.
  compiler::FcTableProducts rope_of(int layer, int rope_layer,
                                    const std::array<int, 3>& qkv_at) const;
  int rope_input(int pos, int8_t* in, int at);
  // rope_input's two tables of position rope_tables_pos_, piece by piece (built once per token).
  std::vector<int8_t> rope_tables_;
  int rope_tables_pos_ = -1;
  // chip_rope on the chip path: the programs computing q and k try RoPE's products too.
  bool want_rope() const { return options().chip_rope && weights()->chip_attention(); }
  // The products' bytes a program computing `products` returns: 128 per group not kept on the
  // chip (FcProductGroup::keep).
  int rope_output_bytes(const compiler::FcTableProducts& products) const;
  // rope_p1_ and rope_p2_ from what the program returned (zeros where the groups stayed on the
  // chip: the scores' program reads those there).
  void rope_output(int layer, int pos, const int8_t* out,
                   const compiler::FcTableProducts& products);
  // q, k, v of `layer` as a program returned them (`out`; with `rope` v's groups alone) into
  // stash_ at their places `at` in the q, k, v layer's `outputs` bytes.
  void stash_qkv(int layer, bool rope, const int8_t* out, const std::array<int, 3>& at,
                 int outputs);
  std::vector<int8_t> rope_p1_, rope_p2_;
  int rope_layer_ = -1, rope_pos_ = -1, pos_ = 0;
  // The layer whose q and k stash_qkv left as zero points (products on chip).
  int zeroed_layer_ = -1;
  bool first_rope_ = false;  // layer 0's program computes them too
  // layer 0's program as generated (keep_rope_products generates it again), and whether it keeps
  // q's products on the chip.
  compiler::FcChain first_chain_;
  bool first_kept_ = false;
  struct QkvPart;
  QkvPart qkv_part(int layer) const;
  // chip_residual: v's groups of `layer`'s q, k, v layer `fc` (v's outputs from v_at, placed by
  // `at`) wait for r and leave v~ (compiler::FcChainAfterR: multipliers f32(v_base_j r), zero
  // point 0, clamps +-127), each group's constants in a row taken on its tile where every group
  // has one left, else as immediates; the caller sets the layer. Empty groups: not wanted.
  compiler::FcChainAfterR value_tilde_groups(int layer, int v_at, compiler::FcLayer& fc,
                                             const compiler::FcPlacement& at,
                                             TileAllocator& tiles) const;
  // The layer whose q, k, v program returned v~ in v's place (the last qkv_q's), -1: none.
  int v_tilde_layer_ = -1;
  // Layer 0's program waits for r for v~ (first_chain_.after_r): r's block after its input.
  bool first_v_tilde_ = false;
  // One run; `reads_kept`: p reads the products kept_run_ left on the tiles (a recovery runs
  // that again first).
  void run(const std::shared_ptr<runtime::Program>& p, const int8_t* in, int in_bytes, int8_t* out,
           int out_bytes, bool reads_kept = false);
  // Runs kept_run_ again while a recovery since its last run emptied the rows it left.
  void restore_kept();
  // At most this many runs of one program in a row that each end in a recovery.
  static constexpr int kRunsPerRecovery = 4;
  // Records a program run that left products in kept_rows_.
  void kept_by(const std::shared_ptr<runtime::Program>& p, const int8_t* in, int in_bytes);
  void run_program(Program& p, int layer, LayerMatmul called, int8_t* yq);
  compiler::FcLayer fc_layer(int layer, const Program& p) const;
  void cache_all();
  runtime::EdgeTpu& tpu_;
  std::vector<Program> programs_;
  std::vector<MatmulPlan> plans_;  // [layer][matmul]
  std::vector<FfnProgram> ffns_;   // [layer]; without programs where the FFN is not fused
  // fused_layers: the q, k, v of layer stash_layer_ that its previous layer's chain computed
  // (q, k, v each at a whole group).
  std::vector<int8_t> stash_, u_stash_;
  int stash_layer_ = -1, u_stash_layer_ = -1;
  // chip_rms: r of layer r_stash_layer_'s input at r_stash_pos_ as its previous layer's chain
  // returned it.
  float r_stash_ = 0;
  int r_stash_layer_ = -1, r_stash_pos_ = -1;
  // fused_layers: layer 0's q, k, v and u as one program (compiler::generate_fc_chain).
  std::shared_ptr<runtime::Program> first_;
  std::vector<std::shared_ptr<runtime::Program>> first_caching_;
  std::vector<bool> values_on_chip_;  // [layer]
  std::vector<int8_t> xq_, yq_;
  // Results of the matmuls a fused program computed beside the one asked for, kept until their
  // own call (which must bring the same quantized input).
  struct Pending {
    int layer = -1;
    std::vector<int8_t> yq, xq;
  };
  std::array<Pending, kLayerMatmuls> pending_;
  ChipPathStats stats_;
  int recoveries_seen_ = 0;
};

}  // namespace tinycoral::llm
