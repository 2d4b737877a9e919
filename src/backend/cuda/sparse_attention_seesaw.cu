// Sparse sink attention over the FP8/FP4 KV cache with warp-specialised warpgroups (sm_90a): the
// one-block kernel's arithmetic (sparse_attention_fp8.cu at 64 heads per block) with the gather
// and decode of the keys, the softmax and the tensor cores of two warpgroups overlapping.
//
// One block of four warpgroups per SM, over queries blockIdx.x, + gridDim.x, ... (persistent:
// the next query's first key blocks are gathered during this one's last PV steps and epilogue):
//  - two producer warpgroups (sparse_attention_seesaw_producer.cuh) load each 64-key block's
//    stored rows into registers two rows ahead and decode them into one of two bf16 key tiles;
//    mbarriers full / empty hand the tiles over; Q comes in by TMA (mbarrier q);
//  - consumer c (warpgroups 0 and 1) owns the key blocks with c == b % 2 (b numbered across the
//    block's queries, so the owner of a query's first block alternates when a query has an odd
//    number of them): S = Q K^T as 32
//    chained wgmma.m64n64k16 (64 heads x 64 keys, the dims in order from zero), then the
//    softmax step for all 64 keys in registers (row maxima and sums across the four lanes of a
//    quad: no block barrier), P = bf16(p) to shared memory for the other consumer and the
//    block's (max, denominator, rescale) per head beside it (mbarriers pfull / pempty);
//  - both consumers run the PV step of every block in key order for their half of the value
//    dims: O[64 heads x 256 dims] = O * rescale + P V as 8 wgmma.m64n128k16 (P from registers
//    for the owner, from the owner's P tile for the other consumer; the value tile MN-major:
//    N = dims contiguous). A consumer's round for its block b starts with the PV step of block
//    b - 1 (the other consumer's), so that tile is released as soon as its P is out, with the S
//    step of b queued behind it when b's tile is already full; then softmax and PV of b. While
//    one consumer's softmax runs, the other one's MMAs use the tensor cores ("seesaw");
//  - the owner of a query's last key block loads the next query's Q into Q's tile by TMA once
//    that block's S step is done; the epilogue divides by the denominators (attn::ExactDivider:
//    __fdiv_rn's bits without its per-division branch) and stores O from the registers.
// The arithmetic per head is the one-block kernel's: each logit one chain of 32 k16 steps over
// the dims from zero, the block's maxima (order-free), p = 2^(s - max), the eight 8-key group sums
// by the same pairs and shuffles and then the same fixed tree, l = l * rescale + sum, the value
// products one chain of 4 k16 steps per block in key order after the same rescale multiply, the
// same final division. So the output bits equal the mma.sync kernel's whenever a wgmma k16 step
// rounds as an mma.sync k16 step does (tested: cuda_sparse_attention_fp8_test.cc). Measured on
// the H200 and what was tried: docs/notes/cuda-kernels.md, sessions 16 to 19.
#include <algorithm>

#include "backend/cuda/grid_dependency.cuh"
#include "backend/cuda/sparse_attention_seesaw.cuh"
#include "backend/cuda/sparse_attention_seesaw_gather.cuh"
#include "backend/cuda/sparse_attention_seesaw_producer.cuh"
#include "backend/cuda/sparse_attention_wgmma.h"
#include "backend/cuda/tensor_map.h"

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

// O = O * rescale for the thread's rows g and g + 8, skipped when every factor of the warp is 1
// (x * 1 is exact).
__device__ __forceinline__ void rescale_rows(float (&o)[128], const float (&resc)[2]) {
  if (!__all_sync(0xffffffffu, resc[0] == 1.0f && resc[1] == 1.0f)) {
#pragma unroll
    for (int i = 0; i < 128; ++i) o[i] = __fmul_rn(o[i], resc[(i >> 1) & 1]);
  }
}

// Issues O = O * rescale (rescale_rows) + P V for the block in `tile`, this consumer's 256 dims,
// as one wgmma group; the caller waits for it.
// pa: P's A fragments for the 4 k16 steps (registers the group reads until it completes).
__device__ __forceinline__ void pv_issue(float (&o)[128],
                                         const uint32_t (&pa)[4][4],
                                         const float (&resc)[2],
                                         uint32_t tile_addr,
                                         int c) {
  rescale_rows(o, resc);
  wg::fence_regs(o);
  wg::wgmma_fence();
  const uint32_t v_lo = desc_mn_lo(tile_addr + 4 * c * 8192);
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    // Keys 16 kk .. 16 kk + 15 (two 8-row groups), dims from sub-tile 4c, as two N = 128 halves
    // (an N = 256 instruction needs 158 registers in every warp; the producers have 64).
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      wg::wgmma_m64n128k16_bf16_rs_tn(*reinterpret_cast<float(*)[64]>(o + 64 * h), pa[kk],
                                      desc(v_lo + (2 * h * 8192 + kk * 2048) / 16), 1);
    }
  }
  wg::wgmma_commit();
}

