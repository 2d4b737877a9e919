// The K loop of the wgmma expert GEMMs (moe_grouped_wgmma.cu): a tile of 128 tokens of one plan
// unit x 128 B columns (128 features of w2, or 64 features of w1 followed by the same 64 of w3),
// one producer warpgroup and two consumer warpgroups of 64 tokens each.
//
// The product is computed as D[token][column] = q . w^T with the tokens as wgmma's register
// operand A and the weights as B in shared memory, so each token's act_quant values load
// straight from their MMA order (here e4m3 bytes, half the bytes of the mma.sync kernels' f16
// copy: one 8-byte load per row and 32-block gives both k16 steps' fragments, converted exactly
// to the f16 B fragments of moe_tc_tile.cuh) and the weights are converted once per CTA (not
// once per token group): the producer turns each K stage of e2m1 nibbles into f16 in
// the 128-byte-swizzled K-major layout, placing every weight at the k16 step and position where
// the mma.sync kernel's A fragment holds it. Each 32-block is then the same two k16 steps chained
// from zero (session 8: HGMMA k16 steps give HMMA.16816's bits) and is promoted in K order.
//
// Promotion. The mma.sync kernels compute acc = fma(sum, fmul(w_scale * 2^14, a_scale), acc), two
// instructions per output and block. Both scales are powers of two, so their product is exact,
// and when every weight scale of the stage lies in [2^-23, 2] the producer folds 2^14 * w_scale
// into the f16 weights instead (e2m1 * w_scale is exact in f16 there: an exact HMUL2 by a power
// of two). Each column's block sum then comes out scaled by that power of two, exactly, as long
// as the tensor core's fp32 accumulation does not depend on the scale of its operands (all values
// stay normal: products >= 2^-33), and acc = fma(sum', a_scale, acc) rounds the same real number
// once: the same bits with one instruction (tested bitwise against the unfolded variant and the
// mma.sync kernels; a test, not a proof). A stage with any scale outside that range keeps the
// unfolded weights and the two-instruction promotion; the flag is uniform per stage, so the
// consumers branch per stage.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "backend/cuda/device_numeric.cuh"
#include "backend/cuda/mbarrier.cuh"
#include "backend/cuda/moe_tc_tile.cuh"
#include "backend/cuda/wgmma_ptx.cuh"

