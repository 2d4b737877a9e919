// The few-row (decode) block-scaled FP8/FP4 GEMM: weight streaming at the memory floor, bitwise
// equal to the CPU (skinny_gemm.cuh says how). Rows beyond what one pass stages take further
// passes inside the same CTA, which re-read the CTA's weight tile (then mostly from L2).
#include "backend/cuda/grid_dependency.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/skinny_gemm.cuh"

namespace di::backend::cuda {

namespace {

using skinny::kThreads;

// Persistent: CTA b takes column tiles b, b + gridDim.x, ...; each tile's rows in groups of
// rows_per_pass (later groups re-read the tile's weights, mostly from L2). kCtas CTAs per SM
// (skinny::Mode).
template <int CW, bool kFp4, int kCtas>
__global__ void __launch_bounds__(kThreads, kCtas) skinny_linear(const float* q,
                                                                 const float* scales,
                                                                 int rows,
                                                                 int rows_per_pass,
                                                                 const uint8_t* w,
                                                                 const uint8_t* w_scale,
                                                                 int64_t N,
                                                                 int64_t K,
                                                                 float* y) {
  pdl::enter_dependent_grid();
  using M = skinny::Mode<kCtas>;
  extern __shared__ __align__(16) unsigned char smem[];
  const skinny::Layout L = skinny::make_layout(CW, kFp4, M::kPairs, rows_per_pass, M::kBudget);
  const int tiles = static_cast<int>((N + CW - 1) / CW);
  const int groups = (rows + rows_per_pass - 1) / rows_per_pass;
  const int my_tiles = (tiles - static_cast<int>(blockIdx.x) + static_cast<int>(gridDim.x) - 1) /
                       static_cast<int>(gridDim.x);
  auto seg = [&](int s) {
    const int t = groups == 1 ? s : s / groups, gi = s - t * groups;  // one group: no division
    const int r0 = gi * rows_per_pass;
    return skinny::Segment{q,
                           scales,
                           nullptr,
                           r0,
                           rows - r0 < rows_per_pass ? rows - r0 : rows_per_pass,
                           w,
                           w_scale,
                           N,
                           (int64_t{blockIdx.x} + int64_t{t} * gridDim.x) * CW};
  };
  auto done = [&](int s, int c, int m, float acc) {
    const skinny::Segment g = seg(s);
    const int64_t n = g.n0 + c;
    if (n < N) y[(g.row0 + m) * N + n] = round_bf16(acc);
  };
  skinny::stream<CW, kFp4, M::kPairs>(smem, L, K, my_tiles * groups, seg, done);
}

template <int CW, bool kFp4, int kCtas>
cudaError_t launch(const float* q,
                   const float* scales,
                   int64_t rows,
                   const DeviceWeight& w,
                   float* y,
                   cudaStream_t s) {
  using M = skinny::Mode<kCtas>;
  const int max_rpp = skinny::max_rows_per_pass(CW, kFp4, M::kPairs, M::kBudget);
  const int rpp = static_cast<int>(rows < max_rpp ? rows : max_rpp);
  const skinny::Layout L = skinny::make_layout(CW, kFp4, M::kPairs, rpp, M::kBudget);
  auto* kernel = skinny_linear<CW, kFp4, kCtas>;
  cudaError_t e =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, L.total);
  int device = 0, sms = 0, per_sm = 0;
  if (e == cudaSuccess) e = cudaGetDevice(&device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (e == cudaSuccess) {
    e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, L.total);
  }
  if (e != cudaSuccess) return e;
  const int64_t tiles = (w.out_features + CW - 1) / CW;
  const int64_t resident = int64_t{sms} * (per_sm > 0 ? per_sm : 1);
  const unsigned grid = static_cast<unsigned>(tiles < resident ? tiles : resident);
  // Programmatic dependent launch: the kernel requests its first weight stages before waiting
  // for the previous kernel in the stream (skinny::stream), and lets the next one start early.
  return pdl::launch_dependent(kernel, dim3(grid), dim3(kThreads), static_cast<size_t>(L.total), s,
                               q, scales, static_cast<int>(rows), rpp, w.data, w.scale,
                               w.out_features, w.in_features, y);
}

template <bool kFp4>
cudaError_t launch_variant(int variant,
                           const float* q,
                           const float* scales,
                           int64_t rows,
                           const DeviceWeight& w,
                           float* y,
                           cudaStream_t s) {
  switch (variant) {
    case 0:
      return launch<8, kFp4, 1>(q, scales, rows, w, y, s);
    case 1:
      return launch<16, kFp4, 1>(q, scales, rows, w, y, s);
    case 2:
      return launch<32, kFp4, 1>(q, scales, rows, w, y, s);
    case 3:
      return launch<8, kFp4, 2>(q, scales, rows, w, y, s);
    case 4:
      return launch<16, kFp4, 2>(q, scales, rows, w, y, s);
    case 5:
      return launch<32, kFp4, 2>(q, scales, rows, w, y, s);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace

bool skinny_gemm_supports(int64_t rows, const DeviceWeight& w) {
  return (w.format == WeightFormat::kFP8 || w.format == WeightFormat::kFP4) && rows >= 1 &&
         rows <= kSkinnyMaxRows && w.out_features >= 1 && w.in_features >= 128 &&
         w.in_features % 128 == 0 && w.in_features <= (int64_t{1} << 30);
}

int skinny_gemm_pick(int64_t rows, const DeviceWeight& w) {
  // From the H200 sweep of every variant (docs/benchmarks.md, "skinny GEMM, bulk copies"): at
  // 1-2 rows two CTAs per SM win everywhere (8 columns, or 16 when K <= 2304); at 3-8 rows
  // narrow matrices keep 8-16 columns at one CTA per SM, wide FP8 ones (N >= 5120) take 32
  // columns at two CTAs per SM (several row passes, the weights re-read from L2), the rest 32
  // columns at one CTA per SM (FP4 at 3-4 rows: 16 columns, two CTAs).
  const int64_t n = w.out_features, k = w.in_features;
  if (rows <= 2) return n > 1024 && k <= 2304 ? 4 : 3;
  if (n <= 1024) return 0;
  if (rows <= 4) {
    if (n <= 1536) return 3;
    if (w.format == WeightFormat::kFP4) return 4;
    return n >= 5120 ? 5 : 2;
  }
  if (n <= 1536) return 1;
  return n >= 5120 ? 5 : 2;
}

cudaError_t skinny_gemm_variant(int variant,
                                const float* q,
                                const float* scales,
                                int64_t rows,
                                const DeviceWeight& w,
                                float* y,
                                cudaStream_t s) {
  if (rows == 0 || w.out_features == 0) return cudaSuccess;
  if (!skinny_gemm_supports(rows, w)) return cudaErrorInvalidValue;
  return w.format == WeightFormat::kFP4 ? launch_variant<true>(variant, q, scales, rows, w, y, s)
                                        : launch_variant<false>(variant, q, scales, rows, w, y, s);
}

cudaError_t skinny_gemm(const float* q,
                        const float* scales,
                        int64_t rows,
                        const DeviceWeight& w,
                        float* y,
                        cudaStream_t s) {
  return skinny_gemm_variant(skinny_gemm_pick(rows, w), q, scales, rows, w, y, s);
}

}  // namespace di::backend::cuda