// The same with P read by the tensor cores from a P tile (64 heads x 64 keys bf16, K-major,
// 128-byte swizzled: swz(row, chunk, 8)) instead of registers: the same operands, so the same
// bits (tested), and no registers held while the group runs.
__device__ __forceinline__ void pv_issue_ss(
    float (&o)[128], uint32_t p_addr, const float (&resc)[2], uint32_t tile_addr, int c) {
  rescale_rows(o, resc);
  wg::fence_regs(o);
  wg::wgmma_fence();
  const uint32_t p_lo = desc_k_lo(p_addr), v_lo = desc_mn_lo(tile_addr + 4 * c * 8192);
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      wg::wgmma_m64n128k16_bf16_ss_tn(*reinterpret_cast<float(*)[64]>(o + 64 * h),
                                      desc(p_lo + kk * 32 / 16),
                                      desc(v_lo + (2 * h * 8192 + kk * 2048) / 16), 1);
    }
  }
  wg::wgmma_commit();
}

// The consumers (threads 0..255) over the block's queries t = blockIdx.x, + gridDim.x, ...
// Key blocks are numbered across the queries (gb = query ordinal * num_blocks + b): tile,
// P tile and stats tile gb % 2, owner consumer gb % 2, mbarrier phase (gb / 2) % 2.
template <bool kTrace>
__device__ __forceinline__ void consume(const SparseAttentionFp8Args& a,
                                        const void* q_map,
                                        uint8_t* smem,
                                        const Bars& bars,
                                        int num_blocks) {
  // The warpgroup through a shuffle from lane 0: the compiler then knows it is warp-uniform and
  // keeps the descriptors' arithmetic in uniform registers (as CUTLASS does).
  const int c = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x >> 7), 0);
  const int warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
  const int g = lane >> 2, tq = lane & 3;
  const int row0 = 16 * warp + g;
  const uint32_t q_addr = smem_addr(smem + SLayout::kQ);
  const uint32_t k_addr = smem_addr(smem + SLayout::kK);
  uint8_t* p_base = smem + SLayout::kP;
  float* stats = reinterpret_cast<float*>(smem + SLayout::kStats);
  const uint8_t* valid8 = smem + SLayout::kValid;
  const float scale = __fmul_rn(__fmul_rn(a.softmax_scale, kKeyUnshift), attn::kLog2e);
  Trace<kTrace> tr(a, smem, c);
  // Q of query t (64 heads x 512 bf16: 8 TMA boxes of 64 dims, 128-byte swizzled, K-major).
  auto load_q = [&](int64_t t) {
    mbar::arrive_expect_tx(bars.q(), kTile);
    for (int c8 = 0; c8 < 8; ++c8) {
      wg::tma_load_2d(q_addr + c8 * 8192, q_map, 64 * c8, static_cast<int>(t * 64), bars.q());
    }
  };
  if (threadIdx.x == 0 && num_blocks > 0) load_q(blockIdx.x);
  int qi = 0;
  for (int64_t t = blockIdx.x; t < a.num_queries; t += gridDim.x, ++qi) {
    const int gb0 = qi * num_blocks;  // this query's first key block in the block's numbering
    float o[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) o[i] = 0.0f;
    Rows run;  // the last softmax step's (max, denominator): the final one at the end
    run.m[0] = run.m[1] = -1e30f;
    run.l[0] = run.l[1] = 0.0f;
    if (num_blocks > 0) mbar::wait(bars.q(), qi & 1);
    tr.mark(10, gb0);

    // Issues the PV step of block x (the other consumer's) for this consumer's dims, P read by
    // the tensor cores from the owner's P tile (after its pfull); returns the owner's (max,
    // denominator) of x, read before this consumer releases the tile.
    auto pv_other_issue = [&](int x) {
      const int gx = gb0 + x, sx = gx & 1;
      mbar::wait(bars.full(sx), (gx >> 1) & 1);
      mbar::wait(bars.pfull(sx), (gx >> 1) & 1);
      tr.mark(17, gx);
      const float* st = stats + sx * 3 * 64;
      const float resc[2] = {st[128 + row0], st[128 + row0 + 8]};
      Rows owner;
      read_stats(st, row0, owner);
      pv_issue_ss(o, smem_addr(p_base + sx * kPTile), resc, k_addr + sx * kTile, c);
      return owner;
    };
    // After that group has completed: block x's key tile and P tile are free for this consumer.
    auto pv_other_release = [&](int x) {
      const int gx = gb0 + x, sx = gx & 1;
      tr.mark(18, gx);
      mbar::arrive(bars.pempty(sx));
      mbar::arrive(bars.empty(sx));
    };

    // Round b (this consumer's blocks): the PV step of block b - 1 (the other consumer's), then
    // the S step of block b issued behind it without waiting (the tensor cores run them back to
    // back); block b - 1's tiles are released as soon as its group completes, so that the
    // producers can refill them; then the softmax and PV steps of block b (orders measured on the
    // H200: docs/notes/cuda-kernels.md, sessions 16 and 18).
    for (int b = (c ^ gb0) & 1; b - 1 < num_blocks; b += 2) {
      // The previous block's (max, denominator), from its owner (the other consumer).
      Rows prev;
      prev.m[0] = prev.m[1] = -1e30f;  // the CPU's finite floor
      prev.l[0] = prev.l[1] = 0.0f;
      if (b >= 1) prev = pv_other_issue(b - 1);
      if (b >= num_blocks) {
        wg::wgmma_wait<0>();
        wg::fence_regs(o);
        pv_other_release(b - 1);
        run = prev;  // the last block was the other consumer's
        break;
      }
      const int gb = gb0 + b, s = gb & 1;  // s == c
      const uint32_t tile_addr = k_addr + s * kTile;
      // S queues behind the PV group only if block b's tile is already full (warp-uniform:
      // one vote); otherwise block b - 1's tiles are released first (waiting for the producers
      // while holding them would stall the refill of b + 1's tile).
      bool pv_pending = b >= 1;
      if (pv_pending && !__all_sync(0xffffffffu, mbar::ready(bars.full(s), (gb >> 1) & 1))) {
        wg::wgmma_wait<0>();
        wg::fence_regs(o);
        pv_other_release(b - 1);
        pv_pending = false;
      }
      mbar::wait(bars.full(s), (gb >> 1) & 1);
      // The producers' generic-proxy stores of this tile, ordered before the async proxy's reads
      // (this consumer's wgmmas, and through pfull below the other consumer's PV): a proxy fence
      // anywhere on the causality path does it, and here no global loads are in flight for
      // its MEMBAR to wait for (the producers have theirs: sparse_attention_seesaw_producer.cuh).
      wg::fence_proxy_async();
      tr.mark(11, gb);
      // 1. S = Q K^T: 64 heads x 64 keys, 32 k16 steps over the dims from zero.
      float sacc[32];
#pragma unroll
      for (int i = 0; i < 32; ++i) sacc[i] = 0.0f;
      wg::fence_regs(sacc);
      wg::wgmma_fence();
      const uint32_t q_lo = desc_k_lo(q_addr), k_lo = desc_k_lo(tile_addr);
#pragma unroll
      for (int kk = 0; kk < kKvDim / 16; ++kk) {
        const uint32_t off = ((kk >> 2) * 8192 + (kk & 3) * 32) / 16;
        wg::wgmma_m64n64k16_bf16_ss(sacc, desc(q_lo + off), desc(k_lo + off), 1);
      }
      wg::wgmma_commit();
      tr.mark(13, gb);
      const uint64_t valid = *reinterpret_cast<const uint64_t*>(valid8 + s * 8);
      if (pv_pending) {
        wg::wgmma_wait<1>();  // the PV group of block b - 1
        wg::fence_regs(o);
        pv_other_release(b - 1);
      }
      wg::wgmma_wait<0>();
      wg::fence_regs(sacc);
      tr.mark(12, gb);
      // The query's last S step is done (the other consumer's were before its pfull, waited
      // for above), so Q's tile takes the next query's Q now, under this query's last softmax,
      // PV steps and epilogue. With one block, the other consumer may not have waited for this
      // query's Q yet: the load then waits for the epilogue (below).
      if (b == num_blocks - 1 && num_blocks > 1 && (threadIdx.x & 127) == 0 &&
          t + gridDim.x < a.num_queries) {
        load_q(t + gridDim.x);
      }
      // 2. Scale and mask (attn::block_scores), block maxima across the quad.
      float bmax[2] = {-INFINITY, -INFINITY};
      if (valid == ~uint64_t{0}) {
        // Every key of the block present (all but a query's last block, or a sequence's first
        // window): no per-key test, two instructions a logit instead of four on the owner's chain
        // (the same values: the masked form multiplies every present key alike).
#pragma unroll
        for (int i = 0; i < 32; ++i) {
          sacc[i] = __fmul_rn(sacc[i], scale);
          bmax[(i & 3) >> 1] = fmaxf(bmax[(i & 3) >> 1], sacc[i]);
        }
      } else {
        const uint64_t vbits = valid >> (2 * tq);
#pragma unroll
        for (int i = 0; i < 32; ++i) {
          const int n = i >> 2, e = i & 3;
          sacc[i] = (vbits >> (8 * n + (e & 1))) & 1 ? __fmul_rn(sacc[i], scale) : -INFINITY;
          bmax[e >> 1] = fmaxf(bmax[e >> 1], sacc[i]);
        }
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
      // 4. Publish P and the stats for the other consumer (once it is done with block gb - 2's).
      tr.mark(14, gb);
      if (gb >= 2) mbar::wait(bars.pempty(s), ((gb >> 1) - 1) & 1);
      tr.mark(15, gb);
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
      // P and the key tile are read by the other consumer's wgmmas (the async proxy) after its
      // wait on pfull: this fence orders both (the tile's stores through this consumer's wait on
      // full).
      wg::fence_proxy_async();
      mbar::arrive(bars.pfull(s));
      tr.mark(16, gb);
      // 5. The PV step of block b, P from registers.
      pv_issue(o, pa, resc, tile_addr, c);
      wg::wgmma_wait<0>();
      wg::fence_regs(o);
      tr.mark(18, gb);
      mbar::arrive(bars.empty(s));
    }

    // out = bf16(acc * 2^32 / (l + 2^(sink - max))), this consumer's 256 dims of rows g, g + 8
    // (attn::final_pair's operations; the divisions as attn::ExactDivider where it applies).
    tr.mark(19, gb0);
    float den[2];
    attn::final_denominators(den, run.l, run.m, a.sink, row0, row0 + 8);
    attn::ExactDivider div[2] = {attn::ExactDivider(den[0]), attn::ExactDivider(den[1])};
#pragma unroll
    for (int i = 0; i < 128; ++i) {
      o[i] = __fmul_rn(o[i], kKeyUnshift);
      div[(i >> 1) & 1].note(o[i]);
    }
    if (div[0].in_range() && div[1].in_range()) {
#pragma unroll
      for (int i = 0; i < 128; ++i) o[i] = div[(i >> 1) & 1](o[i]);
    } else {
#pragma unroll
      for (int i = 0; i < 128; ++i) o[i] = __fdiv_rn(o[i], den[(i >> 1) & 1]);
    }
    // The stores, straight from the registers. bf16: a 4 x 4 transpose within each quad (its four
    // lanes hold the four words of each 8-dim chunk) gives each lane whole chunks, 16-byte stores
    // of 64 contiguous bytes a row per quad; floats (out_f32): each lane's pairs as they are.
    // Q's tile is not needed for staging, so the next
    // query's Q loads under this epilogue (docs/notes/cuda-kernels.md, session 22: the staged
    // TMA stores and the Q load after them took about 10 K cycles a query).
    uint16_t* out_row = a.out + (t * kAttnHeads + row0) * kKvDim + 256 * c;
    float* out_row_f32 = a.out_f32 + (t * kAttnHeads + row0) * kKvDim + 256 * c + 2 * tq;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        uint32_t w[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          const int j = 4 * i + k;
          w[k] = pack_bf16(o[4 * j + 2 * r], o[4 * j + 2 * r + 1]);
        }
        if (a.out_f32) {  // the same values as floats: a quad's pairs are 32 contiguous bytes
#pragma unroll
          for (int k = 0; k < 4; ++k) {
            *reinterpret_cast<float2*>(out_row_f32 + r * 8 * kKvDim + 8 * (4 * i + k)) =
                make_float2(__uint_as_float(w[k] << 16), __uint_as_float(w[k] & 0xffff0000u));
          }
          continue;
        }
        // After the two exchanges lane tq holds word k of chunk 4 i + tq in w[k].
#pragma unroll
        for (int bit = 1; bit <= 2; bit <<= 1) {
#pragma unroll
          for (int k = 0; k < 4; ++k) {
            if (k & bit) continue;
            const bool hi = (tq & bit) != 0;
            const uint32_t y = __shfl_xor_sync(0xffffffffu, hi ? w[k] : w[k + bit], bit);
            if (hi) {
              w[k] = y;
            } else {
              w[k + bit] = y;
            }
          }
        }
        *reinterpret_cast<uint4*>(out_row + r * 8 * kKvDim + 8 * (4 * i + tq)) =
            make_uint4(w[0], w[1], w[2], w[3]);
      }
    }
    if (num_blocks == 1) {  // both consumers are past this query's Q: the next one loads
      wg::named_bar_sync(3, 256);
      if (threadIdx.x == 0 && t + gridDim.x < a.num_queries) load_q(t + gridDim.x);
    }
    tr.mark(20, gb0);
  }
  tr.flush(a, smem, c);
}

