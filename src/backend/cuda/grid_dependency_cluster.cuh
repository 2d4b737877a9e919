// pdl::launch_dependent (grid_dependency.cuh) for a grid of thread-block clusters: the kernels
// that split one output tile's K over several CTAs and meet in distributed shared memory
// (gemm_bf16_decode.cu's split kernel).
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "backend/cuda/grid_dependency.cuh"

namespace di::backend::cuda::pdl {

// kernel<<<grid, block, smem, stream>>>(args...) with programmatic stream serialization and
// clusters of `cluster_x` CTAs along x (gridDim.x a multiple of it, at most 8).
template <class... P, class... A>
cudaError_t launch_dependent_cluster(void (*kernel)(P...),
                                     dim3 grid,
                                     dim3 block,
                                     size_t smem,
                                     cudaStream_t stream,
                                     unsigned cluster_x,
                                     A&&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attributes[2]{};
  attributes[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attributes[0].val.programmaticStreamSerializationAllowed = 1;
  attributes[1].id = cudaLaunchAttributeClusterDimension;
  attributes[1].val.clusterDim.x = cluster_x;
  attributes[1].val.clusterDim.y = 1;
  attributes[1].val.clusterDim.z = 1;
  config.attrs = attributes;
  config.numAttrs = 2;
  return cudaLaunchKernelEx(&config, kernel, std::forward<A>(args)...);
}

}  // namespace di::backend::cuda::pdl
