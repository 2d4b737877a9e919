// x in the k32-logical order of the dense BF16 tensor-path kernels (dense_bf16_wgmma.h): within
// every 32-wide K chunk, physical k pair c = 4a + 2s + b (k 8a + 4s + 2b and + 1) goes to
// logical pair 8s + a + 4b, the place where the mma.sync kernels' fragments multiply it (k16
// step s, lane q = a, register half b).
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

// A block converts 2,048 consecutive values (64 chunks): each thread loads 8 (coalesced 16-byte
// loads), writes their bf16 bits to their logical places in shared memory, and after the barrier
// stores 8 consecutive output values (coalesced 16-byte stores). A thread per chunk (eight
// 16-byte loads 128 bytes apart across the warp) ran at ~2.4 TB/s.
constexpr int kBlockValues = kThreads * 8;

template <class T>
__global__ void k32_logical_kernel(const T* __restrict__ x, int64_t n, uint16_t* __restrict__ out) {
  pdl::enter_dependent_grid();
  __shared__ __align__(16) uint16_t tile[kBlockValues];
  const int64_t v0 = static_cast<int64_t>(blockIdx.x) * kBlockValues + 8 * threadIdx.x;
  if (v0 < n) {  // n % 32 == 0: a thread's 8 values are all in or all out
    uint32_t v[8];
    if constexpr (sizeof(T) == 4) {
      const float4 a = *reinterpret_cast<const float4*>(x + v0);
      const float4 b = *reinterpret_cast<const float4*>(x + v0 + 4);
      const float f[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
      for (int i = 0; i < 8; ++i) v[i] = bits_of(f[i]);
    } else {
      const uint4 u = *reinterpret_cast<const uint4*>(x + v0);
      const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        v[2 * i] = w[i] & 0xffffu;
        v[2 * i + 1] = w[i] >> 16;
      }
    }
    const int chunk = (8 * threadIdx.x) / 32 * 32, e0 = (8 * threadIdx.x) % 32;
#pragma unroll
    for (int i = 0; i < 8; ++i) tile[chunk + logical_element(e0 + i)] = static_cast<uint16_t>(v[i]);
  }
  __syncthreads();
  if (v0 < n) {
    *reinterpret_cast<uint4*>(out + v0) = *reinterpret_cast<const uint4*>(tile + 8 * threadIdx.x);
  }
}

template <class T>
cudaError_t launch(const T* x, int64_t rows, int64_t k, uint16_t* out, cudaStream_t s) {
  if (rows < 0 || k % 32 != 0 || reinterpret_cast<uintptr_t>(x) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(out) % 16 != 0) {
    return cudaErrorInvalidValue;
  }
  const int64_t n = rows * k;
  if (n == 0) return cudaSuccess;
  pdl::launch_dependent(k32_logical_kernel<T>,
                        dim3(static_cast<unsigned>((n + kBlockValues - 1) / kBlockValues)),
                        dim3(kThreads), 0, s, x, n, out);
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
