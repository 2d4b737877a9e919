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

}  // namespace di::backend::cuda
