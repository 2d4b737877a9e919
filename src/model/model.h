// DeepSeek-V4.1 text model on a backend::Ops (spec §1; reference Transformer.forward): embedding,
// hc copies, per layer Engram -> attention site -> FFN site with single-pass mHC, final collapse,
// norm and fp32 head; plus the DSpark draft head (reference forward_spec). Per-sequence state lives
// in a StatePool; a forward processes any mix of prefill chunks and decode steps, and a row's
// logits do not depend on how its sequence was chunked or what else is in the batch.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/ops.h"
#include "model/config.h"
#include "model/engram/layout.h"
#include "model/engram/ngram_hasher.h"
#include "model/forward_context.h"
#include "model/model_weights.h"
#include "model/weights/checkpoint.h"

namespace di::model {

using backend::Buffer;

// HcCoefficients rows held in a Buffer of this many columns; `pre` is the first member, so a
// strided copy of the first hc columns extracts it.
inline constexpr int64_t kCoefficientFloats =
    static_cast<int64_t>(sizeof(backend::HcCoefficients) / sizeof(float));
static_assert(offsetof(backend::HcCoefficients, pre) == 0);
inline backend::HcCoefficients* coefficients(const Buffer& b) {
  return reinterpret_cast<backend::HcCoefficients*>(b.data());
}
inline backend::HcCoefficients* coefficients(RowsView v) {
  return reinterpret_cast<backend::HcCoefficients*>(v.data);
}

struct DraftResult {
  std::vector<int32_t> tokens;    // [block_size + 1]: the input token, then the drafts
  std::vector<float> logits;      // [block_size, vocab], Markov bias included
  std::vector<float> confidence;  // [block_size] confidence logits
};

// Bounded replay (bounded_replay.cc): the rows of `ctx` at or after each chunk's replay_from, as
// a context of their own in `tail` (selections, candidates and DSpark inputs carried along);
// marks the skipped window slots of the late layers as missing. Returns the kept rows' indices.
std::vector<int64_t> narrow_to_replay_tail(const backend::Memory& memory,
                                           ForwardContext& ctx,
                                           ForwardContext& tail);

// Greedy rows (sampling without logits processors) need only their argmax, which the backend
// reduces: only the other rows' logits are copied to the host (at batch 256 all of them are
// 132 MB per step).
struct LogitsSelection {
  std::vector<uint8_t> full;    // per logits row: 1 = copy its logits to the host (kLogitsFull)
  std::vector<int32_t> argmax;  // out, per logits row not full: the first index of its largest
                                // logit, or its sampled token (-1 for full rows)
  // With `defer`, `argmax` arrives by a download that completes in Model::wait_tokens, and the
  // host meanwhile may issue the next forward with these tokens as its chunks' pending tokens
  // (`device_tokens`: one per logits row, backend memory). The selection must then stay alive and
  // unchanged until wait_tokens (a caller that overlaps steps keeps two).
  bool defer = false;
  backend::Buffer device_tokens;
  uint64_t download_ticket = 0;
  // Rows marked kLogitsSample are sampled on the backend (Ops::sample_rows, bitwise the host
  // sampler's draw): one RowParams per logits row (read for those rows only) and the lists they
  // index (kernels/ref/sample_row.h).
  std::vector<kernels::sample::RowParams> params;
  std::vector<int32_t> penalty_tokens, penalty_counts, bias_tokens;
  std::vector<float> bias_values;
  std::vector<uint32_t> masks;  // [rows with a mask, mask_words(vocab)]
  // When set, select_tokens calls it once before reading `masks` (the forward is issued by then):
  // the engine writes the grammar masks there, so that their computation on CPU threads overlaps
  // the forward instead of delaying its start.
  std::function<void(std::span<uint32_t> masks)> fill_masks;
};
inline constexpr uint8_t kLogitsArgmax = 0, kLogitsFull = 1, kLogitsSample = 2;

// Writes selection.argmax for the rows not kLogitsFull: Ops::argmax_rows, or Ops::sample_rows
// when some row samples (logits: the rows' device logits, processed in place).
void select_tokens(const backend::Ops& ops, RowsView logits, LogitsSelection& selection);

class Model {
 public:
  // Loads DIR/config.json, the safetensors checkpoint and DIR/tokenizer.json (for Engram's token
  // map, when the model has Engram layers).
  static Expected<std::unique_ptr<Model>> load(const std::string& dir, const backend::Ops& ops);
  ~Model();

  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  // The backend the model computes on; its memory holds the activations and the state pools.
  const backend::Ops& ops() const { return *ops_; }

