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

// The three maps of the FP8 wgmma GEMMs (gemm_wgmma.cu, gemm_fp8.cu): act_quant bytes qa [M, K]
// in boxes of 128 K x bm rows and the weights w [N, K] in 128 K x bn, both with the 128-byte
// swizzle, and the activation scales sc [M, K / 32] (fp32) in 4 x bm, unswizzled.
cudaError_t fp8_gemm_tensor_maps(const uint8_t* qa,
                                 const float* sc,
                                 uint64_t M,
                                 const uint8_t* w,
                                 uint64_t N,
                                 uint64_t K,
                                 uint32_t bm,
                                 uint32_t bn,
                                 CUtensorMap* ta,
                                 CUtensorMap* tb,
                                 CUtensorMap* ts);

}  // namespace di::backend::cuda
