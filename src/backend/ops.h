// The op table the model calls for every computation (house style §4.3). Each op computes exactly
// what the official reference computes, including where it rounds to bf16; comments name the
// reference function. A row's result never depends on how many rows share the call (batch
// invariance by construction): every backend must keep per-row reduction orders fixed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "backend/kv_format.h"
#include "backend/memory.h"
#include "kernels/ref/sample_row.h"
#include "tensor/weight_view.h"
#include "util/status.h"

namespace di::backend {

enum class Fp4ScaleKind {
  kUe8m0Block32,  // indexer q/k: power-of-two scales per 32, amax floor 6*2^-126
  kE4m3Block16,   // compressed KV: e4m3 scales (amax/6) per 16, amax floor 6*2^-9
};

// Rotary embedding frequencies of one layer kind (reference precompute_freqs_cis).
struct RopeTable {
  std::vector<float> inv_freq;  // [rope_dim / 2]
};

// The hyper-connection coefficients of one site for one token (reference hc_split_sinkhorn).
struct HcCoefficients {
  static constexpr int kMaxHc = 8;
  float pre[kMaxHc];
  float post[kMaxHc];
  float comb[kMaxHc * kMaxHc];  // comb[i * hc + j]: weight of input copy i in output copy j
};

struct SparseAttentionArgs {
  const float* q = nullptr;  // [num_queries, num_heads, head_dim], bf16-exact
  int64_t num_queries = 0;
  int num_heads = 0;
  int head_dim = 0;
  // [num_queries, num_keys] pointers to K=V rows of head_dim floats; nullptr marks an empty slot.
  const float* const* keys = nullptr;
  int64_t num_keys = 0;
  const float* sink = nullptr;  // [num_heads] f32
  float softmax_scale = 0;
  float* out = nullptr;  // [num_queries, num_heads, head_dim], rounded to bf16
};

// Sink attention over the KV cache in its stored formats (kv_format.h). Key j of query t is, in
// softmax order, window slot j (j < num_window) then compressed slot j - num_window. Window
// indices address one index space over two FP8 arrays: i < window_pool_rows is row i of
// window_pool (the state pool's rings), i >= window_pool_rows is row i - window_pool_rows of
// fresh (this call's new rows, not yet in a ring). -1 marks an empty slot.
struct KvAttentionArgs {
  const float* q = nullptr;  // [num_queries, num_heads, head_dim], bf16-exact
  int64_t num_queries = 0;
  int num_heads = 0;
  int head_dim = 0;
  const uint8_t* window_pool = nullptr;  // FP8 rows at kv_row_stride(kFp8, head_dim)
  int64_t window_pool_rows = 0;
  const uint8_t* fresh = nullptr;         // FP8 rows, same stride (num_queries); may be null
  const int32_t* window_index = nullptr;  // backend [num_queries, num_window]
  int num_window = 0;
  const uint8_t* compressed_pool = nullptr;   // FP4 rows at kv_row_stride(kFp4, head_dim)
  int64_t compressed_pool_rows = 0;           // 0: unknown
  const int32_t* compressed_index = nullptr;  // backend [num_queries, num_compressed]
  int num_compressed = 0;
  // An upper bound on the distinct rows the lists name (window and compressed; 0: unknown). A
  // backend may decode each distinct row once when the queries share them (a prefill); the
  // bound only sizes that, the results do not depend on it.
  int64_t distinct_rows = 0;
  const float* sink = nullptr;  // [num_heads] f32
  float softmax_scale = 0;
  float* out = nullptr;  // [num_queries, num_heads, head_dim], rounded to bf16
};

struct IndexScoreArgs {
  const float* q = nullptr;        // [num_queries, num_heads, head_dim] (fp4 fake-quantized)
  const float* weights = nullptr;  // [num_queries, num_heads] bf16-exact head weights
  int64_t num_queries = 0;
  int num_heads = 0;
  int head_dim = 0;
  // Index-key rows (head_dim floats each) in a paged pool: key s of query t is pool row
  // pages[page_offset[t] + s / entries_per_page] * entries_per_page + s % entries_per_page, so
  // one call scores the rows of many sequences, each through its own page table.
  const float* key_pool = nullptr;  // backend
  const int32_t* pages = nullptr;   // host [num_pages]: the rows' page tables, concatenated
  int64_t num_pages = 0;
  const int64_t* page_offset = nullptr;  // host [num_queries]
  int entries_per_page = 0;
  int64_t num_keys = 0;  // scores' row width (the longest row's keys)
  const int64_t* num_visible =
      nullptr;              // host [num_queries]: query t scores keys [0, num_visible[t])
  float* scores = nullptr;  // [num_queries, num_keys] bf16-exact; -inf where not visible
};

// The indexer's top-k (reference Indexer.forward; kernels/ref/index_select.h's rules) over scores
// in backend memory: row t keeps min(topk, num_visible[t]) entries of [0, num_visible[t]) in
// ascending order, then -1 up to `width`. With `blocks`, entries outside the row's candidate
// blocks score -inf (they can still fill the top-k, lowest index first, as in the reference).
struct IndexTopkArgs {
  const float* scores = nullptr;  // backend [num_queries, num_keys]
  int64_t num_queries = 0;
  int64_t num_keys = 0;
  const int64_t* num_visible = nullptr;  // host [num_queries]
  int topk = 0;
  const int32_t* blocks = nullptr;  // backend [num_queries, num_blocks]: ascending, -1 padded
  int num_blocks = 0;
  int block_size = 0;
  int32_t* selected = nullptr;  // backend [num_queries, width]
  int width = 0;
};

// Candidate blocks (reference select_candidate_blocks) of each row's visible scores: up to
// topk_blocks block ids in ascending order, then -1 up to `width`.
struct CandidateBlockArgs {
  const float* scores = nullptr;  // backend [num_queries, num_keys]
  int64_t num_queries = 0;
  int64_t num_keys = 0;
  const int64_t* num_visible = nullptr;  // host [num_queries]
  int block_size = 0;
  int topk_blocks = 0;
  int32_t* blocks = nullptr;  // backend [num_queries, width]
  int width = 0;
};

// Paged-pool rows of per-row entry lists: out[r, j] = pages[page_offset[r] + e / per] * per +
// e % per for e = entries[r, j] >= 0, else -1 (StatePool's compressed-KV row index).
struct PagedRowsArgs {
  const int32_t* entries = nullptr;  // backend [num_rows, width]
  int64_t num_rows = 0;
  int width = 0;
  const int32_t* pages = nullptr;  // host [num_pages]: every row's page table, concatenated
  int64_t num_pages = 0;
  const int64_t* page_offset = nullptr;  // host [num_rows]: where row r's table starts in pages
  int entries_per_page = 0;
  int32_t* out = nullptr;  // backend [num_rows, width]
};

// An e4m3 table with one ue8m0 scale per (row, 32 values): the Engram embeddings (host memory,
// cached by a device backend like the weights).
struct Fp8RowTable {
  const uint8_t* data = nullptr;   // [rows, width] e4m3
  const uint8_t* scale = nullptr;  // [rows, width / 32] ue8m0
  int64_t rows = 0;
  int64_t width = 0;  // a multiple of 32
};

// Engram bucket rows of positions whose own token is in backend memory (a token chosen on the
// backend by the previous step): for i < num_rows, row r = rows[i] of `out` gets
// (max_ngram - 1) * heads ids from kernels::engram::hash_position over shifted = (c, look_back[i]
// ...) with c = token_map[tokens[r]], or over max_ngram pad tokens when c is dead (< 0) or
// tokens[r] is outside the map. look_back[i] holds the host-known compressed tokens at look-backs
// 1 .. max_ngram - 1, already pad from the first one past the sequence start or dead
// (engram::NgramHasher::look_back_pending).
struct EngramHashArgs {
  const int32_t* tokens = nullptr;  // backend, indexed by the rows
  const int64_t* rows = nullptr;    // host [num_rows]
  int64_t num_rows = 0;
  const int32_t* look_back = nullptr;  // host [num_rows, max_ngram - 1]
  const int32_t* token_map = nullptr;  // host [map_size] (a device backend caches it by address)
  int64_t map_size = 0;
  int max_ngram = 0;
  int heads = 0;
  const int64_t* multipliers = nullptr;  // host [max_ngram]: this layer's
  const int64_t* primes = nullptr;       // host [(max_ngram - 1) * heads]
  const int64_t* offsets = nullptr;      // host [(max_ngram - 1) * heads]
  int32_t pad = 0;                       // the pad token's compressed id
  int32_t* out = nullptr;                // backend, [.., (max_ngram - 1) * heads]
};

// Time spent in one op (by name) since the last reset, when the backend profiles its ops.
struct OpTime {
  std::string op;
  int64_t calls = 0;
  double device_ms = 0;  // on the device, between events around the op's enqueued work
  double host_ms = 0;    // on the host, enqueuing it (launch overhead, metadata, waits)
};

enum class ScoreFunc { kSqrtSoftplus, kSigmoid, kSoftmax };

struct RouteParams {
  int num_experts = 0;
  int topk = 0;
  ScoreFunc score_func = ScoreFunc::kSqrtSoftplus;
  float gate_temp = 1.0f;
  bool norm_topk_prob = true;
  float route_scale = 1.0f;
};

// Activations (x, y, q, keys' rows, out...) are backend memory (memory.h): the views the ops
// take point there. Weights (WeightView and the small per-layer vectors: norm weights, sinks,
// biases) and metadata (positions, visible counts, the key pointer table, the router's
// outputs) are host memory; a device backend caches weights by address.
// One MoE layer's routed experts: expert e's w1/w3 [inter, dim] and w2 [dim, inter].
struct MoeExpertViews {
  std::span<const WeightView> w1, w3, w2;
};

class Ops : public Memory {
 public:
  ~Ops() override = default;
  virtual const char* name() const = 0;

