// Decode (few rows) variant of the tensor-core FP8 GEMM with act_quant fused in: each CTA
// quantizes the rows' activations into shared memory (the whole K, e4m3 bytes and scales) while
// its first weight stages stream in, then runs gemm_tc.cu's per-output sequence (one MMA per
// 32-block with a zero accumulator, one fma by activation scale x weight scale, K order). So its
// outputs are gemm_tc.cu's bits (batch invariance holds across both files) and one launch does
// the work of two: at batch 1 the separate act_quant launch cost as much as the weight stream.
#include "backend/cuda/grid_dependency.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/mma_e4m3.cuh"

namespace di::backend::cuda {

namespace {

constexpr int kMaxRows = 8;  // resident activations: rows x (K + 16) bytes of shared memory

template <int WARPS, int KB, int STAGES>
struct DecodeConfig {
  static constexpr int kThreads = 32 * WARPS, kBN = 8 * WARPS;
  static constexpr int kRow = 32 * KB + 16;  // padded shared row (conflict-free ldmatrix)
  static constexpr int kStageBytes = kBN * kRow;
  static size_t smem(int rows, int64_t K) {
    const size_t nblk = static_cast<size_t>(K / 32);
    return STAGES * size_t{kStageBytes} + rows * static_cast<size_t>(K + 16) +
           (rows * nblk + 3) / 4 * 16 + 32;
  }
};

template <int WARPS, int KB, int STAGES>
__global__ void __launch_bounds__(32 * WARPS)
    block_scaled_mma_decode(const float* x, int rows, DeviceWeight w, float* y) {
  pdl::enter_dependent_grid();
  using C = DecodeConfig<WARPS, KB, STAGES>;
  extern __shared__ __align__(128) uint8_t smem[];
  const int K = static_cast<int>(w.in_features), N = static_cast<int>(w.out_features);
  const int nblk = K / 32, wnblk = (K + 31) / 32, a_row = K + 16;
  const int num_stages = (nblk + KB - 1) / KB;
  const int n0 = blockIdx.x * C::kBN;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  uint8_t* a = smem + STAGES * C::kStageBytes;               // [rows][K + 16] e4m3 bytes
  float* a_sc = reinterpret_cast<float*>(a + rows * a_row);  // [rows][nblk]
  uint8_t* zero = reinterpret_cast<uint8_t*>(a_sc) + (rows * nblk + 3) / 4 * 16;

  auto load_stage = [&](int stage, int slot) {
    const int kb0 = stage * KB;
    constexpr int kChunks = 2 * KB;
    for (int i = tid; i < C::kBN * kChunks; i += C::kThreads) {
      const int r = i / kChunks, c = i % kChunks, n = n0 + r;
      const bool ok = n < N && kb0 + c / 2 < nblk;
      const uint8_t* src = ok ? w.data + static_cast<int64_t>(n) * K + kb0 * 32 + c * 16 : w.data;
      cp_async16(smem + slot * C::kStageBytes + r * C::kRow + c * 16, src, ok ? 16 : 0);
    }
  };
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < num_stages) load_stage(s, s);
    cp_async_commit();
  }
  // act_quant while the weights stream: one warp per 32-block, four blocks' loads in flight.
  if (tid < 32) zero[tid] = 0;
  const int total = rows * nblk;
  for (int i0 = warp; i0 < total; i0 += 4 * WARPS) {
    float v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int i = i0 + u * WARPS;
      v[u] = i < total ? x[static_cast<int64_t>(i / nblk) * K + (i % nblk) * 32 + lane] : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int i = i0 + u * WARPS;
      if (i >= total) break;  // warp-uniform
      float q, sc;
      act_quant_lane(v[u], q, sc);
      a[(i / nblk) * a_row + (i % nblk) * 32 + lane] = e4m3_byte(q);
      if (lane == 0) a_sc[i] = sc;
    }
  }

  // Rows past `rows` read a zero chunk (the tiled kernel's zero-filled rows) with scale 0.
  const int a_r = lane % 8 + ((lane / 8) % 2) * 8;
  const uint8_t* a_ptr = a_r < rows ? a + a_r * a_row + (lane / 16) * 16 : zero;
  const int a_step = a_r < rows ? 32 : 0;
  const int g_row = lane / 4;
  const int wn = warp * 8, wcol = n0 + wn;
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int st = 0; st < num_stages; ++st) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();  // also publishes the quantized activations (first iteration)
    if (st + STAGES - 1 < num_stages) load_stage(st + STAGES - 1, (st + STAGES - 1) % STAGES);
    cp_async_commit();
    const uint8_t* bt = smem + (st % STAGES) * C::kStageBytes;
