// measure_fp32_peaks: a grid of several blocks per SM, each thread eight independent chains (enough
// to cover the add latency), timed with events; the result is stored so no chain is dead code.
#include <cuda_runtime.h>

#include <vector>

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

// One thread, one chain of n dependent adds (n a multiple of 16).
__global__ void fadd_chain(const float* in, int64_t n, float* out) {
  float l = in[0];
  const float d = in[1];
  for (int64_t i = 0; i < n; i += 16) {
#pragma unroll
    for (int u = 0; u < 16; ++u) l = __fadd_rn(l, d);
  }
  out[0] = l;
}

}  // namespace

Expected<double> measure_dependent_fadd_ns() {
  DeviceBuffers buf;
  DI_ASSIGN_OR_RETURN(float* in, buf.upload(std::vector<float>{1.0f, 1e-7f}));
  DI_ASSIGN_OR_RETURN(float* out, buf.alloc<float>(1));
  constexpr int64_t kShort = int64_t{1} << 14, kLong = int64_t{1} << 20;
  auto time = [&](int64_t n) {
    return mean_event_ms(5, [&](int) {
      fadd_chain<<<1, 1>>>(in, n, out);
      return cudaGetLastError();
    });
  };
  DI_ASSIGN_OR_RETURN(double short_ms, time(kShort));
  DI_ASSIGN_OR_RETURN(double long_ms, time(kLong));
  return (long_ms - short_ms) * 1e6 / static_cast<double>(kLong - kShort);
}

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
