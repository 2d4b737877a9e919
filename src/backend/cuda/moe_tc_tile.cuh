// The tile product of the tensor-core expert GEMMs (moe_grouped_tc.cu): 128 output features x
// 8-32 rows of one expert over all of K, FP4 weights and f16 act_quant values staged through a
// cp.async ring, per 32-block two f16 m16n8k16 MMAs and the K-order promotion of their sum.
#pragma once

#include <cstdint>

#include "backend/cuda/device_numeric.cuh"

namespace di::backend::cuda::moe_tc {

constexpr int kFeat = 128;    // output features per tile
constexpr int kStageK = 128;  // K per pipeline stage: four 32-blocks
constexpr int kStages = 3;    // cp.async ring depth (two CTAs per SM fit)
// The deeper ring for a grid that fits in one wave anyway (one token: one CTA per SM, whose weight
// bytes in flight then set the pace; measured at batch 1, docs/benchmarks.md, session 13).
constexpr int kStagesDeep = 5;
constexpr int kWRow = kStageK / 2 + 16;  // weight row bytes per stage (+16: no bank conflicts)
constexpr int kXRow = kStageK * 2 + 64;  // activation row bytes per stage (+64: likewise)

// A tile's warps each own kMi m16 tiles of features: 4 warps of 32 or 8 warps of 16 (more warps
// per SM to hide the per-block MMA chain; the same arithmetic per output).
template <int kMi>
inline constexpr int kThreadsFor = 32 * kFeat / (16 * kMi);

// Shared memory of one stage: per matrix its weight rows and their scale bytes (4 per row), then
// the unit's activation rows (f16, MMA order) and their scales (4 floats per row).
template <int kMats, int NT, int ST = kStages>
struct Layout {
  static constexpr int kRows = 8 * NT;
  static constexpr int kW = kFeat * kWRow, kWs = kFeat * 4;
  static constexpr int kX = kMats * (kW + kWs), kXs = kX + kRows * kXRow;
  static constexpr int kStage = kXs + kRows * 16;
  static constexpr int kBytes = ST * kStage;
  __host__ __device__ static constexpr int w(int m) { return m * kW; }
  __host__ __device__ static constexpr int ws(int m) { return kMats * kW + m * kWs; }
};

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async4(uint32_t dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void cp_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void mma_f16(float (&d)[4],
                                        const uint32_t (&a)[4],
                                        uint32_t b0,
                                        uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Nibbles I and I + 4 of w (K offsets I and I + 4 of the thread's 8) as an f16 pair, each the
// e2m1 value times 2^-14: sign to bit 15, exponent and mantissa to bits 9-11 (e2m1's subnormal
// 0.5 lands on f16's subnormal 2^-15, so no case is special).
template <int I>
__device__ __forceinline__ uint32_t e2m1_pair(uint32_t w) {
  uint32_t em;
  if constexpr (I < 3) {
    em = w << (9 - 4 * I);
  } else {
    em = w >> 3;
  }
  return (em & 0x0E000E00u) | ((w << (12 - 4 * I)) & 0x80008000u);
}

// All four pairs of w at once, p[I] == e2m1_pair<I>(w) (checked for every 32-bit word on the host):
// 12 integer instructions where the four pairs take 15. The nibbles of even index move to bits
// 1-4 of their byte (lo), the odd ones likewise (hi); adding 7 x the sign bit (bit 4) moves it to
// bit 7 (no carry leaves a byte: at most 30 + 112), so each byte holds an f16 high byte: the pairs
// (2, 6) and (3, 7) are bytes 1 and 3 where they are, (0, 4) and (1, 5) bytes 0 and 2 moved up.
// Its halves: pairs 0 and 2 come from the even nibbles, 1 and 3 from the odd ones.
template <bool kOdd>
__device__ __forceinline__ void e2m1_half_quad(uint32_t w, uint32_t& first, uint32_t& second) {
  const uint32_t n = (kOdd ? w >> 3 : w << 1) & 0x1E1E1E1Eu;
  const uint32_t y = n + 7u * (n & 0x10101010u);
  first = prmt(y, 0u, 0x2404u);
  second = y & 0xFF00FF00u;
}
__device__ __forceinline__ void e2m1_quad(uint32_t w, uint32_t (&p)[4]) {
  e2m1_half_quad<false>(w, p[0], p[2]);
  e2m1_half_quad<true>(w, p[1], p[3]);
}

// The promotion scale of a weight row: its ue8m0 scale times 2^14 (undoes e2m1_pair's 2^-14).
__device__ __forceinline__ float weight_scale14(uint8_t b) {
  return __fmul_rn(e8m0_to_float(b), 16384.0f);
}

// acc[m][mi][nt] = this warp's 16 * kMi features (kMi m16 tiles) x the unit's 8 * NT rows (n8
// groups) of matrix m over all of K, in K order. `rows` holds the unit's source rows of q.
template <int kMats, int NT, int kMi, int ST = kStages>
__device__ __forceinline__ void tile_product(const uint16_t* q,
                                             const float* q_scale,
                                             int64_t K,
                                             unsigned char* smem,
                                             const uint8_t* const (&w)[kMats],
                                             const uint8_t* const (&ws)[kMats],
                                             int64_t f0,
                                             const int* rows,
                                             float (&acc)[kMats][kMi][NT][4]) {
  constexpr int kThreads = kThreadsFor<kMi>;
  using L = Layout<kMats, NT, ST>;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, tig = lane % 4;
  const int64_t nk = K / kStageK;
  auto load = [&](int slot, int64_t kb) {
    const uint32_t base = smem_addr(smem + slot * L::kStage);
    const int64_t k0 = kb * kStageK;
#pragma unroll
    for (int m = 0; m < kMats; ++m) {
#pragma unroll
      for (int c = tid; c < kFeat * 4; c += kThreads) {
        const int r = c / 4, j = c % 4;
        cp_async16(base + L::w(m) + r * kWRow + j * 16,
                   w[m] + (f0 + r) * (K / 2) + k0 / 2 + j * 16);
      }
      if (tid < kFeat)
        cp_async4(base + L::ws(m) + tid * 4, ws[m] + (f0 + tid) * (K / 32) + k0 / 32);
    }
#pragma unroll
    for (int c = tid; c < L::kRows * 16; c += kThreads) {
      const int t = c / 16, j = c % 16;
      cp_async16(base + L::kX + t * kXRow + j * 16, q + rows[t] * K + k0 + j * 8);
    }
    if (tid < L::kRows) {
      cp_async16(base + L::kXs + tid * 16, q_scale + rows[tid] * (K / 32) + k0 / 32);
    }
  };
#pragma unroll
  for (int m = 0; m < kMats; ++m) {
#pragma unroll
    for (int mi = 0; mi < kMi; ++mi) {
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
        for (int c = 0; c < 4; ++c) acc[m][mi][nt][c] = 0.0f;
      }
    }
  }
#pragma unroll
  for (int s = 0; s < ST - 1; ++s) {
    if (s < nk) load(s, s);
    cp_commit();
  }
  for (int64_t kb = 0; kb < nk; ++kb) {
    cp_wait<ST - 2>();
    __syncthreads();  // stage kb landed for all; every warp is done with stage kb - 1's slot
    if (kb + ST - 1 < nk) load(static_cast<int>((kb + ST - 1) % ST), kb + ST - 1);
    cp_commit();
    const unsigned char* st = smem + (kb % ST) * L::kStage;
    const float* xs = reinterpret_cast<const float*>(st + L::kXs);
#pragma unroll
    for (int blk = 0; blk < kStageK / 32; ++blk) {
      uint4 b[NT];
      float sx[NT][2];
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        b[nt] = *reinterpret_cast<const uint4*>(st + L::kX + (nt * 8 + g) * kXRow + blk * 64 +
                                                tig * 16);
        sx[nt][0] = xs[(nt * 8 + 2 * tig) * 4 + blk];
        sx[nt][1] = xs[(nt * 8 + 2 * tig + 1) * 4 + blk];
      }
#pragma unroll
      for (int m = 0; m < kMats; ++m) {
#pragma unroll
        for (int mi = 0; mi < kMi; ++mi) {
          const int r = warp * 16 * kMi + mi * 16 + g;
          const unsigned char* wr = st + L::w(m) + r * kWRow + blk * 16 + tig * 4;
          const uint32_t lo = *reinterpret_cast<const uint32_t*>(wr);
          const uint32_t hi = *reinterpret_cast<const uint32_t*>(wr + 8 * kWRow);
          const float s_lo = weight_scale14(st[L::ws(m) + r * 4 + blk]);
          const float s_hi = weight_scale14(st[L::ws(m) + (r + 8) * 4 + blk]);
          uint32_t pl[4], ph[4];
          e2m1_quad(lo, pl);
          e2m1_quad(hi, ph);
          const uint32_t a0[4] = {pl[0], ph[0], pl[1], ph[1]};
          const uint32_t a1[4] = {pl[2], ph[2], pl[3], ph[3]};
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
            float sum[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            mma_f16(sum, a0, b[nt].x, b[nt].y);
            mma_f16(sum, a1, b[nt].z, b[nt].w);
            float* o = acc[m][mi][nt];
            o[0] = __fmaf_rn(sum[0], __fmul_rn(s_lo, sx[nt][0]), o[0]);
            o[1] = __fmaf_rn(sum[1], __fmul_rn(s_lo, sx[nt][1]), o[1]);
            o[2] = __fmaf_rn(sum[2], __fmul_rn(s_hi, sx[nt][0]), o[2]);
            o[3] = __fmaf_rn(sum[3], __fmul_rn(s_hi, sx[nt][1]), o[3]);
          }
        }
      }
    }
  }
  cp_wait<0>();
  __syncthreads();  // the next item reuses the ring and the row table
}

}  // namespace di::backend::cuda::moe_tc
