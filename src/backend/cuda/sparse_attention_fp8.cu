// Sparse sink attention over the FP8/FP4 KV cache on tensor cores (sparse_attention_fp8.h).
//
// One block per (query, group of H heads); the H heads are the MMA's M dimension, so each key is
// read and decoded once per block (MQA). Per block of 64 keys: cp.async brings the stored rows
// (two stages ahead of use), all threads decode them to bf16 in shared memory, then 8 warps run
// S = Q K^T (warp: 16 heads x 64/WK keys), exchange row maxima, write P = bf16(exp(S - max)) to
// shared memory, and accumulate O += P V (warp: 16 heads x 512/WK dims) with mma.sync m16n8k16.
// The online softmax follows kernels::sparse_attention_query block for block (same 64-key blocks,
// same running max and rescaling, P rounded to bf16 before the value product); what differs is
// the order of the fp32 sums inside the MMAs and the exp approximation, hence a tolerance.
// Shared-memory tiles are [rows][512] bf16 with 16-byte chunks XOR-swizzled by row (conflict-free
// ldmatrix).
#include <cuda_bf16.h>

#include "backend/cuda/kv_cache_decode.cuh"
#include "backend/cuda/mma_bf16.cuh"
#include "backend/cuda/mma_e4m3.cuh"
#include "backend/cuda/sparse_attention_fp8.h"

namespace di::backend::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kBlockKeys = 64;
constexpr int kRawBytes = kBlockKeys * kKvFp8RowBytes;  // one stage of stored rows

template <int H>
struct Layout {
  static constexpr int kRowGroups = H / 16;        // 16-head MMA row groups
  static constexpr int kWk = kWarps / kRowGroups;  // warps sharing a row group
  static constexpr int kKeysPerWarp = kBlockKeys / kWk;
  static constexpr int kDimsPerWarp = kKvDim / kWk;
  static constexpr int kQ = 0;
  static constexpr int kK = kQ + H * kKvDim * 2;
  static constexpr int kRaw = kK + kBlockKeys * kKvDim * 2;
  static constexpr int kP = kRaw + 2 * kRawBytes;
  static constexpr int kMax = kP + H * kBlockKeys * 2;
  static constexpr int kSum = kMax + kWk * H * 4;  // [H][8]: p sums per 8-key group
  static constexpr int kIdx = kSum + H * 8 * 4;
  static size_t bytes(int num_keys_padded) {
    return kIdx + 4 * static_cast<size_t>(num_keys_padded);
  }
};

// Issues the cp.async copies of key block `b`'s stored rows into stage `raw`.
__device__ __forceinline__ void load_block(uint8_t* raw,
                                           const int32_t* idx,
                                           int b,
                                           int num_win,
                                           int num_keys,
                                           const SparseAttentionFp8Args& a) {
  // Warp w copies keys w, w + 8, ...: one row per warp step, lane = 16-byte chunk (a FP8 row has
  // 33 chunks, a FP4 row 18), so each row is one contiguous warp-wide read.
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int i = 0; i < kBlockKeys / kWarps; ++i) {
    const int k = warp + kWarps * i;
    const int j = b * kBlockKeys + k;
    const int32_t row = j < num_keys ? idx[j] : -1;
    if (row < 0) continue;
    uint8_t* dst = raw + k * kKvFp8RowBytes + lane * 16;
    if (j < num_win) {
      const uint8_t* src =
          (row < a.fresh_from
               ? a.kv + static_cast<int64_t>(row) * kKvFp8RowBytes
               : a.fresh_kv + static_cast<int64_t>(row - a.fresh_from) * kKvFp8RowBytes) +
          lane * 16;
      cp_async16(dst, src, 16);
      if (lane == 0) cp_async16(dst + 512, src + 512, 16);
    } else if (lane < kKvFp4RowBytes / 16) {
      cp_async16(dst, a.extra_kv + static_cast<int64_t>(row) * kKvFp4RowBytes + lane * 16, 16);
    }
  }
}

