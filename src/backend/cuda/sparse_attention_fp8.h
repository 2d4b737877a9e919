// Device-native sparse sink attention for DeepSeek-V4.1 (64 heads x 512, MQA: one K=V latent per
// token) reading the KV cache in its stored formats (spec §1.10), and the writers of those formats.
// Every pointer is device memory; launchers only enqueue work on `stream` and return the launch
// error. Numerics: within tolerance of kernels::sparse_attention_query (tensor-core sums, fast exp;
// docs/notes/cuda-kernels.md, "Sparse attention on tensor cores"), and a query's output bits do
// not depend on the batch or on how heads are split over blocks.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace di::backend::cuda {

// FP8 window/main KV row: 512 e4m3 codes, then 16 ue8m0 scales (one per 32 dims).
inline constexpr int kKvFp8RowBytes = 528;
// FP4 compressed KV row: 256 bytes of e2m1 pairs (dim 2i in the low nibble of byte i), then 32
// e4m3 scales (one per 16 dims).
inline constexpr int kKvFp4RowBytes = 288;
inline constexpr int kKvDim = 512;
inline constexpr int kAttnHeads = 64;
// Keys per query (window + extra) the kernel accepts; indices are staged in shared memory.
inline constexpr int kAttnMaxKeys = 4096;
// Up to this many queries a call with a workspace runs the split path: one thread block per
// (key block, query, head group) for the scores, then softmax and PV per (query, head group, 128
// value dims). Same bits as the one-block kernel (the same steps in the same order per head);
// it only spreads a small batch's sequential key-block walk over more SMs. Measured on the H200
// (docs/benchmarks.md): 2.7x faster at 1 query, 1.6x at 16, slower from 64.
inline constexpr int64_t kAttnSplitMaxQueries = 16;
// From this many queries a call on sm_90 runs the warp-specialised kernel
// (sparse_attention_seesaw.cu; same bits as the others, faster from 64 queries on the H200).
inline constexpr int64_t kAttnSeesawMinQueries = 64;

struct SparseAttentionFp8Args {
  const uint16_t* q = nullptr;  // [num_queries, 64, 512] bf16 bits
  int64_t num_queries = 0;
  const uint8_t* kv = nullptr;       // [*, 528] FP8 pool (window / main KV)
  const int32_t* indices = nullptr;  // [num_queries, num_indices] rows of kv; -1 = empty slot
  // Indices >= fresh_from read row (index - fresh_from) of fresh_kv [*, 528] instead: rows of
  // this call that are not in the pool yet (the model's current chunk).
  const uint8_t* fresh_kv = nullptr;
  int32_t fresh_from = 0x7fffffff;
  int num_indices = 0;
  const uint8_t* extra_kv = nullptr;       // [*, 288] FP4 pool (compressed KV); may be null
  const int32_t* extra_indices = nullptr;  // [num_queries, num_extra]; -1 = empty slot
  int num_extra = 0;
  const float* sink = nullptr;  // [64] f32
  float softmax_scale = 0;
  uint16_t* out = nullptr;  // [num_queries, 64, 512] bf16 bits
  // Instead of out, for calls that run the seesaw kernel (sparse_attention_seesaw_runs): the same
  // bf16 values widened to floats, written by the kernel (no conversion pass after it).
  float* out_f32 = nullptr;
  // Heads per block: 16, 32 or 64; 0 picks by num_queries and the SM count (the fewest waves
  // of blocks, then the most heads). Any choice gives the same bits: each head's arithmetic,
  // denominators included, does not depend on its neighbours (tested).
  int heads_per_block = 0;
  // The one-block kernel's PV tiles: 2 = each warp all heads x 64 dims (the value tile read once
  // per key block), 1 = each warp 16 heads x 512 / (8 * 16 / heads) dims (the S step's row
  // groups; read once per row group); 0 picks. Same bits either way (tested).
  int pv_tiles = 0;
  // Device scratch for the split path (sparse_attention_fp8_workspace_bytes); without it (or
  // when smaller) the one-block kernel runs. The result does not depend on which path runs.
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  // 0: split path when num_queries <= kAttnSplitMaxQueries and the workspace suffices; 1: never;
  // 2: whenever the workspace suffices (tests and the benchmark).
  int split = 0;
  // The sm_90a wgmma kernels (64 heads per block; same bits as the one-block kernel, tested):
  // 2 runs sparse_attention_wgmma.cu (decode of the next key block overlapping the tensor cores),
  // 3 sparse_attention_seesaw.cu (two producer warpgroups gather and decode the keys, two
  // consumer warpgroups alternate S and softmax); cudaErrorNotSupported off sm_90, heads_per_block
  // and split are then ignored. 1 never runs them; 0 picks: the seesaw kernel on sm_90 from
  // kAttnSeesawMinQueries queries (docs/benchmarks.md).
  int wgmma = 0;
  // The seesaw kernel's gather mode (sparse_attention_key_table.h builds both): the call's
  // distinct rows decoded once ([rows][512] bf16 bits times 2^-32, row 0 zeros) and each query's
  // keys as rows of it ([num_queries][num_indices + num_extra]). The seesaw kernel then copies
  // rows instead of decoding them (the same bits); the other kernels ignore them.
  const uint16_t* key_table = nullptr;
  const int32_t* key_rows = nullptr;
  // Benchmark only (time a stage by leaving it out; the output is then garbage): bit 0 skips
  // the KV loads, bit 1 the decode, bit 2 the MMAs (the seesaw kernel: bits 0 and 1 only); bit
  // 3 leaves out the wgmma kernel's L2 prefetch (same output); bit 6 records the seesaw
  // kernel's timeline of one query into `workspace` (not with bits 0 and 1 on that kernel:
  // cudaErrorInvalidValue). 0 in every real call.
  int ablate = 0;
};

