// The steps of the sparse attention kernels (sparse_attention_fp8.cu: one block walks all key
// blocks; sparse_attention_split.cu: scores per key block on many blocks, then softmax and PV).
// Both kernels run these same functions, so a head's arithmetic (the fp32 S of each key, the
// running maxima, p, the per-block denominators, the PV accumulation chain) is the same
// instruction sequence whichever kernel or tiling runs it: outputs are bitwise the same.
// Tiles in shared memory are [rows][chunks] of 16-byte chunks, XOR-swizzled by row (swz).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "backend/cuda/kv_cache_decode.cuh"
#include "backend/cuda/mma_bf16.cuh"
#include "backend/cuda/mma_e4m3.cuh"
#include "backend/cuda/sparse_attention_fp8.h"
#include "backend/cuda/wgmma_ptx.cuh"

namespace di::backend::cuda::attn {

inline constexpr int kThreads = 256;
inline constexpr int kWarps = kThreads / 32;
inline constexpr int kBlockKeys = 64;
inline constexpr int kRawBytes = kBlockKeys * kKvFp8RowBytes;  // one stage of stored rows
inline constexpr float kLog2e = 1.4426950408889634f;

// Warp roles for H heads per block: row group rg (16 heads) x wk (a key range for S, a dim
// range for PV).
template <int H>
struct Split {
  static constexpr int kRowGroups = H / 16;
  static constexpr int kWk = kWarps / kRowGroups;  // warps sharing a row group
  static constexpr int kKeysPerWarp = kBlockKeys / kWk;
  static constexpr int kNtS = kKeysPerWarp / 8;  // S n-tiles per warp
};

// Copies query t's key indices (window, then extra) to shared memory idx[num_keys], four loads in
// flight per thread (one global round trip for up to 4 * kThreads keys, not one per kThreads).
__device__ __forceinline__ void stage_indices(int32_t* idx,
                                              const SparseAttentionFp8Args& a,
                                              int64_t t) {
  const int num_win = a.num_indices, num_keys = a.num_indices + a.num_extra;
  for (int j0 = threadIdx.x; j0 < num_keys; j0 += 4 * kThreads) {
    int32_t v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int j = j0 + u * kThreads;
      v[u] = j >= num_keys ? 0
             : j < num_win ? a.indices[t * num_win + j]
                           : a.extra_indices[t * a.num_extra + j - num_win];
    }
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      if (j0 + u * kThreads < num_keys) idx[j0 + u * kThreads] = v[u];
    }
  }
}

// The stored FP8 row of window index `row` (>= 0): the pool's, or the call's fresh rows from
// fresh_from on (the model's current chunk, not in the pool yet).
__device__ __forceinline__ const uint8_t* fp8_row(const SparseAttentionFp8Args& a, int32_t row) {
  return row < a.fresh_from
             ? a.kv + static_cast<int64_t>(row) * kKvFp8RowBytes
             : a.fresh_kv + static_cast<int64_t>(row - a.fresh_from) * kKvFp8RowBytes;
}

// This lane's 16 dims (16 lane .. 16 lane + 15) of stored row `index` (>= 0; FP8 window rows
// through fp8_row, else FP4 compressed rows) decoded to 8 bf16 pairs times 2^-32.
__device__ __forceinline__ void decode_stored_row(
    const SparseAttentionFp8Args& a, bool fp8, int32_t index, int lane, uint32_t (&v)[8]) {
  if (fp8) {
    const uint8_t* row = fp8_row(a, index);
    decode_fp8x16(*reinterpret_cast<const uint4*>(row + lane * 16), row[512 + lane / 2], v);
  } else {
    const uint8_t* row = a.extra_kv + static_cast<int64_t>(index) * kKvFp4RowBytes;
    decode_fp4x16(*reinterpret_cast<const uint2*>(row + lane * 8), row[256 + lane], v);
  }
}

