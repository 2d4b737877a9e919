// Sparse sink attention over the FP8/FP4 KV cache with Hopper's wgmma (sm_90a): the one-block
// kernel's arithmetic (sparse_attention_fp8.cu at 64 heads per block) with the decode of the next
// key block overlapping the tensor cores.
//
// One block of two warpgroups per query. Per 64-key block b:
//   1. S = Q K^T: each warpgroup issues 32 wgmma.m64n32k16 (64 heads x its 32 keys, the dims in
//      order), A = Q and B = the key tile, both K-major shared tiles with the 128-byte swizzle;
//   2. while they run, every thread decodes its rows of block b + 1 (loaded into registers one
//      block earlier) into the other key tile, loads block b + 2, L2-prefetches block b + 3;
//   3. the softmax step (attn::block_softmax: the same running max, p and fixed-tree sums);
//   4. O^T += V^T P^T: per warpgroup 4 x m64n64k16 per 16 keys (its 256 dims x 64 heads), A = V^T
//      fragments by ldmatrix.trans from the key tile, B = the P tile.
// Same bits as the mma.sync kernel when a wgmma k16 step rounds as an mma.sync k16 step does:
// each logit is one chain of 32 k16 steps over the dims in order from zero, each output one
// chain of 4 k16 steps per key block in key order after the same rescale multiply; what differs
// is only which instruction runs a step (and, for PV, which operand holds P). Tested bitwise
// against the mma.sync kernel (tests/unit/backend/cuda/cuda_sparse_attention_fp8_test.cc). Opt-in
// (args.wgmma = 2): 14-18 % slower than it on the H200 (docs/notes/cuda-kernels.md, session 8).
#include <type_traits>

#include "backend/cuda/grid_dependency.cuh"
#include "backend/cuda/sparse_attention_steps.cuh"
#include "backend/cuda/sparse_attention_wgmma.h"
#include "backend/cuda/wgmma_ptx.cuh"

namespace di::backend::cuda {

namespace {

constexpr int kWgThreads = 256;
constexpr int kTileBytes = 64 * kKvDim * 2;  // 64 rows x 512 bf16

// Shared memory, from a 1024-byte aligned base (the swizzle atoms): Q, two key tiles, P, the
// softmax's exchanges, the block's indices.
struct WLayout {
  static constexpr int kQ = 0;
  static constexpr int kK = kQ + kTileBytes;  // two tiles
  static constexpr int kP = kK + 2 * kTileBytes;
  static constexpr int kMax = kP + 64 * 64 * 2;   // [2][64]
  static constexpr int kSum = kMax + 2 * 64 * 4;  // [64][8]
  static constexpr int kResc = kSum + 64 * 8 * 4;
  static constexpr int kDen = kResc + 64 * 4;
  static constexpr int kIdx = kDen + 64 * 4;
  static size_t bytes(int num_keys_padded) {
    return 1024 + kIdx + 4 * static_cast<size_t>(num_keys_padded);
  }
};

#if DI_WGMMA_ENABLED

// Byte offset of 16-byte chunk c (0..63) of row r in a [64][512] bf16 tile stored as 8 K-major
// sub-tiles [64][64] with the 128-byte swizzle (what wgmma's desc_sw128 reads).
__device__ __forceinline__ uint32_t sw128(int r, int c) {
  return static_cast<uint32_t>((c >> 3) * 8192 + r * 128 + (((c & 7) ^ (r & 7)) << 4));
}

// One key block's stored rows in registers: thread (warp, lane) holds 16 dims (lane) of rows
// warp + 8 i. FP8: 16 codes + the ue8m0 scale; FP4: 8 bytes of codes (x, y) + the e4m3 scale.
struct RawRows {
  uint4 v[8];
  uint32_t s[8];
};

// Calls fn(integral_constant<F>) with the block's storage format F, uniform over the block:
// 1 all FP8 rows, 2 all FP4 rows, 0 mixed (the window ends inside the block).
template <class Fn>
__device__ __forceinline__ void by_format(int j0, int num_win, Fn&& fn) {
  if (j0 + attn::kBlockKeys <= num_win) {
    fn(std::integral_constant<int, 1>{});
  } else if (j0 >= num_win) {
    fn(std::integral_constant<int, 2>{});
  } else {
    fn(std::integral_constant<int, 0>{});
  }
}

// Stored row of key j (index row >= 0) and whether it is FP8.
template <int F>
__device__ __forceinline__ const uint8_t* row_ptr(
    int j, int32_t row, int num_win, const SparseAttentionFp8Args& a, bool& fp8) {
  fp8 = F == 1 || (F == 0 && j < num_win);
  if (!fp8) return a.extra_kv + static_cast<int64_t>(row) * kKvFp4RowBytes;
  return attn::fp8_row(a, row);
}

template <int F>
__device__ __forceinline__ void load_rows(RawRows& r,
                                          const int32_t* idx,
                                          int j0,
                                          int num_win,
                                          int num_keys,
                                          const SparseAttentionFp8Args& a) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int j = j0 + warp + 8 * i;
    const int32_t row = j < num_keys ? idx[j] : -1;
    if (row < 0) continue;
    bool fp8;
    const uint8_t* src = row_ptr<F>(j, row, num_win, a, fp8);
    if (fp8) {
      r.v[i] = __ldg(reinterpret_cast<const uint4*>(src) + lane);
      r.s[i] = __ldg(src + 512 + lane / 2);
    } else {
      const uint2 c = __ldg(reinterpret_cast<const uint2*>(src) + lane);
      r.v[i].x = c.x;
      r.v[i].y = c.y;
      r.s[i] = __ldg(src + 256 + lane);
    }
  }
}

