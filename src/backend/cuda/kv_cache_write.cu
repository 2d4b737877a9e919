// Writers of the KV cache's stored formats (sparse_attention_fp8.h): the reference's fake
// quantization (kernels/ref/quant.cc) split into its codes and scales, so that decoding a written
// row reproduces fake_quant_row_fp8 / fake_quant_row_fp4 (e4m3 block-16 scales) bit for bit.
#include "backend/cuda/device_numeric.cuh"
#include "backend/cuda/grid_dependency.cuh"
#include "backend/cuda/kv_cache_decode.cuh"
#include "backend/cuda/kv_cache_encode.cuh"
#include "backend/cuda/sparse_attention_fp8.h"

namespace di::backend::cuda {

namespace {

constexpr int kRowsPerBlock = 8;  // one warp per row

__device__ __forceinline__ float bf16_bits_to_float(uint16_t h) {
  return __uint_as_float(static_cast<uint32_t>(h) << 16);
}

// Lane l quantizes dims [16 l, 16 l + 16); lanes 2b and 2b+1 share the 32-block b.
__global__ void write_kv_fp8_kernel(const uint16_t* __restrict__ rows,
                                    int64_t num_rows,
                                    const int32_t* __restrict__ slots,
                                    uint8_t* __restrict__ pool) {
  pdl::enter_dependent_grid();
  const int lane = threadIdx.x & 31;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  if (r >= num_rows) return;
  const int32_t slot = slots[r];
  if (slot < 0) return;
  const uint16_t* x = rows + r * kKvDim + lane * 16;
  float v[16];
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    v[i] = bf16_bits_to_float(x[i]);
    amax = fmaxf(amax, fabsf(v[i]));
  }
  amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
  amax = fmaxf(amax, 1e-4f);
  const float s = pow2_ceil_scale(__fmul_rn(amax, __fdiv_rn(1.0f, 448.0f)));
  uint32_t words[4] = {0, 0, 0, 0};
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    const float q = round_e4m3(fminf(fmaxf(__fdiv_rn(v[i], s), -448.0f), 448.0f));
    words[i / 4] |= e4m3_code(q) << (8 * (i % 4));
  }
  uint8_t* row = pool + static_cast<int64_t>(slot) * kKvFp8RowBytes;
  *reinterpret_cast<uint4*>(row + lane * 16) = make_uint4(words[0], words[1], words[2], words[3]);
  if ((lane & 1) == 0) row[512 + lane / 2] = static_cast<uint8_t>(__float_as_uint(s) >> 23);
}

// Lane l quantizes the 16-block [16 l, 16 l + 16) with its own e4m3 scale.
__global__ void write_kv_fp4_kernel(const uint16_t* __restrict__ rows,
                                    int64_t num_rows,
                                    const int32_t* __restrict__ slots,
                                    uint8_t* __restrict__ pool) {
  pdl::enter_dependent_grid();
  const int lane = threadIdx.x & 31;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  if (r >= num_rows) return;
  const int32_t slot = slots[r];
  if (slot < 0) return;
  const uint16_t* x = rows + r * kKvDim + lane * 16;
  float v[16];
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    v[i] = bf16_bits_to_float(x[i]);
    amax = fmaxf(amax, fabsf(v[i]));
  }
  amax = fmaxf(amax, __fmul_rn(6.0f, 0.001953125f));  // 6 * 2^-9
  const float s = round_e4m3(__fdiv_rn(amax, 6.0f));
  uint32_t words[2] = {0, 0};
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    const uint32_t c = e2m1_code(fminf(fmaxf(__fdiv_rn(v[i], s), -6.0f), 6.0f));
    words[i / 8] |= c << (4 * (i % 8));
  }
  uint8_t* row = pool + static_cast<int64_t>(slot) * kKvFp4RowBytes;
  *reinterpret_cast<uint2*>(row + lane * 8) = make_uint2(words[0], words[1]);
  row[256 + lane] = static_cast<uint8_t>(e4m3_code(s));
}

// Lane l decodes dims [16 l, 16 l + 16) with the attention kernel's decoder.
__global__ void decode_kv_rows_kernel(const uint8_t* __restrict__ pool,
                                      bool fp8,
                                      const int32_t* __restrict__ slots,
                                      int64_t num_rows,
                                      uint16_t* __restrict__ out) {
  pdl::enter_dependent_grid();
  const int lane = threadIdx.x & 31;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  if (r >= num_rows) return;
  uint32_t v[8];
  if (fp8) {
    const uint8_t* row = pool + static_cast<int64_t>(slots[r]) * kKvFp8RowBytes;
    decode_fp8x16(*reinterpret_cast<const uint4*>(row + lane * 16), row[512 + lane / 2], v);
  } else {
    const uint8_t* row = pool + static_cast<int64_t>(slots[r]) * kKvFp4RowBytes;
    decode_fp4x16(*reinterpret_cast<const uint2*>(row + lane * 8), row[256 + lane], v);
  }
  uint4* dst = reinterpret_cast<uint4*>(out + r * kKvDim + lane * 16);
  dst[0] = make_uint4(v[0], v[1], v[2], v[3]);
  dst[1] = make_uint4(v[4], v[5], v[6], v[7]);
}

}  // namespace

cudaError_t decode_kv_rows(const uint8_t* pool,
                           bool fp8,
                           const int32_t* slots,
                           int64_t num_rows,
                           uint16_t* out,
                           cudaStream_t stream) {
  if (num_rows <= 0) return num_rows == 0 ? cudaSuccess : cudaErrorInvalidValue;
  const auto blocks = static_cast<unsigned>((num_rows + kRowsPerBlock - 1) / kRowsPerBlock);
  pdl::launch_dependent(decode_kv_rows_kernel, dim3(blocks), dim3(32 * kRowsPerBlock), 0, stream,
                        pool, fp8, slots, num_rows, out);
  return cudaGetLastError();
}

cudaError_t write_kv_fp8(const uint16_t* rows,
                         int64_t num_rows,
                         const int32_t* slots,
                         uint8_t* pool,
                         cudaStream_t stream) {
  if (num_rows <= 0) return num_rows == 0 ? cudaSuccess : cudaErrorInvalidValue;
  const auto blocks = static_cast<unsigned>((num_rows + kRowsPerBlock - 1) / kRowsPerBlock);
  pdl::launch_dependent(write_kv_fp8_kernel, dim3(blocks), dim3(32 * kRowsPerBlock), 0, stream,
                        rows, num_rows, slots, pool);
  return cudaGetLastError();
}

cudaError_t write_kv_fp4(const uint16_t* rows,
                         int64_t num_rows,
                         const int32_t* slots,
                         uint8_t* pool,
                         cudaStream_t stream) {
  if (num_rows <= 0) return num_rows == 0 ? cudaSuccess : cudaErrorInvalidValue;
  const auto blocks = static_cast<unsigned>((num_rows + kRowsPerBlock - 1) / kRowsPerBlock);
  pdl::launch_dependent(write_kv_fp4_kernel, dim3(blocks), dim3(32 * kRowsPerBlock), 0, stream,
                        rows, num_rows, slots, pool);
  return cudaGetLastError();
}

}  // namespace di::backend::cuda