namespace di::backend::cuda::moe_wg {

constexpr int kRows = 128;     // tokens per tile: two consumer warpgroups of 64
constexpr int kCols = 128;     // B columns per tile
constexpr int kStageK = 128;   // K per stage: four 32-blocks
constexpr int kThreads = 384;  // producer warpgroup, then the two consumers
constexpr int kRawRow = 80;    // raw weight bytes per column and stage (64 + 16: no conflicts)
constexpr uint8_t kFoldLo = 104, kFoldHi = 128;  // ue8m0 bytes of 2^-23 and 2^1

// Shared memory, from a 1024-byte aligned base (the swizzle needs it). kBSt converted B stages
// (the producer runs up to kBSt - 1 stages ahead of the slower consumer); the raw and activation
// rings shrink to make room for deeper B rings.
template <int kBSt>
struct Smem {
  static constexpr int kBStages = kBSt;
  static constexpr int kRawStages = kBSt == 2 ? 4 : 3;                // raw weight stages
  static constexpr int kQStages = kBSt == 2 ? 5 : kBSt == 3 ? 4 : 3;  // per consumer
  static constexpr int kB = 2 * kCols * 128;     // B stage: two [128 columns][64 k] f16 sub-tiles
  static constexpr int kBScale = 4 * kCols * 4;  // its weight scales * 2^14, [block][column]
  static constexpr int kRaw = kCols * kRawRow + kCols * 4;  // nibbles, then 4 scale bytes each
  static constexpr int kQ = 64 * 128 + 64 * 16;  // 64 tokens x 128 k e4m3, then 4 scales each
  static constexpr int kBScaleOff = kBSt * kB;
  static constexpr int kRawOff = kBScaleOff + kBSt * kBScale;
  static constexpr int kQOff = kRawOff + kRawStages * kRaw;
  static constexpr int kFlagOff = kQOff + 2 * kQStages * kQ;
  static constexpr int kBarOff = kFlagOff + 16;  // full[kBSt], empty[kBSt]
  static constexpr int kBytes = kBarOff + 16 * kBSt + 1024;
  static_assert(kBSt >= 2 && kBSt <= 4, "fold flags: 4 slots");
  static_assert(kBytes <= 227 * 1024, "shared memory per block");
};

// One item: a plan unit's rows (up to 128) x one column tile.
struct Item {
  int expert, slot0, rows, tile;
};

#if DI_WGMMA_ENABLED

// Two e4m3 values (the low 16 bits of v, the lower byte first) as an f16 pair, exactly.
__device__ __forceinline__ uint32_t e4m3x2_f16x2(uint32_t v) {
  uint32_t h;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;\n" : "=r"(h) : "h"(static_cast<uint16_t>(v)));
  return h;
}

// PTX named barrier `id` over one warpgroup (wg::named_bar_sync) that also returns whether the
// predicate held in every thread.
__device__ __forceinline__ bool wg_all(int id, bool v) {
  uint32_t r;
  asm volatile(
      "{\n.reg .pred p, q;\nsetp.ne.u32 p, %1, 0;\nbar.red.and.pred q, %2, 128, p;\n"
      "selp.u32 %0, 1, 0, q;\n}\n"
      : "=r"(r)
      : "r"(static_cast<uint32_t>(v)), "r"(id)
      : "memory");
  return r != 0;
}

// Pair I of each of the four words of one column's 32-block (moe_tc::e2m1_pair), times `mul`
// (an f16x2 power of two) when folding: one 16-byte chunk of the B row.
template <int I, bool kFold>
__device__ __forceinline__ uint4 chunk(const uint4& v, uint32_t mul) {
  uint4 o{moe_tc::e2m1_pair<I>(v.x), moe_tc::e2m1_pair<I>(v.y), moe_tc::e2m1_pair<I>(v.z),
          moe_tc::e2m1_pair<I>(v.w)};
  if constexpr (kFold) {
    auto m = [&](uint32_t& x) { asm("mul.rn.f16x2 %0, %0, %1;\n" : "+r"(x) : "r"(mul)); };
    m(o.x);
    m(o.y);
    m(o.z);
    m(o.w);
  }
  return o;
}

// One column's 32-block: its four B chunks (step 0 k 0-7, k 8-15, step 1 k 0-7, k 8-15), two
// computed before their stores (so a store's source registers are not the next chunk's).
template <bool kFold>
__device__ __forceinline__ void convert_block(
    const uint4& v, uint32_t mul, unsigned char* row, int blk, int sw) {
  const int c0 = (blk % 2) * 4;
  const uint4 o0 = chunk<0, kFold>(v, mul), o1 = chunk<1, kFold>(v, mul);
  *reinterpret_cast<uint4*>(row + (((c0 + 0) ^ sw) << 4)) = o0;
  *reinterpret_cast<uint4*>(row + (((c0 + 1) ^ sw) << 4)) = o1;
  const uint4 o2 = chunk<2, kFold>(v, mul), o3 = chunk<3, kFold>(v, mul);
  *reinterpret_cast<uint4*>(row + (((c0 + 2) ^ sw) << 4)) = o2;
  *reinterpret_cast<uint4*>(row + (((c0 + 3) ^ sw) << 4)) = o3;
}

// The producer warpgroup (thread n = column n): stages its column's nibbles and scale bytes
// through a cp.async ring (each thread reads only what it copied: no barrier), then per stage
// waits for the B slot to be released and writes the converted stage. gs counts stages over the
// CTA's items (the slot and mbarrier phase).
template <int kMats, bool kFold, bool kWide, int kBSt>
__device__ __forceinline__ void produce(const Item& it,
                                        int nst,
                                        int64_t K,
                                        const uint8_t* w,
                                        const uint8_t* ws,
                                        unsigned char* sm,
                                        uint32_t sb,
                                        int& gs) {
  const int n = threadIdx.x;
  const int64_t f = kMats == 2 ? int64_t{it.tile} * 64 + n % 64 : int64_t{it.tile} * kCols + n;
  const uint8_t* wr = w + f * (K / 2);
  const uint8_t* sr = ws + f * (K / 32);
  using Sm = Smem<kBSt>;
  constexpr int kRawStages = Sm::kRawStages;
  auto load = [&](int s) {
    const uint32_t dst = sb + Sm::kRawOff + (s % kRawStages) * Sm::kRaw;
#pragma unroll
    for (int j = 0; j < 4; ++j)
      moe_tc::cp_async16(dst + n * kRawRow + 16 * j, wr + s * 64 + 16 * j);
    moe_tc::cp_async4(dst + kCols * kRawRow + n * 4, sr + s * 4);
  };
#pragma unroll
  for (int s = 0; s < kRawStages - 1; ++s) {
    if (s < nst) load(s);
    moe_tc::cp_commit();
  }
  unsigned char* const row0 = sm + (n / 8) * 1024 + (n % 8) * 128;
  const int sw = n % 8;
  for (int s = 0; s < nst; ++s, ++gs) {
    if (s + kRawStages - 1 < nst) load(s + kRawStages - 1);
    moe_tc::cp_commit();
    moe_tc::cp_wait<kRawStages - 1>();
    const unsigned char* raw = sm + Sm::kRawOff + (s % kRawStages) * Sm::kRaw;
    const uint32_t sc = *reinterpret_cast<const uint32_t*>(raw + kCols * kRawRow + n * 4);
    bool fold = false;
    if constexpr (kFold) {
      bool ok = true;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const uint32_t b = (sc >> (8 * i)) & 0xffu;
        ok = ok && b >= kFoldLo && b <= kFoldHi;
      }
      fold = wg_all(1, ok);
    }
    const int slot = gs % kBSt;
    if (gs >= kBSt) mbar::wait(sb + Sm::kBarOff + 8 * (kBSt + slot), ((gs / kBSt) - 1) & 1);
    unsigned char* const row = row0 + slot * Sm::kB;
    float* const bsc = reinterpret_cast<float*>(sm + Sm::kBScaleOff + slot * Sm::kBScale);
    // kWide (168 registers, one block-sum set per consumer): the four blocks' loads and
    // conversions interleaved; else one block at a time (the producer then has 40 registers).
#pragma unroll(kWide ? 4 : 1)
    for (int blk = 0; blk < 4; ++blk) {
      const uint4 v = *reinterpret_cast<const uint4*>(raw + n * kRawRow + 16 * blk);
      const uint32_t b = (sc >> (8 * blk)) & 0xffu;
      unsigned char* const r = row + (blk / 2) * (kCols * 128);
      if (fold) {                              // (the consumers then never read the scales)
        const uint32_t m16 = (b - 98u) << 10;  // f16 2^(e + 14), e = b - 127 in [-23, 1]
        convert_block<true>(v, m16 | (m16 << 16), r, blk, sw);
      } else {
        bsc[blk * kCols + n] = moe_tc::weight_scale14(static_cast<uint8_t>(b));
        convert_block<false>(v, 0, r, blk, sw);
      }
    }
    if (n == 0) *reinterpret_cast<int*>(sm + Sm::kFlagOff + 4 * slot) = fold;
    wg::fence_proxy_async();  // the generic-proxy writes before wgmma's async-proxy reads
    mbar::arrive(sb + Sm::kBarOff + 8 * slot);
  }
  moe_tc::cp_wait<0>();
}

