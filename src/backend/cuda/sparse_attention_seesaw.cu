// Sparse sink attention over the FP8/FP4 KV cache with warp-specialised warpgroups (sm_90a): the
// one-block kernel's arithmetic (sparse_attention_fp8.cu at 64 heads per block) with the gather
// and decode of the keys, the softmax and the tensor cores of two warpgroups overlapping.
//
// One block of four warpgroups per query:
//  - two producer warpgroups (sparse_attention_seesaw_producer.cuh) copy Q into shared memory,
//    then gather each 64-key block's stored rows with cp.async and decode them into one of two
//    bf16 key tiles; mbarriers full / empty hand the tiles over;
//  - consumer c (warpgroups 0 and 1) owns the key blocks b with b % 2 == c: S = Q K^T as 32
//    chained wgmma.m64n64k16 (64 heads x 64 keys, the dims in order from zero), then the
//    softmax step for all 64 keys in registers (row maxima and sums across the four lanes of a
//    quad: no block barrier), P = bf16(p) to shared memory for the other consumer and the
//    block's (max, denominator, rescale) per head beside it (mbarriers pfull / pempty);
//  - both consumers run the PV step of every block in key order for their half of the value
//    dims: O[64 heads x 256 dims] = O * rescale + P V as 8 wgmma.m64n128k16 (P from registers,
//    the value tile MN-major: N = dims contiguous). A consumer's round for its block b starts
//    with the PV step of block b - 1 (the other consumer's), so that tile is released as soon as
//    its P is out; then S, softmax and PV of b. While one consumer's softmax runs, the other
//    one's MMAs use the tensor cores ("seesaw").
// The arithmetic per head is the one-block kernel's: each logit one chain of 32 k16 steps over
// the dims from zero, the block's maxima (order-free), p = 2^(s - max), the eight 8-key group sums
// by the same pairs and shuffles and then the same fixed tree, l = l * rescale + sum, the value
// products one chain of 4 k16 steps per block in key order after the same rescale multiply, the
// same final division. So the output bits equal the mma.sync kernel's whenever a wgmma k16 step
// rounds as an mma.sync k16 step does (tested: cuda_sparse_attention_fp8_test.cc). Measured on
// the H200 and what was tried: docs/notes/cuda-kernels.md, session 16.
#include "backend/cuda/grid_dependency.cuh"
#include "backend/cuda/sparse_attention_seesaw.cuh"
#include "backend/cuda/sparse_attention_seesaw_producer.cuh"
#include "backend/cuda/sparse_attention_wgmma.h"