  // Backend memory; host memory unless a backend says otherwise.
  float* allocate(int64_t count) const override { return HostMemory().allocate(count); }
  void deallocate(float* p) const override { HostMemory().deallocate(p); }
  void upload(const float* host, float* dst, int64_t count) const override {
    HostMemory().upload(host, dst, count);
  }
  void download(const float* src, float* host, int64_t count) const override {
    HostMemory().download(src, host, count);
  }
  void copy_2d(const float* src,
               int64_t src_stride,
               float* dst,
               int64_t dst_stride,
               int64_t width,
               int64_t rows) const override {
    HostMemory().copy_2d(src, src_stride, dst, dst_stride, width, rows);
  }

  // Segments: a run of ops that issues the same work whenever its `key` is the same (the caller
  // hashes into the key everything the run's launches depend on: the layer, the row count, the
  // backend buffers it reads and writes) and that uploads no host data and downloads nothing. A
  // device backend may record such a run once and replay it (a CUDA graph) instead of issuing
  // each op: begin_segment returns false when it replayed the run, and the caller then skips the
  // ops; otherwise the caller issues them and calls end_segment. Every buffer the run allocates
  // must be freed inside it, and its host-side effects must not matter (they do not happen on a
  // replay).
  virtual bool begin_segment(uint64_t /*key*/) const { return true; }
  virtual void end_segment() const {}
  struct SegmentStats {
    int64_t replayed = 0, captured = 0, eager = 0;
  };
  virtual SegmentStats segment_stats() const { return {}; }