// Keys of query t, in softmax order: its num_indices FP8 rows, then its num_extra FP4 rows
// (the model's window slots, then the selected compressed entries), online softmax over blocks of
// 64 keys as kernels::sparse_attention_query. Errors: cudaErrorInvalidValue for shapes outside
// the above; cudaErrorNotSupported below sm_80.
cudaError_t sparse_attention_fp8(const SparseAttentionFp8Args& args, cudaStream_t stream);

// Whether sparse_attention_fp8 runs these args on the seesaw kernel (sm_90, forced or from
// kAttnSeesawMinQueries queries), which alone takes out_f32 (cudaErrorInvalidValue elsewhere).
bool sparse_attention_seesaw_runs(const SparseAttentionFp8Args& args);

// Workspace the split path needs: fp32 logits [T][64][keys] and bf16 decoded keys [T][keys][512]
// (keys rounded up to 64).
size_t sparse_attention_fp8_workspace_bytes(int64_t num_queries, int64_t num_keys);

// Writes rows[r] (512 values, bf16 bits) into pool row slots[r] (skipped when -1) in the FP8
// format, so that decoding the row gives fake_quant_row_fp8(row, 512, 32) bitwise.
cudaError_t write_kv_fp8(const uint16_t* rows,
                         int64_t num_rows,
                         const int32_t* slots,
                         uint8_t* pool,
                         cudaStream_t stream);
// The same for FP4 rows (fake_quant_row_fp4 with e4m3 block-16 scales).
cudaError_t write_kv_fp4(const uint16_t* rows,
                         int64_t num_rows,
                         const int32_t* slots,
                         uint8_t* pool,
                         cudaStream_t stream);

// Test hook: decodes pool rows slots[r] (format FP8 when fp8, else FP4) to bf16 bits of the
// value times 2^-32, exactly as the attention kernel holds keys in shared memory.
cudaError_t decode_kv_rows(const uint8_t* pool,
                           bool fp8,
                           const int32_t* slots,
                           int64_t num_rows,
                           uint16_t* out,
                           cudaStream_t stream);

// Test hook: the sparse attention epilogue's division (attn::ExactDivider) of x[i] by den[i]
// into fast[i] (__fdiv_rn where its range check fails, in_range[i] = 0), and __fdiv_rn into
// ieee[i].
cudaError_t exact_divide_check(const float* x,
                               const float* den,
                               int64_t n,
                               float* fast,
                               float* ieee,
                               uint8_t* in_range,
                               cudaStream_t stream);

}  // namespace di::backend::cuda