namespace di::backend::cuda {
namespace seesaw {
namespace {

#if DI_WGMMA_ENABLED

// The consumers' shared state per thread: its rows g and g + 8 of warp w's 16 heads.
struct Rows {
  float m[2];  // running max (log2 domain)
  float l[2];  // running denominator
};

// Reads the (max, denominator) of block x's owner from the stats tile (after pfull of x).
__device__ __forceinline__ void read_stats(const float* st, int row0, Rows& r) {
  r.m[0] = st[row0];
  r.m[1] = st[row0 + 8];
  r.l[0] = st[64 + row0];
  r.l[1] = st[64 + row0 + 8];
}

// Issues O = O * rescale (skipped when every factor of the warp is 1: x * 1 is exact) + P V for
// the block in `tile`, this consumer's 256 dims, as one wgmma group; the caller waits for it.
// pa: P's A fragments for the 4 k16 steps (registers the group reads until it completes).
__device__ __forceinline__ void pv_issue(float (&o)[128],
                                         const uint32_t (&pa)[4][4],
                                         const float (&resc)[2],
                                         uint32_t tile_addr,
                                         int c) {
  if (!__all_sync(0xffffffffu, resc[0] == 1.0f && resc[1] == 1.0f)) {
#pragma unroll
    for (int i = 0; i < 128; ++i) o[i] = __fmul_rn(o[i], resc[(i >> 1) & 1]);
  }
  wg::fence_regs(o);
  wg::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    // Keys 16 kk .. 16 kk + 15 (two 8-row groups), dims from sub-tile 4c, as two N = 128 halves
    // (an N = 256 instruction needs 158 registers in every warp; the producers have 64).
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      wg::wgmma_m64n128k16_bf16_rs_tn(*reinterpret_cast<float(*)[64]>(o + 64 * h), pa[kk],
                                      desc_mn(tile_addr + (4 * c + 2 * h) * 8192 + kk * 2048), 1);
    }
  }
  wg::wgmma_commit();
}

__device__ __forceinline__ void consume(const SparseAttentionFp8Args& a,
                                        uint8_t* smem,
                                        const Bars& bars,
                                        int num_blocks) {
  const int c = threadIdx.x >> 7, warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
  const int g = lane >> 2, tq = lane & 3;
  const int row0 = 16 * warp + g;
  const uint32_t q_addr = smem_addr(smem + SLayout::kQ);
  const uint32_t k_addr = smem_addr(smem + SLayout::kK);
  uint8_t* p_base = smem + SLayout::kP;
  float* stats = reinterpret_cast<float*>(smem + SLayout::kStats);
  const uint8_t* valid8 = smem + SLayout::kValid;
  const float scale = __fmul_rn(__fmul_rn(a.softmax_scale, kKeyUnshift), attn::kLog2e);

  float o[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) o[i] = 0.0f;
  Rows run;  // the last softmax step's (max, denominator): the final one at the end
  run.m[0] = run.m[1] = -1e30f;
  run.l[0] = run.l[1] = 0.0f;
  Trace tr(a, c);
  if (c < num_blocks) mbar::wait(bars.q(), 0);
  tr.mark(10, 0);

  // PV of block x by this consumer with P from the other consumer's tile (after its pfull).
  auto pv_from_smem = [&](int x) {
    const int sx = x & 1;
    mbar::wait(bars.full(sx), (x >> 1) & 1);
    mbar::wait(bars.pfull(sx), (x >> 1) & 1);
    tr.mark(17, x);
    const float* st = stats + sx * 3 * 64;
    const float resc[2] = {st[128 + row0], st[128 + row0 + 8]};
    const uint32_t ps_a = smem_addr(p_base + sx * kPTile);
    uint32_t pa[4][4];
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      ldsm_x4(pa[kk], ps_a + swz(16 * warp + (lane & 15), 2 * kk + (lane >> 4), 8));
    }
    pv_issue(o, pa, resc, k_addr + sx * kTile, c);
    wg::wgmma_wait<0>();
    wg::fence_regs(o);
    tr.mark(18, x);
    mbar::arrive(bars.pempty(sx));
    mbar::arrive(bars.empty(sx));
  };