// One consumer stage. kSets 2: the four blocks' wgmmas alternate between two block-sum sets, each
// block promoted while the next one's wgmmas run; kSets 1 (fewer registers, so the producer can
// have more): each block's wgmmas, wait, promotion in turn, overlapped only with the other
// consumer warpgroup. Drained at the stage's end (a wgmma in flight across the loop edge or the
// barrier wait would make ptxas serialize them all).
template <bool kFolded, int kSets>
__device__ __forceinline__ void consume_stage(const unsigned char* qs,
                                              uint32_t bb,
                                              const float* bsc,
                                              uint32_t empty_bar,
                                              float (&acc)[64],
                                              float (&s0)[64],
                                              float (&s1)[kSets == 2 ? 64 : 1]) {
  const int t = threadIdx.x % 128, warp = t / 32, lane = t % 32, g = lane / 4, tig = lane % 4;
  const int r0 = 16 * warp + g;  // this thread's token rows r0 and r0 + 8 (same parity)
  const float* xs = reinterpret_cast<const float*>(qs + 64 * 128);
  // Row r's 8 bytes of block blk for this lane: byte offset 32 blk + 8 tig, in 16-byte chunk
  // (2 blk + tig / 2) ^ 2 (r % 4) (rows r0 and r0 + 8 have the same r % 4).
  auto frag = [&](int blk, uint32_t(&a0)[4], uint32_t(&a1)[4]) {
    const int off = ((((2 * blk + tig / 2) ^ ((r0 & 3) << 1))) << 4) + (tig % 2) * 8;
    const uint2 v0 = *reinterpret_cast<const uint2*>(qs + r0 * 128 + off);
    const uint2 v8 = *reinterpret_cast<const uint2*>(qs + (r0 + 8) * 128 + off);
    a0[0] = e4m3x2_f16x2(v0.x);
    a0[1] = e4m3x2_f16x2(v8.x);
    a0[2] = e4m3x2_f16x2(v0.x >> 16);
    a0[3] = e4m3x2_f16x2(v8.x >> 16);
    a1[0] = e4m3x2_f16x2(v0.y);
    a1[1] = e4m3x2_f16x2(v8.y);
    a1[2] = e4m3x2_f16x2(v0.y >> 16);
    a1[3] = e4m3x2_f16x2(v8.y >> 16);
  };
  auto issue = [&](int blk, float(&S)[64], const uint32_t(&a0)[4], const uint32_t(&a1)[4]) {
    const uint32_t b = bb + (blk / 2) * (kCols * 128) + (blk % 2) * 64;
    wg::fence_regs(S);
    wg::wgmma_fence();
    wg::wgmma_m64n128k16_f16_rs(S, a0, wg::desc_sw128(b), 0);
    wg::wgmma_m64n128k16_f16_rs(S, a1, wg::desc_sw128(b + 32), 1);
    wg::wgmma_commit();
  };
  auto mma = [&](int blk, float(&S)[64]) {
    uint32_t a0[4], a1[4];
    frag(blk, a0, a1);
    issue(blk, S, a0, a1);
  };
  auto retire = [&](int blk, float(&S)[64]) {
    wg::fence_regs(S);
    const float x0 = xs[r0 * 4 + blk], x1 = xs[(r0 + 8) * 4 + blk];
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      if constexpr (kFolded) {
        acc[4 * j + 0] = __fmaf_rn(S[4 * j + 0], x0, acc[4 * j + 0]);
        acc[4 * j + 1] = __fmaf_rn(S[4 * j + 1], x0, acc[4 * j + 1]);
        acc[4 * j + 2] = __fmaf_rn(S[4 * j + 2], x1, acc[4 * j + 2]);
        acc[4 * j + 3] = __fmaf_rn(S[4 * j + 3], x1, acc[4 * j + 3]);
      } else {
        const float2 w = *reinterpret_cast<const float2*>(bsc + blk * kCols + 8 * j + 2 * tig);
        acc[4 * j + 0] = __fmaf_rn(S[4 * j + 0], __fmul_rn(w.x, x0), acc[4 * j + 0]);
        acc[4 * j + 1] = __fmaf_rn(S[4 * j + 1], __fmul_rn(w.y, x0), acc[4 * j + 1]);
        acc[4 * j + 2] = __fmaf_rn(S[4 * j + 2], __fmul_rn(w.x, x1), acc[4 * j + 2]);
        acc[4 * j + 3] = __fmaf_rn(S[4 * j + 3], __fmul_rn(w.y, x1), acc[4 * j + 3]);
      }
    }
  };
  if constexpr (kSets == 2) {
    mma(0, s0);
    mma(1, s1);
    wg::wgmma_wait<1>();
    retire(0, s0);
    mma(2, s0);
    wg::wgmma_wait<1>();
    retire(1, s1);
    mma(3, s1);
    wg::wgmma_wait<1>();
    retire(2, s0);
    wg::wgmma_wait<0>();
    retire(3, s1);
  } else {  // the next block's fragments load and convert while this block's wgmmas run
    uint32_t a0[4], a1[4];
    frag(0, a0, a1);
#pragma unroll
    for (int blk = 0; blk < 4; ++blk) {
      issue(blk, s0, a0, a1);
      if (blk < 3) frag(blk + 1, a0, a1);
      wg::wgmma_wait<0>();
      retire(blk, s0);
    }
  }
  mbar::arrive(empty_bar);  // B and its scales are free (all four blocks' wgmmas are done)
}

