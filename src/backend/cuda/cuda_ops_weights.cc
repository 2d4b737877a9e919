// CudaOps::Impl's derived device forms of weights, each built once and cached by the weight's
// bytes: FP8 weights in the bf16 wgmma kernel's lane-order layout, BF16 weights widened to fp32.
#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ops_impl.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/kv_cache_codec.h"

namespace di::backend {

Expected<const float*> CudaOps::Impl::widened_weight(const WeightView& w,
                                                     const cuda::DeviceWeight& dw) {
  if (w.format == WeightFormat::kF32) return reinterpret_cast<const float*>(dw.data);
  if (w.format != WeightFormat::kBF16) {
    return Status(StatusCode::kInvalidArgument, "widened_weight: BF16 or F32 weights only");
  }
  auto it = widened_weights.find(dw.data);
  if (it != widened_weights.end()) return it->second;
  DI_RETURN_IF_ERROR(interrupt_capture());  // the conversion below is not captured
  DI_RETURN_IF_ERROR(join_side());
  const int64_t n = dw.out_features * dw.in_features;
  DI_ASSIGN_OR_RETURN(void* data,
                      arena->alloc_persistent(static_cast<size_t>(std::max<int64_t>(n, 1)) * 4));
  auto* out = static_cast<float*>(data);
  DI_CUDA_RETURN_IF_ERROR(
      cuda::bf16_bits_to_f32(reinterpret_cast<const uint16_t*>(dw.data), n, out, stream));
  widened_weights[dw.data] = out;
  return static_cast<const float*>(out);
}

Expected<cuda::DeviceWeight> CudaOps::Impl::wgmma_weight(const WeightView& w) {
  const size_t data_bytes = cuda_ops_detail::weight_data_bytes(w),
               scale_bytes = cuda_ops_detail::weight_scale_bytes(w);
  const uint64_t print = cuda_ops_detail::fingerprint(w.data, data_bytes) ^
                         cuda_ops_detail::fingerprint(w.scale, scale_bytes) ^
                         (static_cast<uint64_t>(w.out_features) << 20) ^
                         static_cast<uint64_t>(w.in_features);
  auto it = wgmma_weights.find(w.data);
  if (it != wgmma_weights.end() && it->second.print == print) return it->second.dev;
  DI_RETURN_IF_ERROR(interrupt_capture());  // the copies below are not captured
  DI_RETURN_IF_ERROR(join_side());          // and the chunks below go through the main scratch
  if (profiler) {
    DI_RETURN_IF_ERROR(profiler->begin("weight_upload", stream));
  }
  const int64_t N = w.out_features, K = w.in_features;
  DI_ASSIGN_OR_RETURN(void* data, arena->alloc_persistent(
                                      static_cast<size_t>(cuda::wgmma_bf16_layout_bytes(N, K))));
  auto* out = static_cast<uint8_t*>(data);
  // Chunks of whole 16-row groups, about 16 MiB each.
  const int64_t chunk = std::max<int64_t>(16, (int64_t{16} << 20) / K / 16 * 16);
  for (int64_t r0 = 0; r0 < N; r0 += chunk) {
    const int64_t n = std::min(chunk, N - r0);
    const size_t mark = arena->scratch_mark();
    DI_ASSIGN_OR_RETURN(uint8_t * src, scratch<uint8_t>(static_cast<size_t>(n * K)));
    DI_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(src, w.data + r0 * K, static_cast<size_t>(n * K),
                                            cudaMemcpyHostToDevice, stream));
    DI_CUDA_RETURN_IF_ERROR(cuda::wgmma_bf16_permute(src, n, K, out + r0 * K, stream));
    // The next chunk's copy reuses the scratch after this permute on the same stream.
    arena->scratch_reset(mark);
  }
  DI_ASSIGN_OR_RETURN(void* scale, arena->alloc_persistent(scale_bytes));
  DI_RETURN_IF_ERROR(upload_persistent(scale, w.scale, scale_bytes));
  const cuda::DeviceWeight d{w.format, N, K, out, static_cast<const uint8_t*>(scale)};
  wgmma_weights[w.data] = {print, d};
  if (profiler) {
    DI_RETURN_IF_ERROR(profiler->end(stream));
  }
  return d;
}

}  // namespace di::backend