// Decodes stage `raw` into the bf16 key tile (times 2^-32); empty slots become zeros so that
// their p = 0 multiplies zeros, not stale values. kFormat: 1 all FP8, 2 all FP4, 0 mixed.
template <int kFormat>
__device__ __forceinline__ void decode_keys(
    uint8_t* ks, const uint8_t* raw, const int32_t* idx, int b, int num_win, int num_keys) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  static_assert(kWarps == 8, "the swizzle shortcut below needs k & 7 == warp");
#pragma unroll
  for (int i = 0; i < kBlockKeys / kWarps; ++i) {  // warp-uniform key: lane = 16-dim unit
    const int k = warp + kWarps * i;
    const int j = b * kBlockKeys + k;
    const bool empty = j >= num_keys || idx[j] < 0;
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
    uint8_t* ks, const uint8_t* raw, const int32_t* idx, int b, int num_win, int num_keys) {
  if ((b + 1) * kBlockKeys <= num_win) {
    decode_keys<1>(ks, raw, idx, b, num_win, num_keys);
  } else if (b * kBlockKeys >= num_win) {
    decode_keys<2>(ks, raw, idx, b, num_win, num_keys);
  } else {
    decode_keys<0>(ks, raw, idx, b, num_win, num_keys);
  }
}

template <int H>
__global__ void __launch_bounds__(kThreads, 1)
    sparse_attention_fp8_kernel(SparseAttentionFp8Args a) {
  using L = Layout<H>;
  constexpr int kNtS = L::kKeysPerWarp / 8;  // S n-tiles per warp
  constexpr int kNtO = L::kDimsPerWarp / 8;  // O n-tiles per warp
  extern __shared__ __align__(128) uint8_t smem[];
  uint8_t* qs = smem + L::kQ;
  uint8_t* ks = smem + L::kK;
  uint8_t* raw = smem + L::kRaw;
  uint8_t* ps = smem + L::kP;
  float* red_max = reinterpret_cast<float*>(smem + L::kMax);
  float* red_sum = reinterpret_cast<float*>(smem + L::kSum);
  int32_t* idx = reinterpret_cast<int32_t*>(smem + L::kIdx);

  const int t = blockIdx.x, head0 = blockIdx.y * H;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int rg = warp % L::kRowGroups, wk = warp / L::kRowGroups;
  const int num_win = a.num_indices, num_keys = a.num_indices + a.num_extra;
  const int num_blocks = (num_keys + kBlockKeys - 1) / kBlockKeys;

  for (int j = threadIdx.x; j < num_keys; j += kThreads) {
    idx[j] = j < num_win ? a.indices[static_cast<int64_t>(t) * num_win + j]
                         : a.extra_indices[static_cast<int64_t>(t) * a.num_extra + j - num_win];
  }
  __syncthreads();
  const uint8_t* qg = reinterpret_cast<const uint8_t*>(
      a.q + (static_cast<int64_t>(t) * kAttnHeads + head0) * kKvDim);
  for (int u = threadIdx.x; u < H * 64; u += kThreads) {
    cp_async16(qs + swz(u / 64, u % 64, 64), qg + u * 16, 16);
  }
  const bool do_load = !(a.ablate & 1), do_decode = !(a.ablate & 2), do_mma = !(a.ablate & 4);
  if (do_load) load_block(raw, idx, 0, num_win, num_keys, a);
  cp_async_commit();
  if (do_load && num_blocks > 1) load_block(raw + kRawBytes, idx, 1, num_win, num_keys, a);
  cp_async_commit();

  // This lane's rows: g and g + 8 of the warp's row group.
  const int g = lane >> 2, tq = lane & 3;
  const int row0 = rg * 16 + g, row1 = row0 + 8;
  float m_run[2] = {-1e30f, -1e30f};  // the CPU's finite floor
  // Denominators. Each block's sum is taken in one fixed order for any H (8-key groups by the
  // same shuffles, then the 8 groups in order), so a head's bits do not depend on the split.
  float l_run[2] = {0.0f, 0.0f};
  float o[kNtO][4];
#pragma unroll
  for (int n = 0; n < kNtO; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  // Logits in the log2 domain: s2 = (q.k) * scale * log2(e), p = 2^(s2 - max2).
  const float scale = __fmul_rn(__fmul_rn(a.softmax_scale, kKeyUnshift), 1.4426950408889634f);
  const uint32_t qs_a = smem_addr(qs), ks_a = smem_addr(ks), ps_a = smem_addr(ps);

  for (int b = 0; b < num_blocks; ++b) {
    cp_async_wait<1>();
    __syncthreads();  // stage b landed; every warp is done with the previous key tile
    if (do_decode) decode_block(ks, raw + (b & 1) * kRawBytes, idx, b, num_win, num_keys);
    __syncthreads();
    if (do_load && b + 2 < num_blocks) {
      load_block(raw + (b & 1) * kRawBytes, idx, b + 2, num_win, num_keys, a);
    }
    cp_async_commit();

    // S = Q K^T for 16 heads x kKeysPerWarp keys.
    float s[kNtS][4];
#pragma unroll
    for (int n = 0; n < kNtS; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
    const int key0 = wk * L::kKeysPerWarp;
#pragma unroll 8
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
    // Scale, mask empty slots (a 64-bit ballot of the block's keys), row maxima.
    uint64_t valid;
    {
      const int j0 = b * kBlockKeys + lane, j1 = j0 + 32;
      const uint32_t lo = __ballot_sync(0xffffffffu, j0 < num_keys && idx[j0] >= 0);
      const uint32_t hi = __ballot_sync(0xffffffffu, j1 < num_keys && idx[j1] >= 0);
      valid = ((static_cast<uint64_t>(hi) << 32) | lo) >> (key0 + 2 * tq);
    }
    float bmax[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < kNtS; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[n][e] = (valid >> (8 * n + (e & 1))) & 1 ? __fmul_rn(s[n][e], scale) : -INFINITY;
        bmax[e >> 1] = fmaxf(bmax[e >> 1], s[n][e]);
      }
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
    float m_new[2], rescale[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      m_new[r] = m_run[r];
#pragma unroll
      for (int w = 0; w < L::kWk; ++w)
        m_new[r] = fmaxf(m_new[r], red_max[w * H + (r ? row1 : row0)]);
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
    __syncthreads();

#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float* gs = red_sum + (r ? row1 : row0) * 8;
      const float bsum = __fadd_rn(__fadd_rn(__fadd_rn(gs[0], gs[1]), __fadd_rn(gs[2], gs[3])),
                                   __fadd_rn(__fadd_rn(gs[4], gs[5]), __fadd_rn(gs[6], gs[7])));
      l_run[r] = __fadd_rn(__fmul_rn(l_run[r], rescale[r]), bsum);
    }
    // O = O * rescale + P V for 16 heads x kDimsPerWarp dims (x * 1 is exact: skipped when the
    // whole warp's maxima did not move, the common case after the first blocks).
    if (!__all_sync(0xffffffffu, rescale[0] == 1.0f && rescale[1] == 1.0f)) {
#pragma unroll
      for (int n = 0; n < kNtO; ++n) {
        o[n][0] = __fmul_rn(o[n][0], rescale[0]);
        o[n][1] = __fmul_rn(o[n][1], rescale[0]);
        o[n][2] = __fmul_rn(o[n][2], rescale[1]);
        o[n][3] = __fmul_rn(o[n][3], rescale[1]);
      }
    }
    const int dim_chunk0 = wk * L::kDimsPerWarp / 8;
#pragma unroll
    for (int kk = 0; kk < kBlockKeys / 16; ++kk) {
      if (!do_mma) break;
      uint32_t pa[4];
      ldsm_x4(pa, ps_a + swz(rg * 16 + (lane & 15), 2 * kk + (lane >> 4), 8));
#pragma unroll
      for (int p = 0; p < kNtO / 2; ++p) {
        uint32_t vb[4];
        ldsm_x4_t(vb, ks_a + swz(16 * kk + (lane & 7) + ((lane >> 3) & 1) * 8,
                                 dim_chunk0 + 2 * p + (lane >> 4), 64));
        mma_bf16(o[2 * p], pa, vb[0], vb[1]);
        mma_bf16(o[2 * p + 1], pa, vb[2], vb[3]);
      }
    }
  }
  cp_async_wait<0>();

  __syncthreads();  // every warp is done reading the key tile, reused below for the output
  float inv[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float sink2 = __fmul_rn(a.sink[head0 + (r ? row1 : row0)], 1.4426950408889634f);
    inv[r] = __fadd_rn(l_run[r], exp2_approx(__fsub_rn(sink2, m_run[r])));
  }
  // out = bf16(acc * 2^32 / l), staged through the (swizzled) key tile for 16-byte stores.
#pragma unroll
  for (int n = 0; n < kNtO; ++n) {
    const int col = wk * L::kDimsPerWarp + 8 * n + 2 * tq;
    const uint32_t c0 = swz(row0, col / 8, 64) + (col % 8) * 2;
    const uint32_t c1 = swz(row1, col / 8, 64) + (col % 8) * 2;
    *reinterpret_cast<uint32_t*>(ks + c0) =
        pack_bf16(__fdiv_rn(__fmul_rn(o[n][0], kKeyUnshift), inv[0]),
                  __fdiv_rn(__fmul_rn(o[n][1], kKeyUnshift), inv[0]));
    *reinterpret_cast<uint32_t*>(ks + c1) =
        pack_bf16(__fdiv_rn(__fmul_rn(o[n][2], kKeyUnshift), inv[1]),
                  __fdiv_rn(__fmul_rn(o[n][3], kKeyUnshift), inv[1]));
  }
  __syncthreads();
  uint8_t* og =
      reinterpret_cast<uint8_t*>(a.out + (static_cast<int64_t>(t) * kAttnHeads + head0) * kKvDim);
  for (int u = threadIdx.x; u < H * 64; u += kThreads) {
    *reinterpret_cast<uint4*>(og + u * 16) =
        *reinterpret_cast<const uint4*>(ks + swz(u / 64, u % 64, 64));
  }
}

template <int H>
cudaError_t launch(const SparseAttentionFp8Args& a, cudaStream_t stream) {
  const int padded = (a.num_indices + a.num_extra + kBlockKeys - 1) / kBlockKeys * kBlockKeys;
  const size_t bytes = Layout<H>::bytes(padded);
  cudaError_t e =
      cudaFuncSetAttribute(sparse_attention_fp8_kernel<H>,
                           cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
  if (e != cudaSuccess) return e;
  const dim3 grid(static_cast<unsigned>(a.num_queries), kAttnHeads / H);
  sparse_attention_fp8_kernel<H><<<grid, kThreads, bytes, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace

cudaError_t sparse_attention_fp8(const SparseAttentionFp8Args& a, cudaStream_t stream) {
  const int64_t keys = static_cast<int64_t>(a.num_indices) + a.num_extra;
  if (a.num_queries < 0 || a.num_queries > 0x7fffffff || a.num_indices < 0 || a.num_extra < 0 ||
      keys > kAttnMaxKeys || !a.q || !a.sink || !a.out ||
      (a.num_indices > 0 && (!a.kv || !a.indices)) || (a.fresh_from < 0x7fffffff && !a.fresh_kv) ||
      (a.num_extra > 0 && (!a.extra_kv || !a.extra_indices))) {
    return cudaErrorInvalidValue;
  }
  if (a.num_queries == 0) return cudaSuccess;
  int dev = 0, major = 0, sms = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  if (e != cudaSuccess) return e;
  if (major < 8) return cudaErrorNotSupported;
  // Fewest waves of blocks first, then the most heads per block (a key is decoded once per
  // block). Measured on the H200 (docs/benchmarks.md): T=8 best at 16, T=64 at 32, T=256 at 64.
  int h = a.heads_per_block;
  if (h == 0) {
    const int64_t t = a.num_queries;
    h = t * 4 <= sms ? 16 : t * 2 <= sms ? 32 : 64;
  }
  switch (h) {
    case 16:
      return launch<16>(a, stream);
    case 32:
      return launch<32>(a, stream);
    case 64:
      return launch<64>(a, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace di::backend::cuda