// kAblate: the benchmark's variant that honours args.ablate bits 0 and 1 (producer.cuh); kTrace:
// the one that records the timeline (bit 6); kGather: the producers copy rows of args.key_table
// (sparse_attention_seesaw_gather.cuh). Real calls run <false, false, kGather>.
template <bool kAblate, bool kTrace, bool kGather>
__global__ void __launch_bounds__(kThreads, 1)
    sparse_attention_seesaw_kernel(SparseAttentionFp8Args a,
                                   const __grid_constant__ CUtensorMap q_map) {
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
      // One arrival per thread (racecheck does not follow a warp's __syncwarp into lane 0's
      // arrival; one per warp measured the same: session 17).
      // (Gather mode: also one arrival a producer thread when its copies land.)
      mbar::init(bars.full(s), (kGather ? 2 : 1) * 32 * kProducerWarps);
      mbar::init(bars.empty(s), 256);
      mbar::init(bars.pfull(s), 128);
      mbar::init(bars.pempty(s), 128);
    }
    mbar::init(bars.q(), 1);
    mbar::init_fence();
  }
  __syncthreads();
  if (threadIdx.x >= 256) {
    wg::setmaxnreg_dec<kProducerRegs>();
    if constexpr (kGather) {
      produce_gather<kTrace>(a, smem, bars, num_blocks);
    } else {
      produce<kAblate, kTrace>(a, smem, bars, num_blocks);
    }
  } else {
    wg::setmaxnreg_inc<256 - kProducerRegs>();
    consume<kTrace>(a, &q_map, smem, bars, num_blocks);
  }
}