// Brings one key block's stored rows into L2 (no registers, no scoreboard): lanes 0..n-1 touch
// the row's 128-byte lines and lane n its last byte.
template <int F>
__device__ __forceinline__ void prefetch_rows(
    const int32_t* idx, int j0, int num_win, int num_keys, const SparseAttentionFp8Args& a) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int j = j0 + warp + 8 * i;
    const int32_t row = j < num_keys ? idx[j] : -1;
    if (row < 0) continue;
    bool fp8;
    const uint8_t* src = row_ptr<F>(j, row, num_win, a, fp8);
    const int bytes = fp8 ? kKvFp8RowBytes : kKvFp4RowBytes;
    const int n = (bytes + 127) / 128;
    if (lane <= n) {
      asm volatile("prefetch.global.L2 [%0];" ::"l"(src + (lane < n ? lane * 128 : bytes - 1)));
    }
  }
}

// Decodes the rows into the key tile (values times 2^-32, empty slots zero), as
// attn::decode_keys does into the mma.sync kernel's tile.
template <int F>
__device__ __forceinline__ void decode_rows(
    uint8_t* tile, const RawRows& r, const int32_t* idx, int j0, int num_win, int num_keys) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int k = warp + 8 * i;
    const int j = j0 + k;
    uint4 lo = make_uint4(0, 0, 0, 0), hi = lo;
    if (j < num_keys && idx[j] >= 0) {  // warp-uniform
      uint32_t v[8];
      if (F == 1 || (F == 0 && j < num_win)) {
        decode_fp8x16(r.v[i], r.s[i], v);
      } else {
        decode_fp4x16(make_uint2(r.v[i].x, r.v[i].y), r.s[i], v);
      }
      lo = make_uint4(v[0], v[1], v[2], v[3]);
      hi = make_uint4(v[4], v[5], v[6], v[7]);
    }
    *reinterpret_cast<uint4*>(tile + sw128(k, 2 * lane)) = lo;
    *reinterpret_cast<uint4*>(tile + sw128(k, 2 * lane + 1)) = hi;
  }
}

