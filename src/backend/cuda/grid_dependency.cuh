// Programmatic dependent launch (sm_90+): every kernel of the forward is launched with
// programmatic stream serialization (`launch_dependent`), so the next kernel in the stream is
// scheduled while this one runs; its CTAs become resident and block in `wait_for_previous_grid`
// until this grid has finished and its writes are visible. A decode step is ~130 kernels of a
// few microseconds each, and the launch + ramp-up of each one then overlaps the previous one's
// work instead of following it.
//
// The contract that keeps this correct: a kernel launched with `launch_dependent` calls
// `wait_for_previous_grid` in every CTA before it touches memory another kernel writes or reads
// (`enter_dependent_grid` does both steps first thing). Work before the wait may only read data
// no kernel writes during the forward (the weights). Because every CTA waits, a grid cannot
// finish before its predecessor has, so the order is transitive down the stream. In a kernel
// launched normally both instructions are no-ops.
#pragma once

#include <cuda_runtime.h>

#include <utility>

namespace di::backend::cuda::pdl {

// Blocks until the previous grid in the stream has completed and its memory is visible.
__device__ __forceinline__ void wait_for_previous_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

// Lets the next kernel in the stream (if launched with launch_dependent) start its CTAs once
// every CTA of this grid has called this or exited.
__device__ __forceinline__ void release_next_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// First statement of a kernel launched with launch_dependent: wait for the inputs, then let the
// next kernel be scheduled (after the wait, so at most two grids of a stream are resident).
__device__ __forceinline__ void enter_dependent_grid() {
  wait_for_previous_grid();
  release_next_grid();
}

// kernel<<<grid, block, smem, stream>>>(args...) with programmatic stream serialization.
template <class... P, class... A>
cudaError_t launch_dependent(
    void (*kernel)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, A&&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &attribute;
  config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, kernel, std::forward<A>(args)...);
}

}  // namespace di::backend::cuda::pdl