  // Side lines: work the caller knows to be independent of what follows it, which a device
  // backend may run concurrently (a few-row step is a chain of latency-bound kernels, most of
  // which leave the GPU idle). begin_side returns whether the backend opened one: the ops issued
  // from then until end_side form the side line, ordered after everything issued before
  // begin_side; the ops issued after end_side (the main line) may run concurrently with it until
  // join_side, after which every op is ordered after both lines again. The caller guarantees that
  // neither line writes memory the other reads or writes before the join; buffers may be freed
  // on either line at any time (the backend keeps them until the join). One side line at a time
  // (begin_side joins an open one first); one begun inside a segment is joined by end_segment,
  // and a download or host wait joins it too. A backend without side lines (the CPU) returns
  // false and runs every op in issue order, which is the same computation.
  virtual bool begin_side() const { return false; }
  virtual void end_side() const {}
  virtual void join_side() const {}
  // How many side lines the backend ran so far (tests check that a path uses them).
  virtual int64_t side_lines() const { return 0; }

  // The first error a backend met (a device backend latches it, as CUDA's own errors are sticky,
  // and does nothing more; its outputs are then undefined). Callers check it after a forward.
  virtual Status status() const { return Status(); }
  // How many times the host has waited for the backend so far (a device backend's downloads and
  // routing decisions; 0 for the CPU). A decode step's count is what stands between it and a
  // CUDA graph.
  virtual uint64_t host_syncs() const { return 0; }
  // Seconds the host has spent in those waits so far: a step's wall time minus its waits is the
  // host's own work (issuing the ops), which CUDA graphs remove.
  virtual double host_wait_seconds() const { return 0; }
  // Seconds the device has sat idle after those waits so far, from the end of the work a wait
  // waited for to the next work issued (the host's turn-around between two decode steps), for a
  // backend created to measure it (`bench step`); 0 otherwise.
  virtual double device_idle_seconds() const { return 0; }
  // Per-op times since the last call (and resets them), for a backend created with op
  // profiling on (`bench step --profile-ops`); empty otherwise. Waits for the device.
  virtual std::vector<OpTime> take_op_profile() const { return {}; }