// The low word of desc_sw128(addr); the high word is the constant below.
__device__ __forceinline__ uint32_t desc_lo(uint32_t addr) {
  return ((addr & 0x3FFFF) >> 4) | (1u << 16);
}
__device__ __forceinline__ uint64_t desc_of(uint32_t lo) {
  return (uint64_t{0x40000040} << 32) | lo;  // SBO 1024 bytes, 128-byte swizzle
}

__global__ void __launch_bounds__(kWgThreads, 1)
    sparse_attention_wgmma_kernel(SparseAttentionFp8Args a) {
  pdl::enter_dependent_grid();
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  uint8_t* qs = smem + WLayout::kQ;
  uint8_t* ks = smem + WLayout::kK;
  uint8_t* ps = smem + WLayout::kP;
  float* red_max = reinterpret_cast<float*>(smem + WLayout::kMax);
  float* red_sum = reinterpret_cast<float*>(smem + WLayout::kSum);
  float* resc = reinterpret_cast<float*>(smem + WLayout::kResc);
  float* den = reinterpret_cast<float*>(smem + WLayout::kDen);
  int32_t* idx = reinterpret_cast<int32_t*>(smem + WLayout::kIdx);

  const int t = blockIdx.x;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int c = warp >> 2, w = warp & 3;  // warpgroup (keys of S, dims of PV), warp in it
  const int g = lane >> 2, tq = lane & 3;
  const int num_win = a.num_indices, num_keys = a.num_indices + a.num_extra;
  const int num_blocks = (num_keys + attn::kBlockKeys - 1) / attn::kBlockKeys;
  const bool do_load = !(a.ablate & 1), do_decode = !(a.ablate & 2), do_mma = !(a.ablate & 4);

  static_assert(kWgThreads == attn::kThreads, "stage_indices strides by kThreads");
  const uint8_t* qg = reinterpret_cast<const uint8_t*>(a.q + static_cast<int64_t>(t) * 64 * kKvDim);
  for (int u = threadIdx.x; u < 64 * 64; u += kWgThreads) {
    cp_async16(qs + sw128(u / 64, u % 64), qg + u * 16, 16);
  }
  cp_async_commit();
  attn::stage_indices(idx, a, t);
  __syncthreads();  // indices staged
  RawRows raw;
#pragma unroll
  for (int i = 0; i < 8; ++i) raw.v[i] = make_uint4(0, 0, 0, 0), raw.s[i] = 0;
  const bool do_prefetch = do_load && !(a.ablate & 8);  // bit 3: the benchmark's variant
  auto load = [&](int j0) {
    by_format(j0, num_win,
              [&](auto f) { load_rows<decltype(f)::value>(raw, idx, j0, num_win, num_keys, a); });
  };
  auto prefetch = [&](int j0) {
    by_format(j0, num_win,
              [&](auto f) { prefetch_rows<decltype(f)::value>(idx, j0, num_win, num_keys, a); });
  };
  auto decode = [&](uint8_t* tile, int j0) {
    by_format(j0, num_win, [&](auto f) {
      decode_rows<decltype(f)::value>(tile, raw, idx, j0, num_win, num_keys);
    });
  };
  if (do_prefetch && num_blocks > 2) prefetch(128);
  if (num_blocks > 0) {
    if (do_load) load(0);
    if (do_decode) decode(ks, 0);
    if (do_load && num_blocks > 1) load(64);
  }
  cp_async_wait<0>();
  wg::fence_proxy_async();

  float m_run[2] = {-1e30f, -1e30f};  // the CPU's finite floor
  float l_run[2] = {0.0f, 0.0f};
  float o[4][32];  // O^T: [64-dim tile mt][d of m64n64: dims 16w + g (+8), heads 8j + 2tq (+1)]
#pragma unroll
  for (int mt = 0; mt < 4; ++mt) {
#pragma unroll
    for (int i = 0; i < 32; ++i) o[mt][i] = 0.0f;
  }
  const float scale = __fmul_rn(__fmul_rn(a.softmax_scale, kKeyUnshift), attn::kLog2e);
  const uint32_t ks_a = smem_addr(ks);
  const int key0 = 32 * c;
  // Descriptors' low words (start address / 16): Q, this warpgroup's keys in tile 0, P.
  const uint32_t q_lo = desc_lo(smem_addr(qs)), k_lo = desc_lo(ks_a + key0 * 128),
                 p_lo = desc_lo(smem_addr(ps));

  for (int b = 0; b < num_blocks; ++b) {
    const int j0 = b * attn::kBlockKeys;
    const uint32_t tile_a = ks_a + (b & 1) * kTileBytes;
    const uint32_t kb_lo = k_lo + (b & 1) * (kTileBytes / 16);
    __syncthreads();  // key tile b decoded and fenced; every warp is done with tile b - 1

    // 1. S for this warpgroup's 32 keys: 32 k16 steps over the dims, from zero.
    float s[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) s[i] = 0.0f;
    if (do_mma) {
      wg::fence_regs(s);
      wg::wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kKvDim / 16; ++kk) {
        const uint32_t off = ((kk >> 2) * 8192 + (kk & 3) * 32) / 16;
        wg::wgmma_m64n32k16_bf16_ss(s, desc_of(q_lo + off), desc_of(kb_lo + off), 1);
      }
      wg::wgmma_commit();
    }
    // 2. Decode block b + 1 into the other tile while the tensor cores run; load block b + 2.
    if (b + 1 < num_blocks) {
      if (do_decode) {
        decode(ks + ((b + 1) & 1) * kTileBytes, j0 + 64);
        wg::fence_proxy_async();
      }
      if (do_load && b + 2 < num_blocks) load(j0 + 128);
      if (do_prefetch && b + 3 < num_blocks) prefetch(j0 + 192);
    }
    wg::wgmma_wait<0>();
    wg::fence_regs(s);

    // 3. Scale and mask (as attn::block_scores), then the softmax step.
    float sv[4][4];
    {
      const uint32_t lo = __ballot_sync(0xffffffffu, j0 + lane < num_keys && idx[j0 + lane] >= 0);
      const uint32_t hi =
          __ballot_sync(0xffffffffu, j0 + lane + 32 < num_keys && idx[j0 + lane + 32] >= 0);
      const uint64_t valid = ((static_cast<uint64_t>(hi) << 32) | lo) >> (key0 + 2 * tq);
#pragma unroll
      for (int n = 0; n < 4; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          sv[n][e] = (valid >> (8 * n + (e & 1))) & 1 ? __fmul_rn(s[4 * n + e], scale) : -INFINITY;
        }
      }
    }
    float rescale[2];
    attn::block_softmax<64, 4, true>(sv, m_run, l_run, rescale, red_max, red_sum, ps, w, c, key0,
                                     resc);

    // 4. O^T = O^T * rescale (per head: a column) + V^T P^T.
    {
      float r[16];  // rescale of heads 8j + 2tq and + 1
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const float2 v = *reinterpret_cast<const float2*>(resc + 8 * j + 2 * tq);
        r[2 * j] = v.x;
        r[2 * j + 1] = v.y;
      }
      bool ones = true;
