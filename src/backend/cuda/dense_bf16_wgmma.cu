// The tensor path's dense BF16 product (the head, 129,280 x 5,120) on Hopper's wgmma, with the
// bits of dense_bf16_tc.cu's row-group and shared-tile kernels for every output (branch headwg,
// docs/notes/cuda-kernels.md "headwg").
//
// Those kernels chain two mma.m16n8k16 per 32-wide K chunk; lane (g, q) holds K values
// 8q .. 8q + 7 of its rows, so the first MMA's logical k (2q, 2q + 1, 2q + 8, 2q + 9) are physical
// k 8q, 8q + 1, 8q + 2, 8q + 3 and the second's the next four. Here the weights are wgmma's
// register operand A, loaded from shared memory exactly as the shared-tile kernel loads its A
// fragments, and the activations are B, read by the tensor core from a 128-byte-swizzled K-major
// tile. The B tile is written in the MMAs' logical K order: 4-byte cp.async pieces (one k pair)
// go to the logical place of their physical pair, so each k16 step of the wgmma multiplies
// exactly the products of the matching mma.sync, position for position (session 8: HGMMA k16
// steps give HMMA.16816's bits). The rest is the shared-tile kernel's: a fresh chain per K part
// (k_splits), the parts added in part order with __fadd_rn, the same final rounding.
//
// A CTA is two warpgroups, 64 features each (128 per CTA, the shared-tile kernel's feature tile)
// x BT rows; ST stages of 64 K through a cp.async ring. The wgmmas of a stage run while the
// threads issue the copies of a later stage, and are drained before the next barrier (the slot
// they read is refilled after it).
#include <cstdint>

#include "backend/cuda/dense_bf16_wgmma.h"
#include "backend/cuda/device_numeric.cuh"
#include "backend/cuda/grid_dependency.cuh"
#include "backend/cuda/mma_e4m3.cuh"
#include "backend/cuda/wgmma_ptx.cuh"