  // Op tracing (TracingOps, `--trace-ops`): a device backend appends the checksum
  // (backend/checksum.h) of `bytes` of its memory at `data`, as it will be once the work issued
  // so far has run, without waiting, and returns true; take_checksums returns the appended values
  // in order and clears them (it waits for the device). A backend whose memory is host memory
  // returns false and the caller computes the checksum itself.
  virtual bool record_checksum(const void* /*data*/, size_t /*bytes*/) const { return false; }
  virtual std::vector<uint64_t> take_checksums() const { return {}; }

  // y[m, n] = x[m] . w[n] (reference `linear`). FP8/FP4 weights first fake-quantize each row of x
  // to e4m3 with ue8m0 scales per 32 (act_quant) and accumulate 32-wide blocks in fp32 (fp8_gemm,
  // fp4_gemm); their output is bf16. BF16/F32 weights compute in fp32 and round the output to bf16
  // when `round_bf16` (the reference's bf16 F.linear) or keep fp32 (its fp32 F.linear).
  virtual void linear(ConstRowsView x, const WeightView& w, RowsView y, bool round_bf16) const = 0;

  // Two products of one x: y0 = x . w0, y1 = x . w1, each exactly as `linear` computes it (a gate
  // and an up projection, or wq_a and wkv). The default runs two `linear`s; a backend may
  // quantize x once and launch both products together.
  virtual void linear_pair(ConstRowsView x,
                           const WeightView& w0,
                           RowsView y0,
                           const WeightView& w1,
                           RowsView y1,
                           bool round_bf16) const {
    linear(x, w0, y0, round_bf16);
    linear(x, w1, y1, round_bf16);
  }

  // A block-diagonal product (the grouped output projection, reference Attention wo_a): x [T,
  // groups * in] and w [groups * out, in] (group g's rows g * out ..); y[t, g * out + o] =
  // x[t, g * in ..] . w[g * out + o], as `linear` computes each group. w is BF16 or F32 (the
  // reference's wo_a is a bf16 linear; a quantized weight's block scales do not split by group
  // rows). The default runs one linear per group; a backend may launch them together.
  virtual void grouped_linear(
      ConstRowsView x, const WeightView& w, int groups, RowsView y, bool round_bf16) const {
    const int64_t T = x.rows, in = x.cols / groups, out = w.out_features / groups;
    Buffer slice(*this, T, in), part(*this, T, out);
    const int64_t row_bytes = (w.format == WeightFormat::kBF16 ? 2 : 4) * in;
    for (int g = 0; g < groups; ++g) {
      copy_2d(x.data + g * in, x.cols, slice.data(), in, in, T);
      const WeightView wg{w.format, out, in, w.data + g * out * row_bytes, nullptr};
      linear(slice.view(), wg, part.view(), round_bf16);
      copy_2d(part.data(), out, y.data + g * out, y.cols, out, T);
    }
  }

  // y = bf16(w * x * rsqrt(mean(x^2) + eps)) per row (reference RMSNorm); w: [cols], bf16-exact.
  virtual void rms_norm(ConstRowsView x, const float* w, float eps, RowsView y) const = 0;

  // In-place fake quantization (quantize + dequantize, rounded to bf16) of every `block` values.
  virtual void fake_quant_fp8(RowsView x, int block) const = 0;  // act_quant(..., inplace=True)
  virtual void fake_quant_fp4(RowsView x, Fp4ScaleKind kind) const = 0;  // fp4_act_quant inplace

  // Rotates dims [rope_offset, rope_offset + 2*inv_freq.size()) of each of `num_heads` heads of
  // width `head_dim` in row r at positions[r] (interleaved pairs); `inverse` conjugates.
  // Rounds the rotated values to bf16 (reference apply_rotary_emb on a bf16 tensor).
  virtual void rope(RowsView x,
                    int num_heads,
                    int head_dim,
                    int rope_offset,
                    const int64_t* positions,
                    const RopeTable& table,
                    bool inverse) const = 0;

  // Sink softmax attention over per-query key lists, online in blocks of 64 keys (sparse_attn).
  virtual void sparse_attention(const SparseAttentionArgs& args) const = 0;

