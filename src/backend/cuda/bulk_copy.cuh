// 1-D bulk copies global -> shared (the copy engine, sm_90+) completing on an mbarrier
// (mbarrier.cuh): one
// thread moves a whole contiguous row segment, so the streaming kernels spend no per-16-byte
// address arithmetic on their weights (skinny_gemm.cuh). Plain sm_90 PTX (no 'a' features): the
// same code serves sm_90a and sm_100a; below sm_90 the wrappers trap (no launcher reaches them).
#pragma once

#include <cstdint>

#include "backend/cuda/mbarrier.cuh"

namespace di::backend::cuda::bulk {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define DI_BULK_COPY_ENABLED 1
#else
#define DI_BULK_COPY_ENABLED 0
#endif

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

}  // namespace di::backend::cuda::bulk
