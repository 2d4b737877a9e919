// measure_fp32_peaks: a grid of several blocks per SM, each thread eight independent chains (enough
// to cover the add latency), timed with events; the result is stored so no chain is dead code.
#include <cuda_runtime.h>

#include "cuda/bench_util.h"
#include "cuda/fp32_peak.h"

namespace di::bench {
namespace {

constexpr int kChains = 8, kThreads = 256, kIters = 4096;

template <bool kFused>
__global__ void __launch_bounds__(kThreads) fp32_chains(float* out) {
  float a[kChains];
#pragma unroll
  for (int j = 0; j < kChains; ++j) a[j] = 1.0f + 1e-3f * static_cast<float>(threadIdx.x + j);
  const float m = 0.999999f, c = 1e-6f;
  for (int i = 0; i < kIters; ++i) {
#pragma unroll
    for (int j = 0; j < kChains; ++j) {
      a[j] = kFused ? __fmaf_rn(a[j], m, c) : __fadd_rn(__fmul_rn(a[j], m), c);
    }
  }
  float s = 0.0f;
#pragma unroll
  for (int j = 0; j < kChains; ++j) s += a[j];
  out[blockIdx.x * kThreads + threadIdx.x] = s;
}

}  // namespace

Expected<Fp32Peaks> measure_fp32_peaks() {
  int device = 0, sms = 0;
  DI_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  DI_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int blocks = sms * 16;
  DeviceBuffers buf;
  DI_ASSIGN_OR_RETURN(float* out, buf.alloc<float>(static_cast<size_t>(blocks) * kThreads));
  const double flops = 2.0 * blocks * kThreads * kIters * kChains;
  DI_ASSIGN_OR_RETURN(double fma_ms, mean_event_ms(5, [&](int) {
                        fp32_chains<true><<<blocks, kThreads>>>(out);
                        return cudaGetLastError();
                      }));
  DI_ASSIGN_OR_RETURN(double mul_add_ms, mean_event_ms(5, [&](int) {
                        fp32_chains<false><<<blocks, kThreads>>>(out);
                        return cudaGetLastError();
                      }));
  return Fp32Peaks{flops / (fma_ms * 1e-3), flops / (mul_add_ms * 1e-3)};
}

}  // namespace di::bench