  // Stores rows (bf16-exact values before quantization, head_dim = rows.cols) in `format` at
  // pool rows slots[r] (host; -1 skips a row; null: row r to pool row r, no upload on a device
  // backend): decoding gives the row's fake quantization
  // (fake_quant_fp8 block 32, or fake_quant_fp4 kE4m3Block16) bitwise. pool: backend memory,
  // rows at kv_row_stride(format, head_dim). Slots must be distinct.
  virtual void write_kv(ConstRowsView rows,
                        KvFormat format,
                        const int32_t* slots,
                        uint8_t* pool) const = 0;
  // sparse_attention's math over keys decoded from the stored rows. Backends may compute some
  // shapes within a tolerance instead of bitwise (the CUDA backend's tensor cores at 64 x 512).
  virtual void kv_attention(const KvAttentionArgs& args) const = 0;

  // Indexer scores: sum_h w[t,h] * relu(bf16(q[t,h] . k[s])), each step rounded to bf16.
  virtual void index_scores(const IndexScoreArgs& args) const = 0;

  // The selections of the indexer (the structs above), on the backend: a decode step's top-k
  // never waits for the host.
  virtual void index_topk(const IndexTopkArgs& args) const = 0;
  virtual void candidate_blocks(const CandidateBlockArgs& args) const = 0;
  virtual void paged_rows(const PagedRowsArgs& args) const = 0;

  // Hyper-connection mixes for each token row of x [rows, hc*dim] (Block.hc_mixes).
  virtual void hc_mixes(ConstRowsView x,
                        const float* fn,
                        const float* scale,
                        const float* base,
                        int hc,
                        int sinkhorn_iters,
                        float hc_eps,
                        float norm_eps,
                        HcCoefficients* out) const = 0;
  // y[r] = bf16(sum_k pre[k] * x[r, k]) for x [rows, hc*dim] (Block.hc_pre).
  virtual void hc_collapse(ConstRowsView x,
                           const float* pre /*[rows, hc]*/,
                           int hc,
                           RowsView y) const = 0;
  // out[r, j] = bf16(post[j] * y[r] + sum_i comb[i, j] * residual[r, i]) (Block.hc_post). out
  // may be residual itself (the block updates its stream in place); otherwise they do not overlap.
  virtual void hc_expand(ConstRowsView y,
                         ConstRowsView residual,
                         const HcCoefficients* coeff,
                         int hc,
                         RowsView out) const = 0;

  // MoE router (reference Gate): scores = f(x . gate / temp) in fp32, experts = top-k of
  // scores + bias (ties: lower index first), weights = their unbiased scores, normalized and
  // scaled.
  virtual void moe_route(ConstRowsView x,
                         const WeightView& gate,
                         const float* bias,
                         const RouteParams& params,
                         int32_t* experts /*[rows, topk]*/,
                         float* weights /*[rows, topk]*/) const = 0;

  // out = bf16(row_weight * silu(min(g, limit)) * clamp(u, -limit, limit)) (reference Expert); the
  // clamps apply when limit > 0; row_weight may be null (1).
  virtual void swiglu(ConstRowsView gate,
                      ConstRowsView up,
                      const float* row_weight,
                      float limit,
                      RowsView out) const = 0;

  // Engram gate (reference Engram.forward after wkv): per row, kv [(hc + 1) * dim] holds hc keys
  // and one value; x [hc * dim] is updated in place: x_k = bf16(x_k + gate_k * value).
  virtual void engram_gate(RowsView x,
                           ConstRowsView kv,
                           const float* qk_weight /*[hc * dim]*/,
                           int hc,
                           float eps) const = 0;

  // The whole routed MoE of one layer when the backend has a fused path for these weights: the
  // router (moe_route's numerics), every routed expert (swiglu with the routing weight before
  // w2) and the combine with `shared`, the shared expert's output: out = bf16(sum over the row's
  // experts in ascending index, in fp32 from 0, then + shared), as the model's loop computes.
  // The routing decision is also copied to the host arrays `experts`/`weights` ([rows, topk])
  // when they are non-null (traces). Returns false, having done nothing, when there is no fused
  // path (the CPU backend; unsupported shapes); the model then routes and loops itself.
  // `shared` may still be in production on an open side line (begin_side): the fused path joins
  // the side line just before its combine reads `shared`, so the shared expert can run beside the
  // router and the routed experts; a false return joins nothing.
  virtual bool fused_moe(ConstRowsView /*x*/,
                         const WeightView& /*gate*/,
                         const float* /*bias*/,
                         const RouteParams& /*params*/,
                         const MoeExpertViews& /*experts*/,
                         float /*swiglu_limit*/,
                         ConstRowsView /*shared*/,
                         RowsView /*out*/,
                         int32_t* /*experts_out*/,
                         float* /*weights_out*/) const {
    return false;
  }

