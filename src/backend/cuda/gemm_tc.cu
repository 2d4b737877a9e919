// Block-scaled FP8 GEMM on tensor cores (mma.sync m16n8k32 e4m3, sm_89+), the `tensor` GEMM path
// of docs/notes/cuda-kernels.md. Per 32-wide K block each output's block sum comes from one MMA
// with a zero accumulator (the tensor core's own fp32 sum, not the CPU's 8-lane order), is scaled
// by activation scale x weight scale (powers of two: the product is exact) and added into an fp32
// accumulator in K order with one fma ("promotion" every 32, as the scales change every 32).
// Contract: within tolerance of the CPU backend; bitwise batch-invariant, because every tile
// configuration below runs the same per-output sequence (one MMA per K block, one fma, K order),
// and an MMA's output element depends only on its own row of A and column of B.
#include <cuda_fp8.h>

#include "backend/cuda/device_numeric.cuh"
#include "backend/cuda/grid_dependency.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/mma_e4m3.cuh"

namespace di::backend::cuda {

namespace {

// A CTA tile: WARPS_M x WARPS_N warps, each owning TM m16 tiles x TN n8 tiles; KB 32-wide K blocks
// per pipeline stage, STAGES stages in flight. Shared rows are padded by 16 bytes, which spreads
// the eight 16-byte rows an ldmatrix reads over distinct banks.
template <int WARPS_M, int WARPS_N, int TM, int TN, int KB, int STAGES>
struct TileConfig {
  static constexpr int kThreads = 32 * WARPS_M * WARPS_N;
  static constexpr int kBM = 16 * TM * WARPS_M, kBN = 8 * TN * WARPS_N;
  static constexpr int kRow = 32 * KB + 16;  // bytes per shared row
  static constexpr int kStageBytes = (kBM + kBN) * kRow + kBM * KB * 4;
  static constexpr int kSmem = STAGES * kStageBytes;
};

template <int WARPS_M, int WARPS_N, int TM, int TN, int KB, int STAGES>
__global__ void __launch_bounds__(32 * WARPS_M * WARPS_N)
    block_scaled_mma(const uint8_t* qa, const float* scales, int rows, DeviceWeight w, float* y) {
  pdl::enter_dependent_grid();
  using C = TileConfig<WARPS_M, WARPS_N, TM, TN, KB, STAGES>;
  static_assert(TN == 1 || TN % 2 == 0, "B fragments load in pairs of n8 tiles");
  static_assert(8 * TN <= 32, "a warp's columns share one 32-row weight scale block");
  extern __shared__ __align__(128) uint8_t smem[];
  const int K = static_cast<int>(w.in_features), N = static_cast<int>(w.out_features);
  const int nblk = K / 32, wnblk = (K + 31) / 32;
  const int num_stages = (nblk + KB - 1) / KB;
  const int m0 = blockIdx.y * C::kBM, n0 = blockIdx.x * C::kBN;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int wm = (warp / WARPS_N) * 16 * TM, wn = (warp % WARPS_N) * 8 * TN;

  auto a_tile = [&](int slot) { return smem + slot * C::kStageBytes; };
  auto b_tile = [&](int slot) { return a_tile(slot) + C::kBM * C::kRow; };
  auto a_scale = [&](int slot) {
    return reinterpret_cast<float*>(b_tile(slot) + C::kBN * C::kRow);
  };

  auto load_stage = [&](int stage, int slot) {
    const int kb0 = stage * KB;
    constexpr int kChunks = 2 * KB;  // 16-byte chunks per row per stage
    for (int i = tid; i < (C::kBM + C::kBN) * kChunks; i += C::kThreads) {
      const int r = i / kChunks, c = i % kChunks;
      const bool is_a = r < C::kBM;
      const int rr = is_a ? r : r - C::kBM;
      const int g = is_a ? m0 + rr : n0 + rr;
      const bool ok = (is_a ? g < rows : g < N) && kb0 + c / 2 < nblk;
      const uint8_t* base = is_a ? qa : w.data;
      const uint8_t* src = ok ? base + static_cast<int64_t>(g) * K + kb0 * 32 + c * 16 : base;
      uint8_t* dst = (is_a ? a_tile(slot) : b_tile(slot)) + rr * C::kRow + c * 16;
      cp_async16(dst, src, ok ? 16 : 0);
    }
    for (int i = tid; i < C::kBM * KB; i += C::kThreads) {
      const int r = i / KB, b = i % KB;
      const bool ok = m0 + r < rows && kb0 + b < nblk;
      const float* src = ok ? scales + static_cast<int64_t>(m0 + r) * nblk + kb0 + b : scales;
      cp_async4(a_scale(slot) + i, src, ok ? 4 : 0);
    }
  };

  float acc[TM][TN][4];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < num_stages) load_stage(s, s);
    cp_async_commit();
  }
  const int g_row = lane / 4;  // the accumulator fragment's row (and +8)
  for (int st = 0; st < num_stages; ++st) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    // The slot refilled here was consumed in iteration st - 1, which every thread has left.
    if (st + STAGES - 1 < num_stages) load_stage(st + STAGES - 1, (st + STAGES - 1) % STAGES);
    cp_async_commit();
    const int slot = st % STAGES;
    const uint8_t* at = a_tile(slot);
    const uint8_t* bt = b_tile(slot);
    const float* as = a_scale(slot);
#pragma unroll
    for (int kb = 0; kb < KB; ++kb) {
      const int g = st * KB + kb;
      if (g >= nblk) break;  // a partial last stage adds nothing: the same sequence for every KB
      // The warp's columns lie in one 32-row weight block (tiles are 32-aligned).
      const int wcol = n0 + wn;
      const float ws =
          wcol < N ? e8m0_to_float(w.scale[static_cast<int64_t>(wcol / 32) * wnblk + g]) : 0.0f;
      uint32_t bf[TN][2];
      if constexpr (TN == 1) {
        const int l = lane % 16;
        uint32_t r[2];
        ldmatrix_x2(r, bt + (wn + l % 8) * C::kRow + kb * 32 + (l / 8) * 16);
        bf[0][0] = r[0];
        bf[0][1] = r[1];
      } else {
#pragma unroll
        for (int j = 0; j < TN; j += 2) {
          uint32_t r[4];
          ldmatrix_x4(r, bt + (wn + 8 * j + lane % 8 + (lane / 16) * 8) * C::kRow + kb * 32 +
                             ((lane / 8) % 2) * 16);
          bf[j][0] = r[0];
          bf[j][1] = r[1];
          bf[j + 1][0] = r[2];
          bf[j + 1][1] = r[3];
        }
      }
#pragma unroll
      for (int i = 0; i < TM; ++i) {
        uint32_t af[4];
        ldmatrix_x4(af, at + (wm + 16 * i + lane % 8 + ((lane / 8) % 2) * 8) * C::kRow + kb * 32 +
                            (lane / 16) * 16);
        // activation scale x weight scale: both powers of two, so d * (sa * sw) rounds like the
        // CPU's (d * sa) * sw whenever no product leaves the normal range.
        const float lo = __fmul_rn(as[(wm + 16 * i + g_row) * KB + kb], ws);
        const float hi = __fmul_rn(as[(wm + 16 * i + g_row + 8) * KB + kb], ws);
#pragma unroll
        for (int j = 0; j < TN; ++j) {
          float d[4];
          mma_e4m3(d, af, bf[j][0], bf[j][1]);
          acc[i][j][0] = __fmaf_rn(d[0], lo, acc[i][j][0]);
          acc[i][j][1] = __fmaf_rn(d[1], lo, acc[i][j][1]);
          acc[i][j][2] = __fmaf_rn(d[2], hi, acc[i][j][2]);
          acc[i][j][3] = __fmaf_rn(d[3], hi, acc[i][j][3]);
        }
      }
    }
  }
  cp_async_wait<0>();
  // Accumulator fragment: c0,c1 at (row, 2t..2t+1), c2,c3 at (row + 8, same columns).
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int m = m0 + wm + 16 * i + g_row + (e / 2) * 8;
        const int n = n0 + wn + 8 * j + (lane % 4) * 2 + e % 2;
        if (m < rows && n < N) y[static_cast<int64_t>(m) * N + n] = round_bf16(acc[i][j][e]);
      }
}