#else

template <bool kAblate, bool kTrace, bool kGather>
__global__ void sparse_attention_seesaw_kernel(SparseAttentionFp8Args,
                                               const __grid_constant__ CUtensorMap) {
  pdl::enter_dependent_grid();
}

#endif  // DI_WGMMA_ENABLED

}  // namespace
}  // namespace seesaw

cudaError_t sparse_attention_seesaw(const SparseAttentionFp8Args& a, int sms, cudaStream_t stream) {
  const size_t bytes = seesaw::SLayout::kBytes;
  // Q as [queries * 64][512] bf16 in boxes of 64 dims x 64 heads, 128-byte swizzled: the K-major
  // layout of the S step's A operand.
  const uint64_t rows = static_cast<uint64_t>(a.num_queries) * kAttnHeads;
  CUtensorMap q_map{};
  cudaError_t e = make_tensor_map_2d(&q_map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, a.q, kKvDim, rows,
                                     2 * kKvDim, 64, 64, CU_TENSOR_MAP_SWIZZLE_128B);
  if (e != cudaSuccess) return e;
  // One benchmark variant at a time: the stages left out (bits 0, 1; not in gather mode) or the
  // timeline (bit 6).
  const bool ablate = (a.ablate & 3) != 0, trace = (a.ablate & 64) != 0;
  const bool gather = a.key_table != nullptr && a.key_rows != nullptr;
  if (ablate && (trace || gather)) return cudaErrorInvalidValue;
  auto* kernel = ablate   ? seesaw::sparse_attention_seesaw_kernel<true, false, false>
                 : gather ? (trace ? seesaw::sparse_attention_seesaw_kernel<false, true, true>
                                   : seesaw::sparse_attention_seesaw_kernel<false, false, true>)
                 : trace  ? seesaw::sparse_attention_seesaw_kernel<false, true, false>
                          : seesaw::sparse_attention_seesaw_kernel<false, false, false>;
  e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(bytes));
  if (e != cudaSuccess) return e;
  // Persistent: one block per SM at most, each over queries blockIdx.x + k * gridDim.x (which
  // block runs a query does not change its bits).
  const int64_t blocks = std::min<int64_t>(a.num_queries, std::max(sms, 1));
  pdl::launch_dependent(kernel, dim3(static_cast<unsigned>(blocks)), dim3(seesaw::kThreads), bytes,
                        stream, a, q_map);
  return cudaGetLastError();
}

}  // namespace di::backend::cuda