// Issues the cp.async copies of one key block's stored rows into `raw`. bidx: the block's 64
// indices; j0: the block's first key (keys >= num_win are FP4 rows).
__device__ __forceinline__ void load_block(uint8_t* raw,
                                           const int32_t* bidx,
                                           int j0,
                                           int num_win,
                                           int num_keys,
                                           const SparseAttentionFp8Args& a) {
  // Warp w copies keys w, w + 8, ...: one row per warp step, lane = 16-byte chunk (a FP8 row has
  // 33 chunks, a FP4 row 18), so each row is one contiguous warp-wide read.
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int i = 0; i < kBlockKeys / kWarps; ++i) {
    const int k = warp + kWarps * i;
    const int j = j0 + k;
    const int32_t row = j < num_keys ? bidx[k] : -1;
    if (row < 0) continue;
    uint8_t* dst = raw + k * kKvFp8RowBytes + lane * 16;
    if (j < num_win) {
      const uint8_t* src = fp8_row(a, row) + lane * 16;
      cp_async16(dst, src, 16);
      if (lane == 0) cp_async16(dst + 512, src + 512, 16);
    } else if (lane < kKvFp4RowBytes / 16) {
      cp_async16(dst, a.extra_kv + static_cast<int64_t>(row) * kKvFp4RowBytes + lane * 16, 16);
    }
  }
}

// Decodes `raw` into the bf16 key tile [64][64 chunks] (times 2^-32); empty slots become zeros
// so that their p = 0 multiplies zeros, not stale values. kFormat: 1 all FP8, 2 all FP4, 0 mixed.
template <int kFormat>
__device__ __forceinline__ void decode_keys(
    uint8_t* ks, const uint8_t* raw, const int32_t* bidx, int j0, int num_win, int num_keys) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  static_assert(kWarps == 8, "the swizzle shortcut below needs k & 7 == warp");
#pragma unroll
  for (int i = 0; i < kBlockKeys / kWarps; ++i) {  // warp-uniform key: lane = 16-dim unit
    const int k = warp + kWarps * i;
    const int j = j0 + k;
    const bool empty = j >= num_keys || bidx[k] < 0;
    const uint8_t* src = raw + k * kKvFp8RowBytes;
    uint32_t v[8];
    const bool fp8 = kFormat == 1 || (kFormat == 0 && j < num_win);
    if (fp8) {
      decode_fp8x16(*reinterpret_cast<const uint4*>(src + lane * 16), src[512 + lane / 2], v);
    } else {
      decode_fp4x16(*reinterpret_cast<const uint2*>(src + lane * 8), src[256 + lane], v);
    }
#pragma unroll
    for (int w = 0; w < 8; ++w) v[w] = empty ? 0u : v[w];
    // swz(k, c, 64) with k & 7 == warp: a per-thread constant plus k * 1024.
    uint8_t* row = ks + k * kKvDim * 2;
    *reinterpret_cast<uint4*>(row + (((2 * lane) ^ warp) << 4)) =
        make_uint4(v[0], v[1], v[2], v[3]);
    *reinterpret_cast<uint4*>(row + (((2 * lane + 1) ^ warp) << 4)) =
        make_uint4(v[4], v[5], v[6], v[7]);
  }
}

__device__ __forceinline__ void decode_block(
    uint8_t* ks, const uint8_t* raw, const int32_t* bidx, int j0, int num_win, int num_keys) {
  if (j0 + kBlockKeys <= num_win) {
    decode_keys<1>(ks, raw, bidx, j0, num_win, num_keys);
  } else if (j0 >= num_win) {
    decode_keys<2>(ks, raw, bidx, j0, num_win, num_keys);
  } else {
    decode_keys<0>(ks, raw, bidx, j0, num_win, num_keys);
  }
}

// Logits in the log2 domain for the warp's 16 heads (row group rg) x 8 * kNtS keys from key0:
// s2 = (q.k) * scale (scale includes 2^32 and log2(e)); empty slots are -inf. Each logit is one
// chain of 32 MMAs over the dims in order, whatever the tiling. Every lane must call it.
template <int kNtS>
__device__ __forceinline__ void block_scores(float (&s)[kNtS][4],
                                             uint32_t qs_a,
                                             uint32_t ks_a,
                                             const int32_t* bidx,
                                             int j0,
                                             int num_keys,
                                             int rg,
                                             int key0,
                                             float scale,
                                             bool do_mma) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int n = 0; n < kNtS; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
    // Fully unrolled: the loads of later steps issue ahead of earlier MMAs (measured on the H200,
    // docs/benchmarks.md session 14: -1.6 to -3.7 % against unroll 8; the same MMA chains).