  // Round b (b % 2 == c): the PV step of block b - 1 (the other consumer's: its key tile is
  // released as soon as its P is out, so that the producer can refill it), then the S, softmax
  // and PV steps of block b (measured against other orders on the H200: docs/notes/
  // cuda-kernels.md, session 16).
  for (int b = c; b - 1 < num_blocks; b += 2) {
    if (b >= 1) pv_from_smem(b - 1);
    if (b >= num_blocks) break;
    const int s = b & 1;  // == c
    const uint32_t tile_addr = k_addr + s * kTile;
    mbar::wait(bars.full(s), (b >> 1) & 1);
    tr.mark(11, b);
    // 1. S = Q K^T: 64 heads x 64 keys, 32 k16 steps over the dims from zero.
    float sacc[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) sacc[i] = 0.0f;
    wg::fence_regs(sacc);
    wg::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kKvDim / 16; ++kk) {
      const uint32_t off = (kk >> 2) * 8192 + (kk & 3) * 32;
      wg::wgmma_m64n64k16_bf16_ss(sacc, desc_k(q_addr + off), desc_k(tile_addr + off), 1);
    }
    wg::wgmma_commit();
    // The previous block's (max, denominator), from its owner (the other consumer; published
    // before its pfull, which pv_from_smem(b - 1) above waited for).
    Rows prev;
    prev.m[0] = prev.m[1] = -1e30f;  // the CPU's finite floor
    prev.l[0] = prev.l[1] = 0.0f;
    if (b >= 1) read_stats(stats + ((b - 1) & 1) * 3 * 64, row0, prev);
    tr.mark(13, b);
    const uint64_t valid = *reinterpret_cast<const uint64_t*>(valid8 + s * 8);
    wg::wgmma_wait<0>();
    wg::fence_regs(sacc);
    tr.mark(12, b);
    // 2. Scale and mask (attn::block_scores), block maxima across the quad.
    const uint64_t vbits = valid >> (2 * tq);
    float bmax[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      const int n = i >> 2, e = i & 3;
      sacc[i] = (vbits >> (8 * n + (e & 1))) & 1 ? __fmul_rn(sacc[i], scale) : -INFINITY;
      bmax[e >> 1] = fmaxf(bmax[e >> 1], sacc[i]);
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      bmax[r] = fmaxf(bmax[r], __shfl_xor_sync(0xffffffffu, bmax[r], 1));
      bmax[r] = fmaxf(bmax[r], __shfl_xor_sync(0xffffffffu, bmax[r], 2));
    }
    // 3. The softmax step (attn::block_softmax's operations in its order).
    float m_new[2], resc[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      m_new[r] = fmaxf(prev.m[r], bmax[r]);
      resc[r] = exp2_approx(__fsub_rn(prev.m[r], m_new[r]));
    }
    float gsum[2][8];
    uint32_t pa[4][4];
#pragma unroll
    for (int n = 0; n < 8; ++n) {
      float p[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) p[e] = exp2_approx(__fsub_rn(sacc[4 * n + e], m_new[e >> 1]));
      float g0 = __fadd_rn(p[0], p[1]), g1 = __fadd_rn(p[2], p[3]);
      g0 = __fadd_rn(g0, __shfl_xor_sync(0xffffffffu, g0, 1));
      g1 = __fadd_rn(g1, __shfl_xor_sync(0xffffffffu, g1, 1));
      g0 = __fadd_rn(g0, __shfl_xor_sync(0xffffffffu, g0, 2));
      g1 = __fadd_rn(g1, __shfl_xor_sync(0xffffffffu, g1, 2));
      gsum[0][n] = g0;
      gsum[1][n] = g1;
      // A fragments of k16 step n / 2: (row g, keys 2tq..) (row g + 8, ..), then keys + 8.
      pa[n >> 1][(n & 1) * 2] = pack_bf16(p[0], p[1]);
      pa[n >> 1][(n & 1) * 2 + 1] = pack_bf16(p[2], p[3]);
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float* gs = gsum[r];
      const float bsum = __fadd_rn(__fadd_rn(__fadd_rn(gs[0], gs[1]), __fadd_rn(gs[2], gs[3])),
                                   __fadd_rn(__fadd_rn(gs[4], gs[5]), __fadd_rn(gs[6], gs[7])));
      run.m[r] = m_new[r];
      run.l[r] = __fadd_rn(__fmul_rn(prev.l[r], resc[r]), bsum);
    }
    // 4. Publish P and the stats for the other consumer (once it is done with block b - 2's).
    tr.mark(14, b);
    if (b >= 2) mbar::wait(bars.pempty(s), ((b >> 1) - 1) & 1);
    tr.mark(15, b);
    uint8_t* ps = p_base + s * kPTile;
#pragma unroll
    for (int n = 0; n < 8; ++n) {
      const int col = 8 * n + 2 * tq;
      *reinterpret_cast<uint32_t*>(ps + swz(row0, col / 8, 8) + (col % 8) * 2) =
          pa[n >> 1][(n & 1) * 2];
      *reinterpret_cast<uint32_t*>(ps + swz(row0 + 8, col / 8, 8) + (col % 8) * 2) =
          pa[n >> 1][(n & 1) * 2 + 1];
    }
    float* st = stats + s * 3 * 64;
    if (tq == 0) {
      st[row0] = run.m[0];
      st[row0 + 8] = run.m[1];
      st[64 + row0] = run.l[0];
      st[64 + row0 + 8] = run.l[1];
      st[128 + row0] = resc[0];
      st[128 + row0 + 8] = resc[1];
    }
    wg::fence_proxy_async();
    mbar::arrive(bars.pfull(s));
    tr.mark(16, b);
    // 5. The PV step of block b, P from registers.
    pv_issue(o, pa, resc, tile_addr, c);
    wg::wgmma_wait<0>();
    wg::fence_regs(o);
    tr.mark(18, b);
    mbar::arrive(bars.empty(s));
  }
  // The last block's (max, denominator) when the other consumer owns it.
  if (num_blocks > 0 && ((num_blocks - 1) & 1) != c) {
    read_stats(stats + ((num_blocks - 1) & 1) * 3 * 64, row0, run);
  }

  // out = bf16(acc * 2^32 / (l + 2^(sink - max))), this consumer's 256 dims of rows g, g + 8.
  tr.mark(19, 0);
  float den[2];
  attn::final_denominators(den, run.l, run.m, a.sink, row0, row0 + 8);
  uint16_t* og = a.out + static_cast<int64_t>(blockIdx.x) * 64 * kKvDim + 256 * c + 2 * tq;
