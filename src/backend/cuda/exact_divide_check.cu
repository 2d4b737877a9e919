// Test hook for attn::ExactDivider (sparse_attention_steps.cuh): the epilogue division of the
// sparse attention kernels against __fdiv_rn, element by element.
#include "backend/cuda/grid_dependency.cuh"
#include "backend/cuda/sparse_attention_fp8.h"
#include "backend/cuda/sparse_attention_steps.cuh"

namespace di::backend::cuda {
namespace {

__global__ void exact_divide_check_kernel(const float* __restrict__ x,
                                          const float* __restrict__ den,
                                          int64_t n,
                                          float* __restrict__ fast,
                                          float* __restrict__ ieee,
                                          uint8_t* __restrict__ in_range) {
  pdl::enter_dependent_grid();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  attn::ExactDivider d(den[i]);
  d.note(x[i]);
  const bool ok = d.in_range();
  fast[i] = ok ? d(x[i]) : __fdiv_rn(x[i], den[i]);
  ieee[i] = __fdiv_rn(x[i], den[i]);
  in_range[i] = ok ? 1 : 0;
}

}  // namespace

cudaError_t exact_divide_check(const float* x,
                               const float* den,
                               int64_t n,
                               float* fast,
                               float* ieee,
                               uint8_t* in_range,
                               cudaStream_t stream) {
  if (n <= 0) return n == 0 ? cudaSuccess : cudaErrorInvalidValue;
  pdl::launch_dependent(exact_divide_check_kernel, dim3(static_cast<unsigned>((n + 255) / 256)),
                        dim3(256), 0, stream, x, den, n, fast, ieee, in_range);
  return cudaGetLastError();
}

}  // namespace di::backend::cuda