namespace di::backend::cuda {

namespace {

constexpr int kTileF = 128;  // features per CTA: two warpgroups of 64
constexpr int kThreads = 256;

// One stage: the weights as [2 chunks][128 features][32 k] bf16 (the shared-tile kernel's
// layout: a quarter warp's 16-byte fragment loads cover 128 distinct bytes), then the
// activations as [BT rows][64 logical k] bf16 with the 128-byte swizzle.
template <int BT, int ST>
struct WgShape {
  static constexpr int kW = 2 * kTileF * 32 * 2;  // bytes
  static constexpr int kX = BT * 128;             // bytes
  static constexpr int kStage = kW + kX;          // a multiple of 1024: every x tile stays aligned
  static constexpr int kSmem = ST * kStage + 1024;
  static_assert(kStage % 1024 == 0 && kSmem <= 227 * 1024, "shared memory per block");
};

// The byte offset, within a row of the B tile (before the swizzle), of physical k pair `pair`
// (0..31, k 2 pair and 2 pair + 1) of a 64-K stage. Chunk h = pair / 16; in it, physical pair c
// is k 8q' + 4s + 2hi + (0, 1) with q' = c / 4, s = c / 2 % 2 (the k16 step), hi = c % 2, which
// the mma.sync A and B fragments hold at logical k 2p, 2p + 1 of step s with p = q' + 4 hi.
__host__ __device__ constexpr int logical_byte(int pair) {
  const int c = pair % 16, h = pair / 16;
  const int step = (c / 2) % 2, p = c / 4 + 4 * (c % 2);
  return 64 * h + 32 * step + 4 * p;
}
static_assert(logical_byte(0) == 0 && logical_byte(1) == 16 && logical_byte(2) == 32 &&
                  logical_byte(4) == 4 && logical_byte(15) == 60 && logical_byte(16) == 64,
              "k pairs 0, 1 (k 0-3) open the two halves of step 0; pair 2 (k 4, 5) opens step 1");

#if DI_WGMMA_ENABLED
template <int BT>
__device__ __forceinline__ void wgmma_rows(float (&d)[BT / 2], const uint32_t (&a)[4], uint64_t b) {
  if constexpr (BT == 128) {
    wg::wgmma_m64n128k16_bf16_rs(d, a, b, 1);
  } else {
    static_assert(BT == 64, "BT is 64 or 128");
    wg::wgmma_m64n64k16_bf16_rs(d, a, b, 1);
  }
}
#endif

// x: bf16 [rows, x_stride] (the group's slice starts at (feature / group_out) * k), w: bf16
// [n_out, k], y: [rows, n_out]. k % 32 == 0, k_part % 32 == 0, group_out % 128 == 0.
template <int BT, int ST, bool kOverlap>
__global__ void __launch_bounds__(kThreads, 1)
    dense_bf16_wgmma_kernel(const uint16_t* __restrict__ x,
                            int64_t rows,
                            const uint16_t* __restrict__ w,
                            int64_t n_out,
                            int64_t k,
                            int64_t k_part,
                            int64_t group_out,
                            int64_t x_stride,
                            float* __restrict__ y,
                            bool round) {
  pdl::enter_dependent_grid();
#if DI_WGMMA_ENABLED
  using S = WgShape<BT, ST>;
  constexpr int R = BT / 2;  // accumulator floats per thread
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const uint32_t raw = smem_addr(smem_raw);
  unsigned char* const base = smem_raw + (((raw + 1023) & ~1023u) - raw);
  const uint32_t base_s = smem_addr(base);
  const int tid = threadIdx.x, lane = tid % 32, g = lane / 4, q = lane % 4;
  const int wrow = (tid / 128) * 64 + ((tid / 32) % 4) * 16 + g;  // feature row (and + 8)
  // Row tiles vary fastest, so the CTAs sharing a weight tile run together (L2 reuse).
  const int64_t t_base = static_cast<int64_t>(blockIdx.x) * BT;
  const int64_t f_base = static_cast<int64_t>(blockIdx.y) * kTileF;
  const uint16_t* xg = x + (f_base / group_out) * k;
  const int stages = static_cast<int>((k + 63) / 64);

  // Weights: 16-byte piece c of rows r0, r0 + 32, .. (as the shared-tile kernel).
  const int r0 = tid / 8, c = tid % 8;
  const uint16_t* wp = w + (f_base + r0) * k + c * 8;
  const int w_dst = (c / 4) * kTileF * 64 + r0 * 64 + (c % 4) * 16;  // bytes
  // Activations: k pair xw of rows xr, xr + 8, ..: every row of a warp's copy is 128 contiguous
  // bytes of x; rows xr + 8i share xr's swizzle (row % 8).
  const int xw = tid % 32, xr = tid / 32;
  const int lb = logical_byte(xw);
  const int x_dst = xr * 128 + (((lb >> 4) ^ xr) << 4) + (lb & 15);
  const uint16_t* xp = xg + (t_base + xr) * x_stride + 2 * xw;
  auto load_stage = [&](int s) {
    unsigned char* sw = base + (s % ST) * S::kStage;
    unsigned char* sx = sw + S::kW;
    const int64_t k0 = static_cast<int64_t>(s) * 64;
    const bool wk = k0 + (c / 4) * 32 < k;  // the stage's second chunk may lie past K
#pragma unroll
    for (int i = 0; i < kTileF / 32; ++i) {
      const bool ok = wk && f_base + r0 + 32 * i < n_out;
      cp_async16(sw + w_dst + i * 32 * 64, ok ? wp + 32 * i * k + k0 : w, ok ? 16 : 0);
    }
    const bool xk = k0 + (xw / 16) * 32 < k;
#pragma unroll
    for (int i = 0; i < BT / 8; ++i) {
      const bool ok = xk && t_base + xr + 8 * i < rows;
      cp_async4(sx + x_dst + i * 8 * 128, ok ? xp + 8 * i * x_stride + k0 : x, ok ? 4 : 0);
    }
  };

  float acc[R], sum[R];
#pragma unroll
  for (int i = 0; i < R; ++i) acc[i] = sum[i] = 0.0f;
  bool first_part = true;
  int64_t part_end = k_part;

  // kOverlap: a stage's wgmmas stay in flight across the next barrier (each thread waits only
  // for the stage before), so the copies run kAhead = ST - 2 stages ahead into the slot of stage
  // s - 2; otherwise they are drained per stage and the copies run ST - 1 ahead.
  constexpr int kAhead = kOverlap ? ST - 2 : ST - 1;
#pragma unroll 1
  for (int s = 0; s < kAhead; ++s) {
    if (s < stages) load_stage(s);
    cp_async_commit();
  }
#pragma unroll 1
  for (int s = 0; s < stages; ++s) {
    cp_async_wait<kAhead - 1>();
    wg::fence_proxy_async();  // this thread's cp.async writes before wgmma's async-proxy reads
    __syncthreads();          // stage s landed for every thread; the slot loaded next is free
    if (s + kAhead < stages) load_stage(s + kAhead);
    cp_async_commit();
    const uint16_t* sw = reinterpret_cast<const uint16_t*>(base + (s % ST) * S::kStage);
    const uint32_t sx = base_s + (s % ST) * S::kStage + S::kW;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t kc = static_cast<int64_t>(s) * 64 + h * 32;
      if (kc >= k) break;
      const uint16_t* wb = sw + h * kTileF * 32 + wrow * 32 + 8 * q;
      const uint4 a = *reinterpret_cast<const uint4*>(wb);
      const uint4 b = *reinterpret_cast<const uint4*>(wb + 8 * 32);
      const uint32_t a0[4] = {a.x, b.x, a.y, b.y}, a1[4] = {a.z, b.z, a.w, b.w};
      // (No register fence while the previous group may still write acc: ptxas would wait for it.)
      if constexpr (!kOverlap) wg::fence_regs(acc);
      wg::wgmma_fence();
      wgmma_rows<BT>(acc, a0, wg::desc_sw128(sx + 64 * h));
      wgmma_rows<BT>(acc, a1, wg::desc_sw128(sx + 64 * h + 32));
      wg::wgmma_commit();
      if (kc + 32 == part_end) {  // a K part ends: add its chain to the earlier parts'
        wg::wgmma_wait<0>();
        wg::fence_regs(acc);
#pragma unroll
        for (int i = 0; i < R; ++i) {
          sum[i] = first_part ? acc[i] : __fadd_rn(sum[i], acc[i]);
          acc[i] = 0.0f;
        }
        first_part = false;
        part_end += k_part;
      }
    }
    if constexpr (kOverlap) {
      wg::wgmma_wait<1>();
    } else {
      wg::wgmma_wait<0>();
      wg::fence_regs(acc);
    }
  }
  wg::wgmma_wait<0>();
  wg::fence_regs(acc);
  cp_async_wait<0>();