#pragma unroll
  for (int j = 0; j < 32; ++j) {
    *reinterpret_cast<uint32_t*>(og + row0 * kKvDim + 8 * j) =
        attn::final_pair(o[4 * j], o[4 * j + 1], den[0]);
    *reinterpret_cast<uint32_t*>(og + (row0 + 8) * kKvDim + 8 * j) =
        attn::final_pair(o[4 * j + 2], o[4 * j + 3], den[1]);
  }
  tr.mark(20, 0);
}

__global__ void __launch_bounds__(kThreads, 1)
    sparse_attention_seesaw_kernel(SparseAttentionFp8Args a) {
  pdl::enter_dependent_grid();
  extern __shared__ __align__(1024) uint8_t smem[];
  // The declared alignment is the platform's promise (DeepGEMM's kernels rely on it too); were
  // it broken, every swizzled operand would be read wrong: stop rather than return garbage.
  if ((smem_addr(smem) & 1023) != 0) __trap();
  const Bars bars{smem_addr(smem + SLayout::kBars)};
  const int num_keys = a.num_indices + a.num_extra;
  const int num_blocks = (num_keys + attn::kBlockKeys - 1) / attn::kBlockKeys;
  if (threadIdx.x == 0) {
    for (int s = 0; s < 2; ++s) {
      mbar::init(bars.full(s), 32 * kProducerWarps);
      mbar::init(bars.empty(s), 256);
      mbar::init(bars.pfull(s), 128);
      mbar::init(bars.pempty(s), 128);
    }
    mbar::init(bars.q(), 32 * kProducerWarps);
    mbar::init_fence();
  }
  __syncthreads();
  if (threadIdx.x >= 256) {
    wg::setmaxnreg_dec<64>();
    produce(a, smem, bars, num_blocks);
  } else {
    wg::setmaxnreg_inc<192>();
    consume(a, smem, bars, num_blocks);
  }
}

#else

__global__ void sparse_attention_seesaw_kernel(SparseAttentionFp8Args) {
  pdl::enter_dependent_grid();
}

#endif  // DI_WGMMA_ENABLED

}  // namespace
}  // namespace seesaw

cudaError_t sparse_attention_seesaw(const SparseAttentionFp8Args& a, cudaStream_t stream) {
  const size_t bytes = seesaw::SLayout::kBytes;
  cudaError_t e =
      cudaFuncSetAttribute(seesaw::sparse_attention_seesaw_kernel,
                           cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
  if (e != cudaSuccess) return e;
  pdl::launch_dependent(seesaw::sparse_attention_seesaw_kernel,
                        dim3(static_cast<unsigned>(a.num_queries)), dim3(seesaw::kThreads), bytes,
                        stream, a);
  return cudaGetLastError();
}

}  // namespace di::backend::cuda