template <int WM, int WN, int TM, int TN, int KB, int ST>
cudaError_t launch(const uint8_t* qa,
                   const float* sc,
                   int64_t rows,
                   const DeviceWeight& w,
                   float* y,
                   cudaStream_t s) {
  using C = TileConfig<WM, WN, TM, TN, KB, ST>;
  auto* k = block_scaled_mma<WM, WN, TM, TN, KB, ST>;
  cudaError_t e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmem);
  if (e != cudaSuccess) return e;
  const int64_t row_tiles = (rows + C::kBM - 1) / C::kBM;
  if (row_tiles > 65535) return cudaErrorInvalidValue;  // gridDim.y's limit
  const dim3 grid(static_cast<unsigned>((w.out_features + C::kBN - 1) / C::kBN),
                  static_cast<unsigned>(row_tiles));
  pdl::launch_dependent(k, dim3(grid), dim3(C::kThreads), C::kSmem, s, qa, sc,
                        static_cast<int>(rows), w, y);
  return cudaGetLastError();
}

// act_quant (quantize_fp8 in elementwise.cu, the same operations, so the same values and scales)
// writing e4m3 bytes: one warp per 32-block. The byte conversion is exact: the value is already
// an e4m3 value.
__global__ void quantize_e4m3_kernel(const float* x,
                                     int64_t num_blocks,
                                     uint8_t* qa,
                                     float* scales) {
  pdl::enter_dependent_grid();
  const int64_t b = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (b >= num_blocks) return;  // whole warps leave together (blockDim is a multiple of 32)
  float q, sc;
  act_quant_lane(x[b * 32 + lane], q, sc);
  if (lane == 0) scales[b] = sc;
  qa[b * 32 + lane] = e4m3_byte(q);
}

}  // namespace