#pragma unroll
  for (int kk = 0; kk < kKvDim / 16; ++kk) {
    if (!do_mma) break;
    uint32_t qa[4];
    ldsm_x4(qa, qs_a + swz(rg * 16 + (lane & 15), 2 * kk + (lane >> 4), 64));
    if constexpr (kNtS == 1) {
      uint32_t kb[4];  // matrices: keys 0-7 x dims (0-7, 8-15) of this step, twice
      ldsm_x4(kb, ks_a + swz(key0 + (lane & 7), 2 * kk + ((lane >> 3) & 1), 64));
      mma_bf16(s[0], qa, kb[0], kb[1]);
    } else {
#pragma unroll
      for (int p = 0; p < kNtS / 2; ++p) {
        uint32_t kb[4];
        ldsm_x4(kb, ks_a + swz(key0 + 16 * p + (lane & 7) + ((lane >> 4) << 3),
                               2 * kk + ((lane >> 3) & 1), 64));
        mma_bf16(s[2 * p], qa, kb[0], kb[1]);
        mma_bf16(s[2 * p + 1], qa, kb[2], kb[3]);
      }
    }
  }
  // Scale and mask empty slots (a 64-bit ballot of the block's keys).
  const int tq = lane & 3;
  const uint32_t lo = __ballot_sync(0xffffffffu, j0 + lane < num_keys && bidx[lane] >= 0);
  const uint32_t hi = __ballot_sync(0xffffffffu, j0 + lane + 32 < num_keys && bidx[lane + 32] >= 0);
  const uint64_t valid = ((static_cast<uint64_t>(hi) << 32) | lo) >> (key0 + 2 * tq);
#pragma unroll
  for (int n = 0; n < kNtS; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      s[n][e] = (valid >> (8 * n + (e & 1))) & 1 ? __fmul_rn(s[n][e], scale) : -INFINITY;
    }
  }
}

// Online softmax step for one key block, kernels::sparse_attention_query's order: the block's
// row maxima (exchanged through red_max [kWk][H]), the new running max, rescale = 2^(old - new),
// P = bf16(2^(s - max)) into the [H][8 chunks] tile ps, and the denominators. Each block's sum is
// taken in one fixed order for any tiling (8-key groups by the same shuffles into red_sum [H][8],
// then the 8 groups in a fixed tree), so a head's bits do not depend on the split. Contains two
// __syncthreads: every thread calls it. resc_out (optional): the rescale per head [H], written
// by the wk == 0 warps before the second barrier. kAsyncP: P is read by wgmma (the async proxy),
// so the writers fence before the barrier.
template <int H, int kNtS, bool kAsyncP = false>
__device__ __forceinline__ void block_softmax(float (&s)[kNtS][4],
                                              float (&m_run)[2],
                                              float (&l_run)[2],
                                              float (&rescale)[2],
                                              float* red_max,
                                              float* red_sum,
                                              uint8_t* ps,
                                              int rg,
                                              int wk,
                                              int key0,
                                              float* resc_out = nullptr) {
  constexpr int kWk = Split<H>::kWk;
  const int lane = threadIdx.x & 31;
  const int g = lane >> 2, tq = lane & 3;
  const int row0 = rg * 16 + g, row1 = row0 + 8;
  float bmax[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int n = 0; n < kNtS; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) bmax[e >> 1] = fmaxf(bmax[e >> 1], s[n][e]);
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    bmax[r] = fmaxf(bmax[r], __shfl_xor_sync(0xffffffffu, bmax[r], 1));
    bmax[r] = fmaxf(bmax[r], __shfl_xor_sync(0xffffffffu, bmax[r], 2));
  }
  if (tq == 0) {
    red_max[wk * H + row0] = bmax[0];
    red_max[wk * H + row1] = bmax[1];
  }
  __syncthreads();
  float m_new[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    m_new[r] = m_run[r];
#pragma unroll
    for (int w = 0; w < kWk; ++w) m_new[r] = fmaxf(m_new[r], red_max[w * H + (r ? row1 : row0)]);
    rescale[r] = exp2_approx(__fsub_rn(m_run[r], m_new[r]));
    m_run[r] = m_new[r];
  }
  // P = bf16(exp(s - max)) to shared memory; the denominators take the unrounded p.