  // Token embeddings replicated over `copies` hyper-connection copies (reference
  // ParallelEmbedding, then one copy per hc stream): out.row(r)[k * dim + d] = table[tokens[r], d]
  // for k < copies, dim = table.in_features, from a BF16 or F32 table. `tokens` is backend memory
  // (a step's tokens may have been chosen there by the previous step), each in [0,
  // table.out_features) (the model checks the host's, the vocabulary bounds the backend's). A
  // device backend keeps the table and gathers there (a host gather moved hc copies of fp32 rows:
  // 21 MB per step at batch 256).
  virtual void embed_rows(const WeightView& table,
                          const int32_t* tokens,
                          int copies,
                          RowsView out) const = 0;

  // Rows of an e4m3 table with one ue8m0 scale per (row, 32 values), as the Engram embeddings are
  // stored: out.row(i)[d] = bf16(e4m3(table.data[index[i], d]) * 2^(scale[index[i], d / 32] - 127))
  // for d < table.width (out.cols == table.width). `index` is backend memory, each in [0,
  // table.rows) (the hasher's range). A device backend keeps the table and gathers there (the host
  // decoded and uploaded 24 KB per row and step at the V4.1 shape).
  virtual void gather_fp8_rows(const Fp8RowTable& table,
                               const int32_t* index,
                               RowsView out) const = 0;

  // One Engram layer's bucket rows for the positions whose own token is in backend memory
  // (EngramHashArgs; kernels/ref/engram_hash.h computes them as the host hasher does).
  virtual void engram_hash_rows(const EngramHashArgs& a) const = 0;

  // out[r] = the first index of row r's largest value (std::max_element's choice; rows without
  // NaN), in backend memory: greedy sampling reads one int per row instead of the row, and the
  // next step may embed it from there without a host round trip.
  virtual void argmax_rows_to(ConstRowsView x, int32_t* out) const = 0;

  // out[r] = the token sampled from row r (kernels/ref/sample_row.h: penalties, bias and the
  // allowed-token mask applied to x in place, then temperature, top-k, top-p, min-p and the
  // counter-keyed draw), in backend memory; bitwise what the host sampler draws. `a` is host
  // memory.
  virtual void sample_rows_to(RowsView x,
                              const kernels::sample::RowsArgs& a,
                              int32_t* out) const = 0;

  // The same into host memory `out`: the host waits for the tokens (only for them).
  void argmax_rows(ConstRowsView x, int32_t* out) const {
    const Buffer tokens(*this, std::max<int64_t>(x.rows, 1), 1);
    argmax_rows_to(x, reinterpret_cast<int32_t*>(tokens.data()));
    download(tokens.data(), reinterpret_cast<float*>(out), x.rows);
  }
  void sample_rows(RowsView x, const kernels::sample::RowsArgs& a, int32_t* out) const {
    const Buffer tokens(*this, std::max<int64_t>(x.rows, 1), 1);
    sample_rows_to(x, a, reinterpret_cast<int32_t*>(tokens.data()));
    download(tokens.data(), reinterpret_cast<float*>(out), x.rows);
  }

  // dst[rows[i]] += src[i] in fp32, for i ascending (rows: host indices, distinct). The MoE
  // combine adds each expert's rows into the accumulator this way, experts in index order.
  virtual void add_rows(ConstRowsView src, const int64_t* rows, RowsView dst) const = 0;
  // out = bf16(a + b) elementwise (fp32 add, then one rounding).
  virtual void add_round_bf16(ConstRowsView a, ConstRowsView b, RowsView out) const = 0;
  // x = bf16(x * scale) elementwise, in place (fp32 product, one rounding).
  virtual void scale_round_bf16(RowsView x, float scale) const = 0;

  // Softmax-gated pooling of `group` rows per channel (reference Compressor), for `groups`
  // groups at once: out[g, d] = sum_i kv[g][i, d] * softmax_i(score[g][:, d]), fp32, where kv[g]
  // and score[g] (host tables of backend pointers) point at `group` consecutive rows of `dim`
  // floats each. out is backend memory [groups, dim].
  virtual void softmax_pool(const float* const* kv,
                            const float* const* score,
                            int64_t groups,
                            int group,
                            int64_t dim,
                            float* out) const = 0;
};

}  // namespace di::backend