  // Full forward over ctx's chunks. logits_rows selects rows (of ctx) whose logits are written to
  // `logits` ([logits_rows.size(), vocab] f32). Advances every sequence. With `selection`, only
  // the rows it marks full are written (in order), and every row's argmax is returned.
  Status forward(ForwardContext& ctx,
                 const std::vector<int64_t>& logits_rows,
                 std::vector<float>& logits,
                 LogitsSelection* selection = nullptr);

  // The steps of forward, public so a layer can be run on recorded inputs (golden checks).
  Status begin_forward(ForwardContext& ctx) const;  // rows, positions, pages, Engram hashes
  // begin_forward's parts: forward issues the first layers' work between them, so that the
  // device does not wait for the host's hashing at the start of a step.
  Status begin_rows(ForwardContext& ctx) const;   // checks, rows, positions, pages, DSpark's input
  Status hash_engram(ForwardContext& ctx) const;  // Engram hashes (nothing without Engram)
  void embed(const ForwardContext& ctx, RowsView x) const;  // x: [rows, hc * dim]
  void apply_engram(int layer, const ForwardContext& ctx, RowsView x) const;
  // One block (attention site + FFN site) on x in backend memory. pre_mix [rows, hc] is the
  // previous site's collapse weights on entry and this block's FFN `pre` on exit (in place).
  // Calls on one Model must not overlap (the blocks share the model's row workspace).
  void run_block(int layer, ForwardContext& ctx, RowsView x, RowsView pre_mix) const;
  // The collapse weights before the first block: copy 0 only.
  backend::Buffer initial_pre_mix(int64_t rows) const;
  void initial_pre_mix(RowsView pre_mix) const;
  void final_logits(ConstRowsView x,
                    ConstRowsView pre_mix,
                    const std::vector<int64_t>& rows,
                    std::vector<float>& logits,
                    std::vector<float>* final_hidden = nullptr,
                    LogitsSelection* selection = nullptr) const;
  void end_forward(ForwardContext& ctx) const;  // commits Engram look-back, advances positions

  // Pending tokens (SequenceChunk::pending; LogitsSelection::defer): a forward may embed and
  // hash tokens an earlier forward chose on the backend, so that the host issues step k + 1
  // before step k's tokens reach it. Waits for a deferred selection's tokens (fills `argmax`).
  Status wait_tokens(LogitsSelection& selection) const;
  // Records the id of `seq`'s pending token once it is known (its Engram look-back for the next
  // chunk): call it before the sequence's next forward. Fails when none is pending.
  Status commit_token(SequenceState& seq, int32_t token) const;
  // The rows' tokens in backend memory: ctx.tokens, then each pending row's copied in.
  Buffer upload_token_ids(const ForwardContext& ctx) const;

  // DSpark: drafts block_size tokens after `token`, which sits at position seq.num_tokens (the
  // next position); seq must have been advanced by forward (which seeded the draft windows).
  // `markov_tokens`, when given (block_size - 1 ids), replaces the drafted tokens as inputs of the
  // Markov head (teacher forcing, to score a known draft); the drafts are still reported.
  Expected<DraftResult> draft(StatePool& pool,
                              SequenceState& seq,
                              int32_t token,
                              std::span<const int32_t> markov_tokens = {}) const;

  const std::vector<int32_t>& engram_token_map() const { return token_map_; }
  const engram::EngramLayout* engram_layout() const { return engram_layout_.get(); }

