// 1-D bulk copies global -> shared (the copy engine, sm_90+) completing on an mbarrier: one
// thread moves a whole contiguous row segment, so the streaming kernels spend no per-16-byte
// address arithmetic on their weights (skinny_gemm.cuh). Plain sm_90 PTX (no 'a' features): the
// same code serves sm_90a and sm_100a; below sm_90 the wrappers trap (no launcher reaches them).
#pragma once

#include <cstdint>

namespace di::backend::cuda::bulk {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define DI_BULK_COPY_ENABLED 1
#else
#define DI_BULK_COPY_ENABLED 0
#endif

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// An mbarrier that one arrival (with the transaction bytes) and the copies complete.
__device__ __forceinline__ void bar_init(uint32_t bar) {
#if DI_BULK_COPY_ENABLED
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(bar) : "memory");
#else
  __trap();
#endif
}

// Makes initialised barriers visible to the copy engine (the async proxy).
__device__ __forceinline__ void bar_init_fence() {
#if DI_BULK_COPY_ENABLED
  asm volatile("fence.mbarrier_init.release.cluster;\nfence.proxy.async.shared::cta;\n" ::
                   : "memory");
#endif
}

__device__ __forceinline__ void bar_inval(uint32_t bar) {
#if DI_BULK_COPY_ENABLED
  asm volatile("mbarrier.inval.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
#endif
}

__device__ __forceinline__ void bar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
#if DI_BULK_COPY_ENABLED
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
#endif
}

__device__ __forceinline__ void bar_wait(uint32_t bar, uint32_t parity) {
#if DI_BULK_COPY_ENABLED
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

// `bytes` (a multiple of 16; both addresses 16-byte aligned) from src to dst, counted on bar.
__device__ __forceinline__ void copy(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar) {
#if DI_BULK_COPY_ENABLED
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::
          "r"(dst),
      "l"(src), "r"(bytes), "r"(bar)
      : "memory");
#else
  __trap();
#endif
}

// Programmatic dependent launch (sm_90+). launch_dependents lets the next kernel in the stream,
// when it was launched with programmatic stream serialization, start its CTAs as this grid's
// exit (they fill the SMs of this grid's tail); dependency_wait blocks until the previous kernel
// has finished and its writes are visible (a no-op when this grid was launched normally).
__device__ __forceinline__ void launch_dependents() {
#if DI_BULK_COPY_ENABLED
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void dependency_wait() {
#if DI_BULK_COPY_ENABLED
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

}  // namespace di::backend::cuda::bulk
