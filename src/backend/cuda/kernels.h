// Host-side launchers of the CUDA kernels. Every pointer is device memory; every launcher only
// enqueues work on `stream` (no host synchronisation) and returns the launch's error, if any.
// Numerics are those of the CPU backend (docs/design/2026-11-29-cuda-backend.md): each kernel's
// comment says whether it is bitwise equal to its kernels/ref twin.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/ops.h"

namespace di::backend::cuda {

// A weight matrix resident in device memory, in its checkpoint storage format.
struct DeviceWeight {
  WeightFormat format = WeightFormat::kBF16;
  int64_t out_features = 0;
  int64_t in_features = 0;
  const uint8_t* data = nullptr;
  const uint8_t* scale = nullptr;
};

// --- elementwise.cu (bitwise: quantizers, rms_norm, hc_collapse/expand; rope, swiglu and
// engram_gate use correctly rounded exp/sin/cos, see device_numeric.cuh) ---
cudaError_t fake_quant_fp8(float* x, int64_t rows, int64_t cols, int block, cudaStream_t s);
cudaError_t fake_quant_fp4(float* x, int64_t rows, int64_t cols, Fp4ScaleKind kind, cudaStream_t s);
// act_quant for a GEMM: e4m3 values (as floats) [rows, cols] and ue8m0 scales [rows, cols / 32].
cudaError_t quantize_fp8(
    const float* x, int64_t rows, int64_t cols, float* q, float* scales, cudaStream_t s);
cudaError_t rms_norm(const float* x,
                     int64_t rows,
                     int64_t cols,
                     const float* w,
                     float eps,
                     float* y,
                     cudaStream_t s);
cudaError_t rope(float* x,
                 int64_t rows,
                 int64_t row_stride,
                 int num_heads,
                 int head_dim,
                 int rope_offset,
                 const int64_t* positions,
                 const float* inv_freq,
                 int num_freq,
                 bool inverse,
                 cudaStream_t s);
cudaError_t swiglu(const float* gate,
                   const float* up,
                   int64_t rows,
                   int64_t cols,
                   const float* row_weight,
                   float limit,
                   float* out,
                   cudaStream_t s);
cudaError_t hc_collapse(
    const float* x, const float* pre, int64_t rows, int hc, int64_t dim, float* y, cudaStream_t s);
cudaError_t hc_expand(const float* y,
                      const float* residual,
                      const HcCoefficients* coeff,
                      int64_t rows,
                      int hc,
                      int64_t dim,
                      float* out,
                      cudaStream_t s);
cudaError_t engram_gate(float* x,
                        const float* kv,
                        const float* qk_weight,
                        int64_t rows,
                        int hc,
                        int64_t dim,
                        float eps,
                        float inv_sqrt_dim,
                        cudaStream_t s);

// Compressor pooling of `groups` groups: out[g, d] = sum_i kv[g][i, d] * softmax_i(score[g][:, d])
// over the `group` rows of [group, dim] at kv[g], score[g] (device pointer tables; exp: see
// device_numeric.cuh).
cudaError_t softmax_pool(const float* const* kv,
                         const float* const* score,
                         int64_t groups,
                         int group,
                         int64_t dim,
                         float* out,
                         cudaStream_t s);

// --- memory.cu (copies) ---
// out[r, k * dim + d] = table[tokens[r], d] for k < copies (a BF16 or F32 table; out rows of
// out_cols floats).
cudaError_t embed_rows(const DeviceWeight& table,
                       const int32_t* tokens,
                       int64_t rows,
                       int copies,
                       float* out,
                       int64_t out_cols,
                       cudaStream_t s);
// out[i, d] = bf16(e4m3(data[index[i], d]) * e8m0(scale[index[i], d / 32])) for d < width
// (a multiple of 32), i < rows (the Engram embeddings; CpuOps::gather_fp8_rows' bits).
cudaError_t gather_fp8_rows(const uint8_t* data,
                            const uint8_t* scale,
                            int64_t width,
                            const int32_t* index,
                            int64_t rows,
                            float* out,
                            cudaStream_t s);
// --- engram_hash.cu ---
inline constexpr int kEngramMaxNgram = 8;
// Ops::engram_hash_rows on device arrays (EngramHashArgs' fields; max_ngram <= kEngramMaxNgram).
cudaError_t engram_hash_rows(const int32_t* tokens,
                             const int32_t* rows,
                             int64_t num_rows,
                             const int32_t* look_back,
                             const int32_t* token_map,
                             int64_t map_size,
                             int max_ngram,
                             int heads,
                             const int64_t* multipliers,
                             const int64_t* primes,
                             const int64_t* offsets,
                             int32_t pad,
                             int32_t* out,
                             cudaStream_t s);
// dst[r * dst_stride + c] = src[r * src_stride + c] for r < rows, c < width (not overlapping),
// and dst[0, n) = value: kernels, so the stream's programmatic overlap goes on across them.
cudaError_t copy_2d(const float* src,
                    int64_t src_stride,
                    float* dst,
                    int64_t dst_stride,
                    int64_t width,
                    int64_t rows,
                    cudaStream_t s);
cudaError_t fill(float* dst, float value, int64_t n, cudaStream_t s);
// dst[0, bytes) = host_mapped[0, bytes): pinned host memory (16-byte aligned, readable up to the
// next multiple of 16) mapped into the device's address space, copied by a kernel whose reads
// come before its wait for the previous grid.
cudaError_t upload_from_mapped(const void* host_mapped, void* dst, size_t bytes, cudaStream_t s);
// dst[i][0, width) = src[i][0, width) for i < n (device pointer tables).
cudaError_t copy_rows(
    const float* const* src, float* const* dst, int64_t n, int64_t width, cudaStream_t s);
// dst[i] = src[rows[i]] for rows of `cols` floats (rows: device indices, n of them).
cudaError_t gather_rows(
    const float* src, int64_t cols, const int64_t* rows, int64_t n, float* dst, cudaStream_t s);
// dst[i] = *ptrs[i] for n rows of `width` floats (ptrs: a device array of device pointers).
cudaError_t gather_pointed_rows(
    const float* const* ptrs, int64_t n, int64_t width, float* dst, cudaStream_t s);
// dst[rows[i]] += src[i] (fp32; rows distinct) and out = bf16(a + b): the MoE combine (bitwise).
cudaError_t add_rows(
    const float* src, int64_t cols, const int64_t* rows, int64_t n, float* dst, cudaStream_t s);
cudaError_t add_round_bf16(const float* a, const float* b, int64_t n, float* out, cudaStream_t s);
// x = bf16(x * scale) in place (bitwise).
cudaError_t scale_round_bf16(float* x, int64_t n, float scale, cudaStream_t s);
// *out += backend/checksum.h's checksum of `bytes` bytes at p (op tracing; *out starts at 0).
cudaError_t add_checksum(const void* p, size_t bytes, uint64_t* out, cudaStream_t s);

// --- hc_mixes.cu (bitwise up to exp's last bit) ---
// The mix product raw [rows, mix] = x . fn^T (fn [mix, hc_dim] f32, unrounded) and the sum of
// squares of each row of x, in dot_f32's order, one block per (output, row) with the products
// in shared memory; hc_mix_products_fit says whether 2 * hc_dim floats fit a block's (the kernel
// needs about half that; the test keeps which products take this path unchanged).
bool hc_mix_products_fit(int64_t hc_dim);
cudaError_t hc_mix_products(const float* x,
                            int64_t rows,
                            int64_t hc_dim,
                            const float* fn,
                            int mix,
                            float* raw,
                            float* sum_squares,
                            cudaStream_t s);
// The sums of squares alone (the same blocks' o == mix part), for rows whose mix product is
// dense_gemm's; needs hc_mix_products_fit.
cudaError_t hc_sum_squares(
    const float* x, int64_t rows, int64_t hc_dim, float* sum_squares, cudaStream_t s);
// Block.hc_mixes after the mix product: raw [rows, (2+hc)*hc] holds x . fn (hc_mix_products or
// dense_gemm with the F32 fn, unrounded); x [rows, hc_dim] gives the RMS factor, from
// `sum_squares` [rows] when given. hc <= HcCoefficients::kMaxHc.
cudaError_t hc_mixes(const float* x,
                     int64_t rows,
                     int64_t hc_dim,
                     const float* sum_squares,
                     const float* raw,
                     const float* scale,
                     const float* base,
                     int hc,
                     int sinkhorn_iters,
                     float hc_eps,
                     float norm_eps,
                     HcCoefficients* out,
                     cudaStream_t s);

// --- moe_route.cu (bitwise up to exp/log1p's last bit; ties to the lower index) ---
// Router tail on raw [rows, num_experts] = x . gate (fp32): experts and weights [rows, topk].
// bias may be null.
cudaError_t moe_route(const float* raw,
                      int64_t rows,
                      const float* bias,
                      const RouteParams& p,
                      int32_t* experts,
                      float* weights,
                      cudaStream_t s);

// --- gemm.cu (bitwise) ---
// y = bf16(sum over 32-blocks in K order of (block dot * a_scale) * w_scale) for FP8/FP4 weights.
cudaError_t block_scaled_gemm(const float* q,
                              const float* scales,
                              int64_t rows,
                              const DeviceWeight& w,
                              float* y,
                              cudaStream_t s);
// --- gemm_skinny.cu (bitwise, few rows: decode) ---
// block_scaled_gemm for 1..kSkinnyMaxRows rows, streaming the weights through shared memory near
// the copy bandwidth. FP8/FP4 weights with in_features % 128 == 0 (skinny_gemm_supports).
// Variants (0..kSkinnyVariants-1: 8, 16, 32 columns per CTA at one CTA per SM, then the same at
// two CTAs per SM) give the same bits.
inline constexpr int64_t kSkinnyMaxRows = 64;
inline constexpr int kSkinnyVariants = 6;
bool skinny_gemm_supports(int64_t rows, const DeviceWeight& w);
int skinny_gemm_pick(int64_t rows, const DeviceWeight& w);
cudaError_t skinny_gemm(const float* q,
                        const float* scales,
                        int64_t rows,
                        const DeviceWeight& w,
                        float* y,
                        cudaStream_t s);
cudaError_t skinny_gemm_variant(int variant,
                                const float* q,
                                const float* scales,
                                int64_t rows,
                                const DeviceWeight& w,
                                float* y,
                                cudaStream_t s);

// (moe_grouped.h: the routed experts of an MoE layer on the device, with device-side counts.)

// --- gemm_tc.cu (tensor cores; tolerance vs the CPU, bitwise batch-invariant) ---
// The same product from e4m3 activation bytes `qa` [rows, in] (quantize_fp8_e4m3's output): each
// 32-block sum is an MMA's, then scaled and accumulated in K order. FP8 weights only;
// cudaErrorNotSupported below sm_89.
cudaError_t block_scaled_gemm_tc(const uint8_t* qa,
                                 const float* scales,
                                 int64_t rows,
                                 const DeviceWeight& w,
                                 float* y,
                                 cudaStream_t s);
// One tile configuration of the above by number (0..kTensorGemmVariants-1), for the benchmark and
// the batch-invariance test; all give the same bits.
inline constexpr int kTensorGemmVariants = 8;
cudaError_t block_scaled_gemm_tc_variant(int variant,
                                         const uint8_t* qa,
                                         const float* scales,
                                         int64_t rows,
                                         const DeviceWeight& w,
                                         float* y,
                                         cudaStream_t s);
// Few rows (1..8) with act_quant fused in: x is the unquantized fp32 activation [rows, in]. The
// same bits as quantize_fp8_e4m3 + block_scaled_gemm_tc. Measured slower than those two launches
// (its in-CTA quantization is serial); kept for the benchmark and the bitwise test.
// tensor_decode_fits says whether the rows' quantized activations fit in shared memory (else
// cudaErrorInvalidValue).
inline constexpr int kTensorDecodeVariants = 4;
bool tensor_decode_fits(int64_t rows, int64_t in_features);
cudaError_t block_scaled_gemm_tc_decode(
    int variant, const float* x, int64_t rows, const DeviceWeight& w, float* y, cudaStream_t s);
// --- gemm_wgmma.cu (sm_90a wgmma + TMA; the sequence of block_scaled_gemm_tc, but each k32 block
// sum is an FP8 wgmma's, whose truncating accumulation is ~30x less accurate: CudaGemm::kFp8) ---
// Whether the wgmma kernel can run this product here: an sm_90 device, FP8 weights, K % 128 == 0
// and 16-byte aligned operands.
bool wgmma_gemm_applies(const uint8_t* qa, const float* scales, const DeviceWeight& w);
// One tile configuration by number (0..kWgmmaGemmVariants-1): 0 is 128 x 128 (two consumer
// warpgroups), 1-3 are 64 x {128, 64, 32}, 4 is 0 without the overlapped promotion. All give
// the same bits. cudaErrorNotSupported where
// wgmma_gemm_applies is false.
inline constexpr int kWgmmaGemmVariants = 5;
cudaError_t block_scaled_gemm_wgmma(int variant,
                                    const uint8_t* qa,
                                    const float* scales,
                                    int64_t rows,
                                    const DeviceWeight& w,
                                    float* y,
                                    cudaStream_t s);
// The CudaGemm::kFp8 path, every M on one family of equal bits: block_scaled_gemm_wgmma's small
// tiles for few rows, block_scaled_gemm_fp8 (gemm_fp8.h) above them; block_scaled_gemm_tc where the
// wgmma kernels do not apply (K % 128 != 0).
cudaError_t block_scaled_gemm_wg(const uint8_t* qa,
                                 const float* scales,
                                 int64_t rows,
                                 const DeviceWeight& w,
                                 float* y,
                                 cudaStream_t s);
// --- gemm_wgmma_bf16.cu (sm_90a bf16 wgmma, weights e4m3 -> bf16 in registers; the tensor path's
// kernel on sm_90 for K % 128 == 0) ---
// act_quant with the scale folded in: xb [rows, cols] = bf16 bits of q * scale (exact).
cudaError_t quantize_fp8_bf16(
    const float* x, int64_t rows, int64_t cols, uint16_t* xb, cudaStream_t s);
// Whether the bf16 wgmma kernel takes this weight here: an sm_90 device, FP8, K % 128 == 0,
// aligned data (null pointers pass: a shape check before upload). xb must be 16-byte aligned.
bool wgmma_bf16_applies(const DeviceWeight& w);
// The kernel's weight layout (wgmma_bf16_layout.cu): the bytes of each 16 rows x 128 K in the
// order its lanes read them, rows padded with zeros to a multiple of 16. w: e4m3 [rows, K] on the
// device, K % 128 == 0; out: wgmma_bf16_layout_bytes(rows, K) bytes, 4-byte aligned. Chunks of
// rows starting at multiples of 16 may be permuted separately (out + first_row * K).
int64_t wgmma_bf16_layout_bytes(int64_t rows, int64_t K);
cudaError_t wgmma_bf16_permute(
    const uint8_t* w, int64_t rows, int64_t K, uint8_t* out, cudaStream_t s);
// y = the block-scaled product from quantize_fp8_bf16's xb, w.data in wgmma_bf16_permute's layout
// (w.scale as stored); the tile by M, or one configuration by number (0..kWgmmaBf16Variants-1:
// 128 features x {128, 64} tokens, 64 x {32, 8}; 4 is 0 with the A fragments loaded after the
// promotion, for comparison; 5 and 6 are 3 with 16 and 12 stages in flight). All give the same
// bits.
cudaError_t block_scaled_gemm_wgmma_bf16(
    const uint16_t* xb, int64_t rows, const DeviceWeight& w, float* y, cudaStream_t s);
inline constexpr int kWgmmaBf16Variants = 11;
cudaError_t block_scaled_gemm_wgmma_bf16(
    int variant, const uint16_t* xb, int64_t rows, const DeviceWeight& w, float* y, cudaStream_t s);
// The same product from the original row-major weights (the 128 x 128 tile as it was before the
// lane-order layout): the same bits; the reference in tests and the benchmark.
cudaError_t block_scaled_gemm_wgmma_bf16_rowmajor(
    const uint16_t* xb, int64_t rows, const DeviceWeight& w, float* y, cudaStream_t s);
// act_quant with e4m3 bytes out: the values and scales of quantize_fp8, bit for bit.
cudaError_t quantize_fp8_e4m3(
    const float* x, int64_t rows, int64_t cols, uint8_t* qa, float* scales, cudaStream_t s);

// BF16/F32 weights: y = x . w in the 8-lane order, bf16-rounded when round_bf16.
cudaError_t dense_gemm(
    const float* x, int64_t rows, const DeviceWeight& w, float* y, bool round_bf16, cudaStream_t s);
// Block-diagonal w [groups * out, K] over x [rows, groups * K] (Ops::grouped_linear).
cudaError_t dense_gemm_grouped(const float* x,
                               int64_t rows,
                               const DeviceWeight& w,
                               int groups,
                               float* y,
                               bool round_bf16,
                               cudaStream_t s);

// --- gemv_dense.cu (bitwise = dense_gemm) ---
// The same product for few rows (one thread per output column, the eight lanes as independent
// accumulators): needs K * element size % 128 == 0 and 16-byte aligned weights and x rows. With
// groups > 1, w [groups * out, K] is block-diagonal: x is [rows, groups * K] and output n reads x's
// group n / out (Ops::grouped_linear).
inline constexpr int64_t kDenseGemvMaxRows = 8;
// Tensor-path dense BF16 products (dense_bf16_tc.cu): x as bf16 bits [rows, groups * in], bf16
// MMAs with fp32 accumulation, the same bits for every M (batch-invariant, within tolerance of the
// CPU). `linear` uses it for weights with >= 16K outputs or >= kDenseTcLinearMinOutputs in whole
// 128-feature tiles (applies), `grouped_linear` for every BF16 weight it supports (each group's
// outputs a multiple of 16). x must be bf16-valued for the products to be exact (the callers'
// x are: normed hidden states, the attention output).
// Two kernels, the same bits for every output: row groups (each warp streams its weight rows
// from global memory, the fastest at few rows) and shared tiles (128 features x 64 rows per CTA
// from shared memory, for many rows or many outputs; needs each group's outputs a multiple of
// 128; 16- and 32-row tiles up to 16 and 32 rows, kSharedTileWide forces the 64-row one). kAuto
// picks by rows and outputs (the overload without `kernel`); the others force one (tests and
// benchmarks).
// kWgmma (sm_90 only, cudaErrorNotSupported elsewhere): the shared-tile shapes on wgmma with the
// same bits (dense_bf16_wgmma.cu; 64-row tiles up to 64 rows, kWgmmaWide forces the 128-row one,
// kWgmmaDrain drains the wgmmas per stage); kAuto takes it on sm_90 from kDenseTcWgmmaMinRows
// rows, and from kDenseTcWgmmaMinRowsFew for products below kDenseTcTiledMinOutputs (wo_a).
enum class DenseTcKernel {
  kAuto,
  kRowGroups,
  kSharedTile,
  kSharedTileWide,
  kWgmma,
  kWgmmaWide,
  kWgmmaDrain
};
inline constexpr int64_t kDenseTcWgmmaMinRows = 64;     // the head: 0.41 vs 0.45 ms at 64 rows
inline constexpr int64_t kDenseTcWgmmaMinRowsFew = 32;  // wo_a: 0.041 vs 0.048 ms at 32 rows
inline constexpr int64_t kDenseTcTiledMinRows = 16;     // wo_a: 16-row tile 39 vs 53 us at 16 rows
inline constexpr int64_t kDenseTcTiledMinOutputs = 32768;  // 256 feature tiles: 2 per SM
inline constexpr int64_t kDenseTcLinearMinOutputs = 512;   // the compressor's wkv / wgate
bool dense_bf16_tc_supports(const DeviceWeight& w, int groups);
bool dense_bf16_tc_tiled_supports(const DeviceWeight& w, int groups);
bool dense_bf16_tc_applies(const DeviceWeight& w);
cudaError_t dense_bf16_tc(const uint16_t* x,
                          int64_t rows,
                          const DeviceWeight& w,
                          int groups,
                          float* y,
                          bool round_bf16,
                          cudaStream_t s);
cudaError_t dense_bf16_tc(const uint16_t* x,
                          int64_t rows,
                          const DeviceWeight& w,
                          int groups,
                          float* y,
                          bool round_bf16,
                          cudaStream_t s,
                          DenseTcKernel kernel);
bool dense_gemv_applies(int64_t rows, const DeviceWeight& w);
cudaError_t dense_gemv(const float* x,
                       int64_t rows,
                       const DeviceWeight& w,
                       int groups,
                       float* y,
                       bool round_bf16,
                       cudaStream_t s);

// --- dense_tiled.cu (bitwise = dense_gemm) ---
// The same product for many rows as a register-tiled SIMT GEMM: x and w tiles staged in shared
// memory, eight threads per output tile (one per dot_f32 lane), each owning a small tile of
// outputs; any K, any alignment, groups as in dense_gemm_grouped. kAuto picks the tile by shape;
// the others force one (tests and benchmarks). The same bits for every tile and every row count.
enum class DenseTiledTile { kAuto, kNarrow, kTiny, kSmall, kLarge };
// Whether `linear` / `grouped_linear` should take it (rows and outputs, measured on the H200).
bool dense_tiled_applies(int64_t rows, const DeviceWeight& w, int groups);
cudaError_t dense_tiled(const float* x,
                        int64_t rows,
                        const DeviceWeight& w,
                        int groups,
                        float* y,
                        bool round_bf16,
                        cudaStream_t s,
                        DenseTiledTile tile = DenseTiledTile::kAuto);

// --- dense_staged.cu (bitwise = dense_gemm) ---
// The same product as a block per (output, row) over shared-memory copies, for few outputs:
// needs K % 8 == 0, K * (4 + element size) <= 48 KB and 16-byte aligned weights and x rows.
bool dense_staged_applies(int64_t rows, const DeviceWeight& w);
cudaError_t dense_staged(
    const float* x, int64_t rows, const DeviceWeight& w, float* y, bool round_bf16, cudaStream_t s);

// --- dense_octets.cu (bitwise = dense_staged) ---
// The same product for BF16 weights at 1-8 rows: an octet of threads per (output, row), a block
// per four outputs over shared-memory copies of their weight rows. Needs K % 8 == 0, 16-byte
// aligned weights and x rows, and 8 K bytes + 16.25 KB per row of shared memory <= 200 KB.
bool dense_octets_applies(int64_t rows, const DeviceWeight& w);
cudaError_t dense_octets(
    const float* x, int64_t rows, const DeviceWeight& w, float* y, bool round_bf16, cudaStream_t s);

// --- attention.cu ---
// Sparse sink attention; keys are rows of `kv` (head_dim floats) named per query by
// `key_index` [num_queries, num_keys], -1 for an empty slot (the layout FlashMLA's indices use).
cudaError_t sparse_attention(const float* q,
                             int64_t num_queries,
                             int num_heads,
                             int head_dim,
                             const float* kv,
                             const int32_t* key_index,
                             int64_t num_keys,
                             const float* sink,
                             float softmax_scale,
                             float* out,
                             cudaStream_t s);
// Index-key rows in a paged pool (ops.h IndexScoreArgs): key s of query t is pool row
// pages[page_offset[t] + s / per] * per + s % per, head_dim floats each.
struct PagedKeys {
  const float* pool = nullptr;
  const int32_t* pages = nullptr;
  const int64_t* page_offset = nullptr;
  int per = 1;
};
// Indexer scores over paged key rows (bitwise): the tensor-core kernel where it fits, else the
// CUDA-core one.
cudaError_t index_scores(const float* q,
                         const float* weights,
                         int64_t num_queries,
                         int num_heads,
                         int head_dim,
                         const PagedKeys& keys,
                         int64_t num_keys,
                         const int64_t* num_visible,
                         float* scores,
                         cudaStream_t s);

// The CUDA-core kernels (a thread or a block per (query, key); any shape), bitwise.
cudaError_t index_scores_simt(const float* q,
                              const float* weights,
                              int64_t num_queries,
                              int num_heads,
                              int head_dim,
                              const PagedKeys& keys,
                              int64_t num_keys,
                              const int64_t* num_visible,
                              float* scores,
                              cudaStream_t s);
// The tensor-core kernel (index_scores_tc.cu), bitwise: up to 64 heads of 32, 64 or 128 dims.
// keys_per_cta <= 0 picks it from the sizes; `fallbacks` (optional, device) counts the (key, head)
// dot products recomputed on CUDA cores because the MMA could have rounded them.
bool index_scores_tc_fits(int num_heads, int head_dim);
cudaError_t index_scores_tc(const float* q,
                            const float* weights,
                            int64_t num_queries,
                            int num_heads,
                            int head_dim,
                            const PagedKeys& keys,
                            int64_t num_keys,
                            const int64_t* num_visible,
                            float* scores,
                            cudaStream_t s,
                            int keys_per_cta = 0,
                            unsigned long long* fallbacks = nullptr);

}  // namespace di::backend::cuda