  // sum[4j + e]: feature wrow + 8 (e / 2), row 8j + 2q + e % 2.
#pragma unroll
  for (int j = 0; j < BT / 8; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int64_t f = f_base + wrow + 8 * (e >> 1), t = t_base + 8 * j + 2 * q + (e & 1);
      if (f < n_out && t < rows)
        y[t * n_out + f] = round ? round_bf16(sum[4 * j + e]) : sum[4 * j + e];
    }
  }
#endif
}

template <int BT, int ST, bool kOverlap>
cudaError_t launch(const uint16_t* x,
                   int64_t rows,
                   const DeviceWeight& w,
                   int groups,
                   int splits,
                   float* y,
                   bool round_bf16,
                   cudaStream_t s) {
  auto* kernel = dense_bf16_wgmma_kernel<BT, ST, kOverlap>;
  constexpr int smem = WgShape<BT, ST>::kSmem;
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (e != cudaSuccess) return e;
  const int64_t feature_tiles = (w.out_features + kTileF - 1) / kTileF;
  if (feature_tiles > 65535) return cudaErrorInvalidValue;  // gridDim.y's limit
  const dim3 grid(static_cast<unsigned>((rows + BT - 1) / BT),
                  static_cast<unsigned>(feature_tiles));
  return pdl::launch_dependent(kernel, grid, dim3(kThreads), static_cast<size_t>(smem), s, x, rows,
                               reinterpret_cast<const uint16_t*>(w.data), w.out_features,
                               w.in_features, w.in_features / splits, w.out_features / groups,
                               groups * w.in_features, y, round_bf16);
}

}  // namespace

bool dense_bf16_wgmma_available() {
  int device = 0, major = 0, minor = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
    return false;
  }
  return major == 9 && minor == 0;
}

cudaError_t dense_bf16_wgmma(const uint16_t* x,
                             int64_t rows,
                             const DeviceWeight& w,
                             int groups,
                             int splits,
                             float* y,
                             bool round_bf16,
                             cudaStream_t s,
                             bool wide,
                             bool drain) {
  if (!dense_bf16_wgmma_available()) return cudaErrorNotSupported;
  // The 128-row tile above 64 rows once its CTAs reach half the SMs (measured: wo_a's 64 CTAs at
  // 128 rows take 0.062 ms, its 128 on the 64-row tile 0.041; at 256 rows 128 CTAs take 0.063
  // and 256 on the 64-row tile 0.079; the head's >= 1010 tie).
  int device = 0, sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    return cudaErrorNotSupported;
  }
  const int64_t ctas128 = (w.out_features + kTileF - 1) / kTileF * ((rows + 127) / 128);
  const bool rows128 = wide || (rows > 64 && 2 * ctas128 >= sms);
  if (drain) {
    return rows128 ? launch<128, 6, false>(x, rows, w, groups, splits, y, round_bf16, s)
                   : launch<64, 8, false>(x, rows, w, groups, splits, y, round_bf16, s);
  }
  return rows128 ? launch<128, 6, true>(x, rows, w, groups, splits, y, round_bf16, s)
                 : launch<64, 8, true>(x, rows, w, groups, splits, y, round_bf16, s);
}

}  // namespace di::backend::cuda