 private:
  Model() = default;
  Status init_engram(const std::string& dir);
  // The attention's projected rows: the normed latent qr, q [T, H * D] and the window K=V [T, D].
  struct QkvRows {
    RowsView qr, q, kv;
  };
  // The products and norms of q and kv (no RoPE yet: it reads this step's positions).
  void project_qkv_linear(int layer, ConstRowsView u, QkvRows& r) const;
  // RoPE on q and kv, then kv FP8 fake-quantized.
  void rope_qkv(int layer, const ForwardContext& ctx, QkvRows& r) const;
  // A backbone layer's attention from its projected rows into o: the values, inverse-rotated,
  // [T, H * D] (the grouped output projection follows in run_block).
  void attention(int layer, ForwardContext& ctx, ConstRowsView u, QkvRows& qkv, RowsView o) const;
  // The per-row buffers of forward and its blocks. Up to kWorkspaceRows rows they are views of
  // one allocation kept by the model across calls, so that they keep their addresses from step
  // to step: a device backend's recorded segments (Ops::begin_segment) are keyed by them.
  static constexpr int64_t kWorkspaceRows = 512;
  // Independent work goes on a side line (Ops::begin_side) up to this many rows: it pays where a
  // step's kernels are latency-bound, and the backend's scratch for a side line stays small.
  static constexpr int64_t kSideLineRows = 256;
  bool open_side_line(const ForwardContext& ctx) const;
  struct BlockRows {
    RowsView x, pre_mix, attn_c, ffn_c, u, y, attn_pre, o;
    QkvRows qkv;  // views of the workspace in the buffers' place when `owned` is empty
    std::vector<Buffer> owned;  // more rows than the workspace holds: fresh buffers
  };
  // `stream`: the caller is forward, which uses x and pre_mix; past kWorkspaceRows only the
  // caller's own rows are allocated (x and pre_mix for forward, the others for a block).
  BlockRows block_rows(int64_t rows, bool stream) const;
  bool in_workspace(const float* p) const;
  void compress(int layer, ForwardContext& ctx, ConstRowsView u) const;
  void index_select(int layer, ForwardContext& ctx, ConstRowsView u, ConstRowsView qr) const;
  void output_projection(int layer, RowsView o, RowsView out) const;
  // Per-query key lists as rows of the state pool (backend::KvAttentionArgs): window slots
  // ([T, num_window] FP8 rows; indices from window_pool_rows on are this call's fresh rows),
  // then compressed entries ([T, num_compressed] FP4 rows of `stream`); -1 marks an empty slot.
  struct KeyLists {
    std::vector<int32_t> window;          // host [T, num_window], uploaded by attend
    const int32_t* compressed = nullptr;  // backend [T, num_compressed]
    int num_window = 0, num_compressed = 0;
    int stream = -1;
    int64_t distinct_rows = 0;  // a bound on the distinct rows of both lists
  };
  // kv [T, D] (FP8 fake-quantized) stored as FP8 rows 0..T-1 of a fresh buffer.
  Buffer store_fresh(ConstRowsView kv) const;
  // Sink softmax attention of q over the key lists into o [T, H * D].
  void attend(int layer,
              const ForwardContext& ctx,
              ConstRowsView q,
              const KeyLists& keys,
              const Buffer& fresh,
              RowsView o) const;
  // Overwrites the pending rows of one Engram layer's bucket ids (index_d [rows, cols] int32)
  // with the backend's hashes of their tokens.
  void hash_pending_rows(int layer, const ForwardContext& ctx, const Buffer& index_d) const;
  void moe(int layer, const ForwardContext* ctx, ConstRowsView u, RowsView out) const;
  void seed_dspark(ForwardContext& ctx) const;
  void record_dspark_input(int layer, ForwardContext& ctx, ConstRowsView x) const;
  std::vector<float> router_margins(ConstRowsView u,
                                    const MoeWeights& m,
                                    const backend::RouteParams& p) const;
  void dspark_attention(int layer, ForwardContext& ctx, ConstRowsView u, RowsView out) const;

  ModelConfig config_;
  const backend::Ops* ops_ = nullptr;
  // Random per loaded model: part of every segment key, so that a backend shared by several
  // models (tests, checks) never replays one model's recorded ops for another.
  uint64_t instance_id_ = 0;
  mutable Buffer workspace_;  // block_rows' storage
  mutable int64_t workspace_rows_ = 0;
  std::unique_ptr<weights::Checkpoint> checkpoint_;
  ModelWeights weights_;
  std::vector<backend::RopeTable> rope_;  // per layer (backbone and DSpark)
  std::vector<int32_t> token_map_;        // Engram compressed id per token id
  std::unique_ptr<engram::EngramLayout> engram_layout_;
  std::unique_ptr<engram::NgramHasher> hasher_;
};

}  // namespace di::model