#pragma unroll
      for (int i = 0; i < 16; ++i) ones = ones && r[i] == 1.0f;
      if (!__all_sync(0xffffffffu, ones)) {  // x * 1 is exact: skipping it changes no bit
#pragma unroll
        for (int mt = 0; mt < 4; ++mt) {
#pragma unroll
          for (int i = 0; i < 32; ++i) o[mt][i] = __fmul_rn(o[mt][i], r[2 * (i >> 2) + (i & 1)]);
        }
      }
    }
    if (do_mma) {
      // A fragments of V^T (16 dims of warp w x 16 keys) for the 4 dim tiles, two k16 steps in
      // flight: matrices (keys 0-7, dims 0-7), (keys 0-7, dims 8-15), (keys 8-15, dims 0-7), ...
      const int arow = (lane & 7) + ((lane >> 4) & 1) * 8;
      const int achunk = 2 * w + ((lane >> 3) & 1);
      uint32_t af[2][4][4];
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        uint32_t(&f)[4][4] = af[kk & 1];
        if (kk >= 2) wg::wgmma_wait<1>();  // the step that read these registers is done
#pragma unroll
        for (int mt = 0; mt < 4; ++mt) {
          ldsm_x4_t(f[mt], tile_a + sw128(16 * kk + arow, 8 * (4 * c + mt) + achunk));
        }
#pragma unroll
        for (int mt = 0; mt < 4; ++mt) wg::fence_regs(o[mt]);
        wg::wgmma_fence();
#pragma unroll
        for (int mt = 0; mt < 4; ++mt) {
          wg::wgmma_m64n64k16_bf16_rs(o[mt], f[mt], desc_of(p_lo + kk * 2), 1);
        }
        wg::wgmma_commit();
      }
      wg::wgmma_wait<0>();
