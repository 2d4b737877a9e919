// x in the k32-logical order of the dense BF16 tensor-path kernels (dense_bf16_wgmma.h): within
// every 32-wide K chunk, physical k pair c = 4a + 2s + b (k 8a + 4s + 2b and + 1) goes to
// logical pair 8s + a + 4b, the place where the mma.sync kernels' fragments multiply it (k16
// step s, lane q = a, register half b). A thread converts one chunk: two 16-byte loads per 8
// values in, four 16-byte stores out.
#include <cstdint>

#include "backend/cuda/dense_bf16_wgmma.h"
#include "backend/cuda/device_numeric.cuh"
#include "backend/cuda/grid_dependency.cuh"

namespace di::backend::cuda {

namespace {

constexpr int kThreads = 256;

// The logical element of physical element e (0..31) of a chunk.
__host__ __device__ constexpr int logical_element(int e) {
  const int c = e / 2, s = (c / 2) % 2, p = c / 4 + 4 * (c % 2);
  return 16 * s + 2 * p + e % 2;
}
static_assert(logical_element(0) == 0 && logical_element(2) == 8 && logical_element(4) == 16 &&
                  logical_element(8) == 2 && logical_element(31) == 31,
              "pair 1 (k 2, 3) opens step 0's second half, pair 2 (k 4, 5) step 1");

__device__ __forceinline__ uint32_t bits_of(float v) {
  return __float_as_uint(round_bf16(v)) >> 16;
}

template <class T>
__global__ void k32_logical_kernel(const T* __restrict__ x,
                                   int64_t chunks,
                                   uint16_t* __restrict__ out) {
  pdl::enter_dependent_grid();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= chunks) return;
  uint32_t v[32];
  if constexpr (sizeof(T) == 4) {
    const float4* src = reinterpret_cast<const float4*>(x) + 8 * i;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float4 f = src[j];
      v[4 * j] = bits_of(f.x);
      v[4 * j + 1] = bits_of(f.y);
      v[4 * j + 2] = bits_of(f.z);
      v[4 * j + 3] = bits_of(f.w);
    }
  } else {
    const uint4* src = reinterpret_cast<const uint4*>(x) + 4 * i;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint4 u = src[j];
      const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
      for (int h = 0; h < 4; ++h) {
        v[8 * j + 2 * h] = w[h] & 0xffffu;
        v[8 * j + 2 * h + 1] = w[h] >> 16;
      }
    }
  }
  uint32_t o[16];
#pragma unroll
  for (int e = 0; e < 32; e += 2) o[logical_element(e) / 2] = v[e] | v[e + 1] << 16;
  uint4* dst = reinterpret_cast<uint4*>(out) + 4 * i;
#pragma unroll
  for (int j = 0; j < 4; ++j)
    dst[j] = make_uint4(o[4 * j], o[4 * j + 1], o[4 * j + 2], o[4 * j + 3]);
}

template <class T>
cudaError_t launch(const T* x, int64_t rows, int64_t k, uint16_t* out, cudaStream_t s) {
  if (rows < 0 || k % 32 != 0 || reinterpret_cast<uintptr_t>(x) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(out) % 16 != 0) {
    return cudaErrorInvalidValue;
  }
  const int64_t chunks = rows * (k / 32);
  if (chunks == 0) return cudaSuccess;
  pdl::launch_dependent(k32_logical_kernel<T>,
                        dim3(static_cast<unsigned>((chunks + kThreads - 1) / kThreads)),
                        dim3(kThreads), 0, s, x, chunks, out);
  return cudaGetLastError();
}

}  // namespace

cudaError_t f32_to_bf16_k32_logical(
    const float* x, int64_t rows, int64_t k, uint16_t* out, cudaStream_t s) {
  return launch(x, rows, k, out, s);
}

cudaError_t bf16_to_k32_logical(
    const uint16_t* x, int64_t rows, int64_t k, uint16_t* out, cudaStream_t s) {
  return launch(x, rows, k, out, s);
}

}  // namespace di::backend::cuda