cudaError_t quantize_fp8_e4m3(
    const float* x, int64_t rows, int64_t cols, uint8_t* qa, float* scales, cudaStream_t s) {
  const int64_t n = rows * (cols / 32);
  if (n == 0) return cudaSuccess;
  pdl::launch_dependent(quantize_e4m3_kernel, dim3(static_cast<unsigned>((n + 7) / 8)), dim3(256),
                        0, s, x, n, qa, scales);
  return cudaGetLastError();
}

cudaError_t block_scaled_gemm_tc_variant(int variant,
                                         const uint8_t* qa,
                                         const float* scales,
                                         int64_t rows,
                                         const DeviceWeight& w,
                                         float* y,
                                         cudaStream_t s) {
  if (rows == 0 || w.out_features == 0) return cudaSuccess;
  if (w.format != WeightFormat::kFP8 || w.in_features % 32 != 0) return cudaErrorInvalidValue;
  if (rows > (int64_t{1} << 30) || w.out_features > (int64_t{1} << 30) ||
      w.in_features > (int64_t{1} << 30) / 32) {
    return cudaErrorInvalidValue;  // the kernel indexes rows and columns with int
  }
  int device = 0, major = 0, minor = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e == cudaSuccess)
    e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  if (e == cudaSuccess)
    e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  if (e != cudaSuccess) return e;
  if (major * 10 + minor < 89) return cudaErrorNotSupported;  // e4m3 mma needs sm_89+
  // <warps along M, along N, m16 tiles per warp, n8 tiles per warp, 32-blocks per stage, stages>
  switch (variant) {
    case 0:
      return launch<1, 4, 1, 1, 8, 4>(qa, scales, rows, w, y, s);  // 16 x 32
    case 1:
      return launch<1, 4, 4, 1, 8, 4>(qa, scales, rows, w, y, s);  // 64 x 32
    case 2:
      return launch<2, 4, 4, 4, 2, 4>(qa, scales, rows, w, y, s);  // 128 x 128
    case 3:
      return launch<1, 2, 1, 1, 8, 6>(qa, scales, rows, w, y, s);  // 16 x 16, deeper
    case 4:
      return launch<1, 8, 1, 1, 16, 3>(qa, scales, rows, w, y, s);  // 16 x 64, 512 B rows
    case 5:
      return launch<2, 2, 4, 4, 2, 4>(qa, scales, rows, w, y, s);  // 128 x 64
    case 6:
      return launch<2, 4, 4, 4, 4, 3>(qa, scales, rows, w, y, s);  // 128 x 128, KB 4
    case 7:
      return launch<1, 4, 2, 2, 4, 4>(qa, scales, rows, w, y, s);  // 32 x 64
    default:
      return cudaErrorInvalidValue;
  }
}

cudaError_t block_scaled_gemm_tc(const uint8_t* qa,
                                 const float* scales,
                                 int64_t rows,
                                 const DeviceWeight& w,
                                 float* y,
                                 cudaStream_t s) {
  // Tile by batch size; every variant runs the same per-output instruction sequence (batch
  // invariant, tested). The choice is the fastest variant at N = K = 5120 on the H200
  // (docs/benchmarks.md): 16 x 64 up to 16 rows, 32 x 64 up to 1024, then 128 x 128 with
  // 4 blocks per stage.
  const int variant = rows <= 16 ? 4 : rows <= 1024 ? 7 : 6;
  return block_scaled_gemm_tc_variant(variant, qa, scales, rows, w, y, s);
}

}  // namespace di::backend::cuda
