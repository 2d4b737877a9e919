// See tensor_map.h.
#include <cudaTypedefs.h>

#include "backend/cuda/tensor_map.h"

namespace di::backend::cuda {

namespace {

using EncodeTiled = PFN_cuTensorMapEncodeTiled_v12000;

// The driver's tensor-map encoder, through the runtime (no link against libcuda); resolved once.
EncodeTiled tensor_map_encoder() {
  static const EncodeTiled fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault,
                                         &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
      return EncodeTiled{nullptr};
    }
    return reinterpret_cast<EncodeTiled>(p);
  }();
  return fn;
}

}  // namespace

bool tensor_maps_available() {
  return tensor_map_encoder() != nullptr;
}

cudaError_t make_tensor_map_2d(CUtensorMap* map,
                               CUtensorMapDataType type,
                               const void* ptr,
                               uint64_t inner,
                               uint64_t outer,
                               uint64_t row_bytes,
                               uint32_t box_inner,
                               uint32_t box_outer,
                               CUtensorMapSwizzle swizzle) {
  const EncodeTiled enc = tensor_map_encoder();
  if (enc == nullptr) return cudaErrorNotSupported;
  const cuuint64_t dims[2] = {inner, outer};
  const cuuint64_t strides[1] = {row_bytes};
  const cuuint32_t box[2] = {box_inner, box_outer};
  const cuuint32_t elem[2] = {1, 1};
  const CUresult r = enc(map, type, 2, const_cast<void*>(ptr), dims, strides, box, elem,
                         CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                         CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

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
                                 CUtensorMap* ts) {
  constexpr uint32_t kStageK = 128;  // K bytes per pipeline stage: one 128-byte swizzle row
  const uint64_t nblk = K / 32;
  cudaError_t e = make_tensor_map_2d(ta, CU_TENSOR_MAP_DATA_TYPE_UINT8, qa, K, M, K, kStageK, bm,
                                     CU_TENSOR_MAP_SWIZZLE_128B);
  if (e == cudaSuccess) {
    e = make_tensor_map_2d(tb, CU_TENSOR_MAP_DATA_TYPE_UINT8, w, K, N, K, kStageK, bn,
                           CU_TENSOR_MAP_SWIZZLE_128B);
  }
  if (e == cudaSuccess) {
    e = make_tensor_map_2d(ts, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, sc, nblk, M, nblk * 4, 4, bm,
                           CU_TENSOR_MAP_SWIZZLE_NONE);
  }
  return e;
}

}  // namespace di::backend::cuda