#pragma unroll
      for (int mt = 0; mt < 4; ++mt) wg::fence_regs(o[mt]);
    }
  }

  // Denominators per head (both warpgroups hold the same; the first writes them).
  if (c == 0 && tq == 0) {
    float inv[2];
    attn::final_denominators(inv, l_run, m_run, a.sink, w * 16 + g, w * 16 + g + 8);
    den[w * 16 + g] = inv[0];
    den[w * 16 + g + 8] = inv[1];
  }
  __syncthreads();  // denominators written; every warp is done with the key tiles
  // out = bf16(acc * 2^32 / l), staged as [head][512] in the first key tile (mma.sync kernel's
  // swizzle) for 16-byte stores.
  float dn[16];
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    dn[2 * j] = den[8 * j + 2 * tq];
    dn[2 * j + 1] = den[8 * j + 2 * tq + 1];
  }
#pragma unroll
  for (int mt = 0; mt < 4; ++mt) {
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      const int dim = 256 * c + 64 * mt + 16 * w + g + 8 * ((i >> 1) & 1);
      const int head = 8 * (i >> 2) + 2 * tq + (i & 1);
      const float y = __fdiv_rn(__fmul_rn(o[mt][i], kKeyUnshift), dn[2 * (i >> 2) + (i & 1)]);
      *reinterpret_cast<__nv_bfloat16*>(ks + swz(head, dim / 8, 64) + (dim % 8) * 2) =
          __float2bfloat16_rn(y);
    }
  }
  __syncthreads();
  uint8_t* og = reinterpret_cast<uint8_t*>(a.out + static_cast<int64_t>(t) * 64 * kKvDim);
  for (int u = threadIdx.x; u < 64 * 64; u += kWgThreads) {
    *reinterpret_cast<uint4*>(og + u * 16) =
        *reinterpret_cast<const uint4*>(ks + swz(u / 64, u % 64, 64));
  }
}

#else

__global__ void sparse_attention_wgmma_kernel(SparseAttentionFp8Args) {
  pdl::enter_dependent_grid();
}

#endif  // DI_WGMMA_ENABLED

}  // namespace

bool sparse_attention_wgmma_supported(int major) {
  return major == 9;
}

cudaError_t sparse_attention_wgmma(const SparseAttentionFp8Args& a, cudaStream_t stream) {
  const int padded =
      (a.num_indices + a.num_extra + attn::kBlockKeys - 1) / attn::kBlockKeys * attn::kBlockKeys;
  const size_t bytes = WLayout::bytes(padded);
  cudaError_t e =
      cudaFuncSetAttribute(sparse_attention_wgmma_kernel,
                           cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
  if (e != cudaSuccess) return e;
  pdl::launch_dependent(sparse_attention_wgmma_kernel, dim3(static_cast<unsigned>(a.num_queries)),
                        dim3(kWgThreads), bytes, stream, a);
  return cudaGetLastError();
}

}  // namespace di::backend::cuda
