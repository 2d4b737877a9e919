// Shared-memory mbarriers (sm_90+ PTX) for the kernels that feed shared memory with the copy
// engine: TMA tile loads (gemm_wgmma*.cu) and 1-D bulk copies (bulk_copy.cuh). Plain sm_90 PTX:
// the same code serves sm_90a and sm_100a; below sm_90 `init` traps and the rest do nothing (no
// launcher reaches them there).
#pragma once

#include <cstdint>

namespace di::backend::cuda::mbar {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define DI_MBARRIER_ENABLED 1
#else
#define DI_MBARRIER_ENABLED 0
#endif

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// A barrier that `count` arrivals (plus any transaction bytes expected) complete.
__device__ __forceinline__ void init(uint32_t bar, uint32_t count) {
#if DI_MBARRIER_ENABLED
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
#else
  __trap();
#endif
}

// Makes initialised barriers visible to the copy engine (the async proxy).
__device__ __forceinline__ void init_fence() {
#if DI_MBARRIER_ENABLED
  asm volatile("fence.mbarrier_init.release.cluster;\nfence.proxy.async.shared::cta;\n" ::
                   : "memory");
#endif
}

__device__ __forceinline__ void inval(uint32_t bar) {
#if DI_MBARRIER_ENABLED
  asm volatile("mbarrier.inval.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
#endif
}

__device__ __forceinline__ void arrive_expect_tx(uint32_t bar, uint32_t bytes) {
#if DI_MBARRIER_ENABLED
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
#endif
}

__device__ __forceinline__ void arrive(uint32_t bar) {
#if DI_MBARRIER_ENABLED
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
#endif
}

// Whether the phase with this parity has completed, without waiting (test_wait).
__device__ __forceinline__ bool ready(uint32_t bar, uint32_t parity) {
#if DI_MBARRIER_ENABLED
  uint32_t done = 0;
  asm volatile(
      "{\n.reg .pred p;\nmbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
  return done != 0;
#else
  return true;
#endif
}

__device__ __forceinline__ void wait(uint32_t bar, uint32_t parity) {
#if DI_MBARRIER_ENABLED
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
#endif
}

}  // namespace di::backend::cuda::mbar
