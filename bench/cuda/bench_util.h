// Shared pieces of the CUDA kernel benchmarks: device buffers freed at scope exit and random
// inputs in the storage formats (weights without e4m3 NaN codes, ue8m0 scales near 2^-6).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "util/status.h"

namespace di::bench {

struct DeviceBuffers {
  std::vector<void*> ptrs;
  DeviceBuffers() = default;
  DeviceBuffers(const DeviceBuffers&) = delete;
  DeviceBuffers& operator=(const DeviceBuffers&) = delete;
  ~DeviceBuffers() {
    for (void* p : ptrs) (void)cudaFree(p);
  }
  template <class T>
  Expected<T*> alloc(size_t count) {
    void* p = nullptr;
    DI_CUDA_RETURN_IF_ERROR(cudaMalloc(&p, sizeof(T) * std::max<size_t>(count, 1)));
    ptrs.push_back(p);
    return static_cast<T*>(p);
  }
  template <class T>
  Expected<T*> upload(const std::vector<T>& h) {
    DI_ASSIGN_OR_RETURN(T * d, alloc<T>(h.size()));
    DI_CUDA_RETURN_IF_ERROR(cudaMemcpy(d, h.data(), sizeof(T) * h.size(), cudaMemcpyHostToDevice));
    return d;
  }
};

// Mean milliseconds of fn(i) over `iters` calls (i = 0, 1, ...) after 2 warm-up calls, timed
// with events on the default stream; fn returns a cudaError_t.
template <class F>
Expected<double> mean_event_ms(int iters, F&& fn) {
  for (int i = 0; i < 2; ++i) DI_CUDA_RETURN_IF_ERROR(fn(i));
  cudaEvent_t a = nullptr, b = nullptr;
  DI_CUDA_RETURN_IF_ERROR(cudaEventCreate(&a));
  DI_CUDA_RETURN_IF_ERROR(cudaEventCreate(&b));
  DI_CUDA_RETURN_IF_ERROR(cudaEventRecord(a));
  for (int i = 0; i < iters; ++i) DI_CUDA_RETURN_IF_ERROR(fn(i));
  DI_CUDA_RETURN_IF_ERROR(cudaEventRecord(b));
  DI_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(b));
  float ms = 0;
  DI_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, a, b));
  (void)cudaEventDestroy(a);
  (void)cudaEventDestroy(b);
  return static_cast<double>(ms) / iters;
}

inline std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// Weight bytes (no e4m3 NaN codes) or, with `scales`, ue8m0 scales near 2^-6.
inline std::vector<uint8_t> random_bytes(size_t n, uint32_t seed, bool scales) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) {
    const uint32_t r = rng();
    b = scales ? static_cast<uint8_t>(118 + r % 6)
               : static_cast<uint8_t>((r & 0x7f) == 0x7f ? 0x7e : r & 0xff);
  }
  return v;
}

}  // namespace di::bench