#pragma unroll
  for (int n = 0; n < kNtS; ++n) {
    float p[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) p[e] = exp2_approx(__fsub_rn(s[n][e], m_new[e >> 1]));
    float g0 = __fadd_rn(p[0], p[1]), g1 = __fadd_rn(p[2], p[3]);
    g0 = __fadd_rn(g0, __shfl_xor_sync(0xffffffffu, g0, 1));
    g1 = __fadd_rn(g1, __shfl_xor_sync(0xffffffffu, g1, 1));
    g0 = __fadd_rn(g0, __shfl_xor_sync(0xffffffffu, g0, 2));
    g1 = __fadd_rn(g1, __shfl_xor_sync(0xffffffffu, g1, 2));
    const int col = key0 + 8 * n + 2 * tq;  // key within the block
    if (tq == 0) {
      red_sum[row0 * 8 + col / 8] = g0;
      red_sum[row1 * 8 + col / 8] = g1;
    }
    const uint32_t c0 = swz(row0, col / 8, 8) + (col % 8) * 2;
    const uint32_t c1 = swz(row1, col / 8, 8) + (col % 8) * 2;
    *reinterpret_cast<uint32_t*>(ps + c0) = pack_bf16(p[0], p[1]);
    *reinterpret_cast<uint32_t*>(ps + c1) = pack_bf16(p[2], p[3]);
  }
  if (resc_out != nullptr && wk == 0 && tq == 0) {
    resc_out[row0] = rescale[0];
    resc_out[row1] = rescale[1];
  }
  if constexpr (kAsyncP) wg::fence_proxy_async();
  __syncthreads();
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float* gs = red_sum + (r ? row1 : row0) * 8;
    const float bsum = __fadd_rn(__fadd_rn(__fadd_rn(gs[0], gs[1]), __fadd_rn(gs[2], gs[3])),
                                 __fadd_rn(__fadd_rn(gs[4], gs[5]), __fadd_rn(gs[6], gs[7])));
    l_run[r] = __fadd_rn(__fmul_rn(l_run[r], rescale[r]), bsum);
  }
}

// O = O * rescale + P V for the warp's 16 heads x 8 * kNtO dims starting at 16-byte chunk
// dim_chunk0 of a value tile [64 keys][kChunks chunks]. Each output is one MMA chain over the
// keys in order (x * 1 is exact: skipped when the warp's maxima did not move).
template <int kNtO, int kChunks>
__device__ __forceinline__ void block_pv(float (&o)[kNtO][4],
                                         const float (&rescale)[2],
                                         uint32_t ps_a,
                                         uint32_t vs_a,
                                         int rg,
                                         int dim_chunk0,
                                         bool do_mma) {
  const int lane = threadIdx.x & 31;
  if (!__all_sync(0xffffffffu, rescale[0] == 1.0f && rescale[1] == 1.0f)) {
#pragma unroll
    for (int n = 0; n < kNtO; ++n) {
      o[n][0] = __fmul_rn(o[n][0], rescale[0]);
      o[n][1] = __fmul_rn(o[n][1], rescale[0]);
      o[n][2] = __fmul_rn(o[n][2], rescale[1]);
      o[n][3] = __fmul_rn(o[n][3], rescale[1]);
    }
  }
#pragma unroll
  for (int kk = 0; kk < kBlockKeys / 16; ++kk) {
    if (!do_mma) break;
    uint32_t pa[4];
    ldsm_x4(pa, ps_a + swz(rg * 16 + (lane & 15), 2 * kk + (lane >> 4), 8));
#pragma unroll
    for (int p = 0; p < kNtO / 2; ++p) {
      uint32_t vb[4];
      ldsm_x4_t(vb, vs_a + swz(16 * kk + (lane & 7) + ((lane >> 3) & 1) * 8,
                               dim_chunk0 + 2 * p + (lane >> 4), kChunks));
      mma_bf16(o[2 * p], pa, vb[0], vb[1]);
      mma_bf16(o[2 * p + 1], pa, vb[2], vb[3]);
    }
  }
}