#pragma unroll
    for (int kb = 0; kb < KB; ++kb) {
      const int g = st * KB + kb;
      if (g >= nblk) break;
      const float ws =
          wcol < N ? e8m0_to_float(w.scale[static_cast<int64_t>(wcol / 32) * wnblk + g]) : 0.0f;
      const int l = lane % 16;
      uint32_t bf[2], af[4];
      ldmatrix_x2(bf, bt + (wn + l % 8) * C::kRow + kb * 32 + (l / 8) * 16);
      ldmatrix_x4(af, a_ptr + g * a_step);
      const float lo = g_row < rows ? __fmul_rn(a_sc[g_row * nblk + g], ws) : 0.0f;
      const float hi = g_row + 8 < rows ? __fmul_rn(a_sc[(g_row + 8) * nblk + g], ws) : 0.0f;
      float d[4];
      mma_e4m3(d, af, bf[0], bf[1]);
      acc[0] = __fmaf_rn(d[0], lo, acc[0]);
      acc[1] = __fmaf_rn(d[1], lo, acc[1]);
      acc[2] = __fmaf_rn(d[2], hi, acc[2]);
      acc[3] = __fmaf_rn(d[3], hi, acc[3]);
    }
  }
  cp_async_wait<0>();
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const int m = g_row + (e / 2) * 8, n = wcol + (lane % 4) * 2 + e % 2;
    if (m < rows && n < N) y[static_cast<int64_t>(m) * N + n] = round_bf16(acc[e]);
  }
}

template <int WARPS, int KB, int STAGES>
cudaError_t launch_decode(
    const float* x, int64_t rows, const DeviceWeight& w, float* y, cudaStream_t s) {
  using C = DecodeConfig<WARPS, KB, STAGES>;
  auto* k = block_scaled_mma_decode<WARPS, KB, STAGES>;
  const size_t bytes = C::smem(static_cast<int>(rows), w.in_features);
  if (bytes > 200 * 1024) return cudaErrorInvalidValue;  // K too wide to keep resident
  cudaError_t e =
      cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
  if (e != cudaSuccess) return e;
  const unsigned grid = static_cast<unsigned>((w.out_features + C::kBN - 1) / C::kBN);
  pdl::launch_dependent(k, dim3(grid), dim3(C::kThreads), bytes, s, x, static_cast<int>(rows), w,
                        y);
  return cudaGetLastError();
}

}  // namespace

bool tensor_decode_fits(int64_t rows, int64_t in_features) {
  return rows >= 1 && rows <= kMaxRows &&
         DecodeConfig<4, 8, 4>::smem(static_cast<int>(rows), in_features) <= 200 * 1024;
}

cudaError_t block_scaled_gemm_tc_decode(
    int variant, const float* x, int64_t rows, const DeviceWeight& w, float* y, cudaStream_t s) {
  if (rows == 0 || w.out_features == 0) return cudaSuccess;
  if (w.format != WeightFormat::kFP8 || w.in_features % 32 != 0 || rows > kMaxRows ||
      w.out_features > (int64_t{1} << 30) || w.in_features > (int64_t{1} << 24)) {
    return cudaErrorInvalidValue;
  }
  int device = 0, major = 0, minor = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e == cudaSuccess)
    e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  if (e == cudaSuccess)
    e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  if (e != cudaSuccess) return e;
  if (major * 10 + minor < 89) return cudaErrorNotSupported;
  // <warps (n8 column groups) per CTA, 32-blocks per weight stage, stages>
  switch (variant) {
    case 0:
      return launch_decode<4, 8, 4>(x, rows, w, y, s);
    case 1:
      return launch_decode<8, 8, 4>(x, rows, w, y, s);
    case 2:
      return launch_decode<4, 16, 3>(x, rows, w, y, s);
    case 3:
      return launch_decode<2, 8, 6>(x, rows, w, y, s);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace di::backend::cuda
