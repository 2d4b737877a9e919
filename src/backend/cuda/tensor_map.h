// TMA tensor maps for the wgmma GEMMs, encoded through the driver entry point that the runtime
// hands out (so nothing links against libcuda).
#pragma once

#include <cuda.h>  // CUtensorMap and its enums (header only)
#include <cuda_runtime.h>

#include <cstdint>

namespace di::backend::cuda {

// Whether the driver offers cuTensorMapEncodeTiled.
bool tensor_maps_available();

// A 2-D row-major tensor [outer, inner] with rows `row_bytes` apart, read in boxes
// [box_outer, box_inner]; out-of-range rows and columns read as zeros.
cudaError_t make_tensor_map_2d(CUtensorMap* map,
                               CUtensorMapDataType type,
                               const void* ptr,
                               uint64_t inner,
                               uint64_t outer,
                               uint64_t row_bytes,
                               uint32_t box_inner,
                               uint32_t box_outer,
                               CUtensorMapSwizzle swizzle);

}  // namespace di::backend::cuda