// A consumer warpgroup's K loop for its 64 tokens of the item: thread t copies row t / 2 (source
// row `src` of q, e4m3 bytes in MMA order) into its ring, half of the row's chunks each (16-byte
// chunk c of row r stored at c ^ 2 (r % 4), so a half warp's 8-byte fragment loads hit distinct
// banks); the fragments become f16 (exactly) in registers.
template <int kSets, int kBSt>
__device__ __forceinline__ void consume(int nst,
                                        int64_t K,
                                        const uint8_t* q,
                                        const float* q_scale,
                                        int64_t src,
                                        unsigned char* sm,
                                        uint32_t sb,
                                        int wgi,
                                        int& gs,
                                        float (&acc)[64]) {
  const int t = threadIdx.x % 128, lr = t / 2, half = t % 2;
  using Sm = Smem<kBSt>;
  constexpr int kQStages = Sm::kQStages;
  const int qoff = Sm::kQOff + wgi * kQStages * Sm::kQ;
  const uint8_t* qrow = q + src * K;
  const float* srow = q_scale + src * (K / 32);
  auto load = [&](int s) {
    const uint32_t dst = sb + qoff + (s % kQStages) * Sm::kQ;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int c = half * 4 + i;
      moe_tc::cp_async16(dst + lr * 128 + ((c ^ ((lr & 3) << 1)) << 4),
                         qrow + s * kStageK + c * 16);
    }
    if (half == 0) moe_tc::cp_async16(dst + 64 * 128 + lr * 16, srow + s * 4);
  };
  float s0[64], s1[kSets == 2 ? 64 : 1];
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
#pragma unroll
  for (int s = 0; s < kQStages - 1; ++s) {
    if (s < nst) load(s);
    moe_tc::cp_commit();
  }
  for (int s = 0; s < nst; ++s, ++gs) {
    moe_tc::cp_wait<kQStages - 2>();
    wg::named_bar_sync(2 + wgi,
                       128);  // stage s landed for the warpgroup; stage s - 1's slot is free
    if (s + kQStages - 1 < nst) load(s + kQStages - 1);
    moe_tc::cp_commit();
    const int slot = gs % kBSt;
    mbar::wait(sb + Sm::kBarOff + 8 * slot, (gs / kBSt) & 1);
    const unsigned char* qs = sm + qoff + (s % kQStages) * Sm::kQ;
    const uint32_t bb = sb + slot * Sm::kB;
    const float* bsc = reinterpret_cast<const float*>(sm + Sm::kBScaleOff + slot * Sm::kBScale);
    const uint32_t empty_bar = sb + Sm::kBarOff + 8 * (kBSt + slot);
    if (*reinterpret_cast<const volatile int*>(sm + Sm::kFlagOff + 4 * slot)) {
      consume_stage<true, kSets>(qs, bb, bsc, empty_bar, acc, s0, s1);
    } else {
      consume_stage<false, kSets>(qs, bb, bsc, empty_bar, acc, s0, s1);
    }
  }
  moe_tc::cp_wait<0>();
  wg::named_bar_sync(2 + wgi, 128);  // the next item refills the ring
}

#endif  // DI_WGMMA_ENABLED

}  // namespace di::backend::cuda::moe_wg
