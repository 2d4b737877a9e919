// The tile product of moe_tc_tile.cuh for single-row-group units (decode sizes: warps of 16
// features, one n8 group of rows), with fewer instructions per weight byte and the same
// arithmetic per output (docs/notes/cuda-kernels.md, "moe14"):
// - copy sources and destinations computed once per item (a stage only adds its K offset), the
//   ring slot a counter (no 64-bit division per stage);
// - the weight scales decoded once per (feature, block) and stage, by one lane each, without
//   branches, and handed to the MMA lanes by shuffles (the tile kernel decodes each one in the
//   four lanes of a group, with branches for e8m0's two special bytes);
// - a unit of one row (every unit at one token) stages that row once instead of eight copies and
//   promotes only the even MMA columns (the odd ones hold copies of the row and are never stored);
// - kGroups = 2 (variant 11, measured slower, never picked): two warps per 16 features, each
//   computing the block sums of half of every stage's blocks (the second group's go through
//   shared memory); the first group runs the whole promotion chain in K order. The idea: at one
//   token half the issue slots idle while each warp waits on its own chains, so halving the work
//   per warp should shorten the kernel; it took one token from 70 to 87 us instead.
#pragma once

#include <cstdint>

#include "backend/cuda/moe_tc_tile.cuh"

namespace di::backend::cuda::moe_tc {

constexpr int kDecodeFeatWarps = kFeat / 16;  // warps of one group (16 features each)

template <int kGroups>
inline constexpr int kDecodeThreads = 32 * kDecodeFeatWarps* kGroups;

// Shared memory after the ring: the second group's block sums, [vector][feature warp][lane]
// (16-byte vectors: a warp's stores and loads hit 32 distinct banks per quarter).
template <int kMats>
inline constexpr int kSplitVectors = kMats*(kStageK / 64);  // (2 blocks x 4 sums) / 4 per mat
template <int kMats, int kGroups>
inline constexpr int kSplitBytes = kGroups == 1 ? 0 : kSplitVectors<kMats>* kDecodeFeatWarps * 512;

// weight_scale14 without branches: e8m0_to_float's three cases as selects, then the same
// multiply (the same bits: the selected pattern is the float e8m0_to_float returns).
__device__ __forceinline__ float weight_scale14_sel(uint32_t b) {
  uint32_t bits = b << 23;
  bits = b == 0u ? 0x00400000u : bits;
  bits = b == 255u ? 0x7fc00000u : bits;
  return __fmul_rn(__uint_as_float(bits), 16384.0f);
}

// Named barrier `id` over the two warps (64 threads) of one feature warp pair.
__device__ __forceinline__ void pair_arrive(int id) {
  asm volatile("bar.arrive %0, 64;\n" ::"r"(id) : "memory");
}
__device__ __forceinline__ void pair_sync(int id) {
  asm volatile("bar.sync %0, 64;\n" ::"r"(id) : "memory");
}

// acc[m] = 16 features x the unit's rows (one n8 group) of matrix m over all of K, in K order,
// for the warps of group 0 (kGroups == 2: the other warps' acc is not the product); the same
// operations per output as tile_product<kMats, 1, 1, ST>. kOneRow: the unit has one row (column
// 0; the other even columns repeat it, the odd ones are left at zero).
template <int kMats, int ST, bool kOneRow, int kGroups>
__device__ __forceinline__ void tile_product_decode(const uint16_t* q,
                                                    const float* q_scale,
                                                    int64_t K,
                                                    unsigned char* smem,
                                                    const uint8_t* const (&w)[kMats],
                                                    const uint8_t* const (&ws)[kMats],
                                                    int64_t f0,
                                                    const int* rows,
                                                    float (&acc)[kMats][1][1][4]) {
  using L = Layout<kMats, 1, ST>;
  constexpr int kThreads = kDecodeThreads<kGroups>;
  constexpr int kBlocks = kStageK / 32 / kGroups;  // blocks per stage of one warp
  constexpr int kWPieces = kFeat * 4 / kThreads;   // 16-byte weight pieces per thread and matrix
  static_assert(kMats <= 2 && kGroups <= 2, "the copy split assumes these");
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, tig = lane % 4;
  const int fw = warp % kDecodeFeatWarps, group = kGroups == 1 ? 0 : warp / kDecodeFeatWarps;
  const int nk = static_cast<int>(K / kStageK);
  const int64_t wrow = K / 2, srow = K / 32;
  // Copy addresses: weight piece j = tid % 4 of rows tid / 4 + i * (kThreads / 4).
  const uint8_t* w_src[kMats];
  uint32_t w_dst[kMats];
#pragma unroll
  for (int m = 0; m < kMats; ++m) {
    w_src[m] = w[m] + (f0 + tid / 4) * wrow + (tid % 4) * 16;
    w_dst[m] = L::w(m) + (tid / 4) * kWRow + (tid % 4) * 16;
  }
  const int sm = kMats == 2 ? (tid / kFeat) % 2 : 0, sr = tid % kFeat;
  const bool ws_piece = tid < kMats * kFeat;
  const uint8_t* ws_src = ws[sm] + (f0 + sr) * srow;
  const uint32_t ws_dst = L::ws(sm) + sr * 4;
  // Activation pieces: 16 per staged row (kOneRow: one row), then one per row for its 4 scales.
  constexpr int kXPieces = kOneRow ? 16 : 8 * 16, kXsPieces = kOneRow ? 1 : 8;
  const bool x_piece = tid < kXPieces, xs_piece = tid >= kXPieces && tid < kXPieces + kXsPieces;
  const int xt = x_piece ? tid / 16 : min(tid - kXPieces, 7);  // clamped without a piece
  const uint16_t* x_src = q + rows[xt] * K + (tid % 16) * 8;
  const float* xs_src = q_scale + rows[xt] * srow;
  const uint32_t x_dst = x_piece ? L::kX + xt * kXRow + (tid % 16) * 16 : L::kXs + xt * 16;
  auto load = [&](int slot, int kb) {
    const uint32_t base = smem_addr(smem + slot * L::kStage);
    const int64_t k0 = int64_t{kb} * kStageK;
#pragma unroll
    for (int m = 0; m < kMats; ++m) {
#pragma unroll
      for (int i = 0; i < kWPieces; ++i) {
        cp_async16(base + w_dst[m] + i * (kThreads / 4) * kWRow,
                   w_src[m] + i * (kThreads / 4) * wrow + k0 / 2);
      }
    }
    if (ws_piece) cp_async4(base + ws_dst, ws_src + k0 / 32);
    if (x_piece) cp_async16(base + x_dst, x_src + k0);
    if (xs_piece) cp_async16(base + x_dst, xs_src + k0 / 32);
  };
#pragma unroll
  for (int m = 0; m < kMats; ++m) {
#pragma unroll
    for (int c = 0; c < 4; ++c) acc[m][0][0][c] = 0.0f;
  }
#pragma unroll
  for (int s = 0; s < ST - 1; ++s) {
    if (s < nk) load(s, s);
    cp_commit();
  }
  // Lane l decodes the scales of matrix l / 16 (kMats == 2), feature fw * 16 + l % 16.
  const int dm = kMats == 2 ? lane / 16 : 0, dr = fw * 16 + lane % 16;
  const int xrow = kOneRow ? 0 : g, xc0 = kOneRow ? 0 : 2 * tig;
  float4* split = reinterpret_cast<float4*>(smem + ST * L::kStage) + fw * 32 + lane;
  int slot = 0, fill = ST - 1;
  for (int kb = 0; kb < nk; ++kb) {
    cp_wait<ST - 2>();
    __syncthreads();  // stage kb landed for all; every warp is done with stage kb - 1's slot
    const unsigned char* st = smem + slot * L::kStage;
    // This stage's scale word and activations before the next copies (a load behind the
    // copies in the LSU queue waits for them).
    const uint32_t sword = *reinterpret_cast<const uint32_t*>(st + L::ws(dm) + dr * 4);
    const float* xs = reinterpret_cast<const float*>(st + L::kXs);
    uint4 b[kBlocks];
    float sx0[kStageK / 32], sx1[kStageK / 32];
#pragma unroll
    for (int i = 0; i < kBlocks; ++i) {
      const int blk = group * kBlocks + i;
      b[i] = *reinterpret_cast<const uint4*>(st + L::kX + xrow * kXRow + blk * 64 + tig * 16);
    }
#pragma unroll
    for (int blk = 0; blk < kStageK / 32; ++blk) {
      sx0[blk] = xs[xc0 * 4 + blk];
      sx1[blk] = kOneRow ? sx0[blk] : xs[(xc0 + 1) * 4 + blk];
    }
    if (kb + ST - 1 < nk) load(fill, kb + ST - 1);
    cp_commit();
    slot = slot + 1 == ST ? 0 : slot + 1;
    fill = fill + 1 == ST ? 0 : fill + 1;
    float sdec[kStageK / 32];
#pragma unroll
    for (int blk = 0; blk < kStageK / 32; ++blk)
      sdec[blk] = weight_scale14_sel((sword >> (8 * blk)) & 0xffu);
    auto promote = [&](int m, int blk, const float(&sum)[4]) {
      const float s_lo = __shfl_sync(0xffffffffu, sdec[blk], m * 16 + g);
      const float s_hi = __shfl_sync(0xffffffffu, sdec[blk], m * 16 + g + 8);
      float* o = acc[m][0][0];
      o[0] = __fmaf_rn(sum[0], __fmul_rn(s_lo, sx0[blk]), o[0]);
      o[2] = __fmaf_rn(sum[2], __fmul_rn(s_hi, sx0[blk]), o[2]);
      if constexpr (!kOneRow) {
        o[1] = __fmaf_rn(sum[1], __fmul_rn(s_lo, sx1[blk]), o[1]);
        o[3] = __fmaf_rn(sum[3], __fmul_rn(s_hi, sx1[blk]), o[3]);
      }
    };
#pragma unroll
    for (int i = 0; i < kBlocks; ++i) {
      const int blk = group * kBlocks + i;
#pragma unroll
      for (int m = 0; m < kMats; ++m) {
        const unsigned char* wr = st + L::w(m) + (fw * 16 + g) * kWRow + blk * 16 + tig * 4;
        const uint32_t lo = *reinterpret_cast<const uint32_t*>(wr);
        const uint32_t hi = *reinterpret_cast<const uint32_t*>(wr + 8 * kWRow);
        uint32_t pl[4], ph[4];
        e2m1_quad(lo, pl);
        e2m1_quad(hi, ph);
        const uint32_t a0[4] = {pl[0], ph[0], pl[1], ph[1]};
        const uint32_t a1[4] = {pl[2], ph[2], pl[3], ph[3]};
        float sum[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        mma_f16(sum, a0, b[i].x, b[i].y);
        mma_f16(sum, a1, b[i].z, b[i].w);
        if (kGroups == 1 || group == 0) {
          promote(m, i, sum);  // (blk == i: a constant index into the scale arrays)
        } else {
          split[(m * kBlocks + i) * kDecodeFeatWarps * 32] = {sum[0], sum[1], sum[2], sum[3]};
        }
      }
    }
    if constexpr (kGroups == 2) {
      // Group 1's sums of this stage to group 0, which promotes them after its own (K order).
      // One buffer suffices: group 1 writes the next stage's only after the CTA barrier above,
      // which group 0 reaches after reading these.
      if (group == 1) {
        __syncwarp();
        pair_arrive(1 + fw);
      } else {
        __syncwarp();
        pair_sync(1 + fw);
#pragma unroll
        for (int i = 0; i < kBlocks; ++i) {
#pragma unroll
          for (int m = 0; m < kMats; ++m) {
            const float4 v = split[(m * kBlocks + i) * kDecodeFeatWarps * 32];
            const float sum[4] = {v.x, v.y, v.z, v.w};
            promote(m, kBlocks + i, sum);
          }
        }
      }
    }
  }
  cp_wait<0>();
  __syncthreads();  // the next item reuses the ring and the row table
}

// The tile product of one item: tile_product (kDecode 0), or (NT = kMi = 1) the decode one with
// kDecode warp groups, whose one-row case is taken per item (the same bits either way).
template <int kDecode, int kMats, int NT, int kMi, int ST>
__device__ __forceinline__ void item_product(const uint16_t* q,
                                             const float* q_scale,
                                             int64_t K,
                                             unsigned char* smem,
                                             const uint8_t* const (&w)[kMats],
                                             const uint8_t* const (&ws)[kMats],
                                             int64_t f0,
                                             const int* rows,
                                             int unit_rows,
                                             float (&acc)[kMats][kMi][NT][4]) {
  if constexpr (kDecode > 0) {
    static_assert(NT == 1 && kMi == 1, "the decode product is the single-group 16-feature tile");
    if (unit_rows == 1) {
      tile_product_decode<kMats, ST, true, kDecode>(q, q_scale, K, smem, w, ws, f0, rows, acc);
    } else {
      tile_product_decode<kMats, ST, false, kDecode>(q, q_scale, K, smem, w, ws, f0, rows, acc);
    }
  } else {
    tile_product<kMats, NT, kMi, ST>(q, q_scale, K, smem, w, ws, f0, rows, acc);
  }
}

}  // namespace di::backend::cuda::moe_tc
