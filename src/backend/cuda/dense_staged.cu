// Dense (BF16/F32 weight) products with few outputs and few rows, bitwise equal to dot_f32: one
// block per (output, row) multiplies the activation row by the weight row into a by-lane shared
// buffer and runs the eight lanes' add chains there (lane_chain.cuh). With a few hundred outputs
// neither eight threads per output (dense_gemm: each lane a chain of K/8 global loads) nor a
// thread per output (the GEMV) keeps enough bytes in flight; a block per output issues its whole
// row at once.
#include "backend/cuda/device_numeric.cuh"
#include "backend/cuda/grid_dependency.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/lane_chain.cuh"

namespace di::backend::cuda {

namespace {

constexpr int kStagedThreads = 256;

__device__ __forceinline__ float widen(float v) {
  return v;
}
__device__ __forceinline__ float widen(uint16_t v) {
  return __uint_as_float(static_cast<uint32_t>(v) << 16);
}

template <class W>
__global__ void dense_staged_kernel(
    const float* x, int64_t K, const W* w, int64_t N, float* y, bool round_out) {
  pdl::enter_dependent_grid();
  extern __shared__ float4 buf4[];
  float* buf = reinterpret_cast<float*>(buf4);
  __shared__ float lanes[8];
  const int64_t n = blockIdx.x, m = blockIdx.y;
  const float* xr = x + m * K;
  const W* wr = w + n * K;
  auto a = [&](int64_t k) { return xr[k]; };
  auto b = [&](int64_t k) { return widen(wr[k]); };
  products_by_lane(a, b, K, buf);
  __syncthreads();
  const float s = lane_dot(buf, K, a, b, lanes);
  if (threadIdx.x == 0) y[m * N + n] = round_out ? round_bf16(s) : s;
}

// Bytes of shared memory the old staged copies took (x and the weight row): dense_staged_applies
// keeps its limit so that CudaOps routes the same products here.
size_t staged_bytes(const DeviceWeight& w) {
  return static_cast<size_t>(w.in_features) *
         (sizeof(float) + (w.format == WeightFormat::kBF16 ? 2 : 4));
}

}  // namespace

bool dense_staged_applies(int64_t rows, const DeviceWeight& w) {
  const bool dense = w.format == WeightFormat::kBF16 || w.format == WeightFormat::kF32;
  return dense && rows >= 1 && rows <= 65535 && w.out_features >= 1 &&
         w.out_features < (int64_t{1} << 31) && w.in_features % 8 == 0 &&
         staged_bytes(w) <= 48 * 1024 && reinterpret_cast<uintptr_t>(w.data) % 16 == 0;
}

cudaError_t dense_staged(const float* x,
                         int64_t rows,
                         const DeviceWeight& w,
                         float* y,
                         bool round_bf16,
                         cudaStream_t s) {
  if (!dense_staged_applies(rows, w)) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(w.out_features), static_cast<unsigned>(rows));
  const size_t smem = static_cast<size_t>(lane_buffer_bytes(w.in_features));
  if (w.format == WeightFormat::kBF16) {
    pdl::launch_dependent(dense_staged_kernel<uint16_t>, dim3(grid), dim3(kStagedThreads), smem, s,
                          x, w.in_features, reinterpret_cast<const uint16_t*>(w.data),
                          w.out_features, y, round_bf16);
  } else {
    pdl::launch_dependent(dense_staged_kernel<float>, dim3(grid), dim3(kStagedThreads), smem, s, x,
                          w.in_features, reinterpret_cast<const float*>(w.data), w.out_features, y,
                          round_bf16);
  }
  return cudaGetLastError();
}

}  // namespace di::backend::cuda