// block_pv with the warp's tile across all heads: O = O * rescale + P V for kRowFrags * 16 heads
// x 8 * kNtO dims from 16-byte chunk dim_chunk0 of the [64 keys][64 chunks] value tile. Each
// value fragment is loaded once and used by every row fragment (block_pv reloads it per row
// group), so the block reads the value tile once per key block instead of once per row group.
// rescale: per row fragment, rows g and g + 8 (lane g = lane / 4). Each output is the same MMA
// chain over the keys in order as in block_pv: the same bits.
template <int kRowFrags, int kNtO>
__device__ __forceinline__ void block_pv_all_heads(float (&o)[kRowFrags][kNtO][4],
                                                   const float (&rescale)[kRowFrags][2],
                                                   uint32_t ps_a,
                                                   uint32_t vs_a,
                                                   int dim_chunk0,
                                                   bool do_mma) {
  const int lane = threadIdx.x & 31;
  bool ones = true;
#pragma unroll
  for (int f = 0; f < kRowFrags; ++f) ones = ones && rescale[f][0] == 1.0f && rescale[f][1] == 1.0f;
  if (!__all_sync(0xffffffffu, ones)) {
#pragma unroll
    for (int f = 0; f < kRowFrags; ++f) {
#pragma unroll
      for (int n = 0; n < kNtO; ++n) {
        o[f][n][0] = __fmul_rn(o[f][n][0], rescale[f][0]);
        o[f][n][1] = __fmul_rn(o[f][n][1], rescale[f][0]);
        o[f][n][2] = __fmul_rn(o[f][n][2], rescale[f][1]);
        o[f][n][3] = __fmul_rn(o[f][n][3], rescale[f][1]);
      }
    }
  }
#pragma unroll
  for (int kk = 0; kk < kBlockKeys / 16; ++kk) {
    if (!do_mma) break;
    uint32_t pa[kRowFrags][4];
#pragma unroll
    for (int f = 0; f < kRowFrags; ++f) {
      ldsm_x4(pa[f], ps_a + swz(f * 16 + (lane & 15), 2 * kk + (lane >> 4), 8));
    }
#pragma unroll
    for (int p = 0; p < kNtO / 2; ++p) {
      uint32_t vb[4];
      ldsm_x4_t(vb, vs_a + swz(16 * kk + (lane & 7) + ((lane >> 3) & 1) * 8,
                               dim_chunk0 + 2 * p + (lane >> 4), 64));
#pragma unroll
      for (int f = 0; f < kRowFrags; ++f) {
        mma_bf16(o[f][2 * p], pa[f], vb[0], vb[1]);
        mma_bf16(o[f][2 * p + 1], pa[f], vb[2], vb[3]);
      }
    }
  }
}

// 1 / softmax denominator's operand: l + 2^(sink - max), per row of the lane.
__device__ __forceinline__ void final_denominators(float (&inv)[2],
                                                   const float (&l_run)[2],
                                                   const float (&m_run)[2],
                                                   const float* sink,
                                                   int head_row0,
                                                   int head_row1) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float sink2 = __fmul_rn(sink[r ? head_row1 : head_row0], kLog2e);
    inv[r] = __fadd_rn(l_run[r], exp2_approx(__fsub_rn(sink2, m_run[r])));
  }
}

// x / den rounded to nearest (the bits of __fdiv_rn) for many x over one den, without the
// per-division reciprocal and branch of __fdiv_rn (which serialise an epilogue of 128 divisions a
// thread: docs/notes/cuda-kernels.md, session 17). y = RN(1 / den) once; then q0 = RN(x y) is
// within 1.5 ulp of x / den, one FMA correction makes it faithful and a second one correctly
// rounded (Markstein: with y = RN(1 / den) and q faithful, r = x - den q is exact and
// RN(q + r y) = RN(x / den)). The theorem needs no underflow or overflow in the steps:
// in_range() holds for den in [1, 2^60] and every |x| in [2^-60, 2^100] (zeros, infinities and
// NaNs are outside); callers fall back to __fdiv_rn otherwise. Tested bitwise against __fdiv_rn:
// cuda_sparse_attention_fp8_test.cc, ExactDividerMatchesIeeeDivision.
struct ExactDivider {
  float den = 1.0f, y = 1.0f;
  uint32_t lo = 0xffffffffu, hi = 0;  // the range of |x| seen by note(), as bits
  __device__ explicit ExactDivider(float d) : den(d) { y = __fdiv_rn(1.0f, d); }
  __device__ __forceinline__ void note(float x) {
    const uint32_t u = __float_as_uint(x) & 0x7fffffffu;
    lo = min(lo, u);
    hi = max(hi, u);
  }
  __device__ __forceinline__ bool in_range() const {
    return den >= 1.0f && den <= 0x1p60f && lo >= 0x21800000u && hi <= 0x71800000u;
  }
  __device__ __forceinline__ float operator()(float x) const {
    const float q0 = __fmul_rn(x, y);
    const float q1 = __fmaf_rn(__fmaf_rn(-q0, den, x), y, q0);
    return __fmaf_rn(__fmaf_rn(-q1, den, x), y, q1);
  }
};

// bf16(acc * 2^32 / denominator) for two adjacent dims.
__device__ __forceinline__ uint32_t final_pair(float x0, float x1, float den) {
  return pack_bf16(__fdiv_rn(__fmul_rn(x0, kKeyUnshift), den),
                   __fdiv_rn(__fmul_rn(x1, kKeyUnshift), den));
}

}  // namespace di::backend::cuda::attn
