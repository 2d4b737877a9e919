// The generic KV-row codecs (kv_cache_codec.h): one thread per scale block (32 dims in FP8, 16 in
// FP4), the reference's arithmetic (kernels/ref/kv_codec.cc) with explicitly rounded operations.
// Not tuned: a step writes a few rows per layer, and the exact attention path that decodes is
// taken only off the V4.1 shape.
#include "backend/cuda/device_numeric.cuh"
#include "backend/cuda/kv_cache_codec.h"
#include "backend/cuda/kv_cache_encode.cuh"

namespace di::backend::cuda {

namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float block_amax(const float* x, int n) {
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) amax = fmaxf(amax, fabsf(x[i]));
  return amax;
}

__global__ void write_fp8_kernel(const float* __restrict__ rows,
                                 int64_t num_rows,
                                 int dim,
                                 const int32_t* __restrict__ slots,
                                 uint8_t* __restrict__ pool,
                                 int64_t stride) {
  const int blocks = dim / 32;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= num_rows * blocks) return;
  const int64_t r = i / blocks;
  const int b = static_cast<int>(i % blocks);
  const int64_t slot = slots ? slots[r] : r;
  if (slot < 0) return;
  const float* x = rows + r * dim + 32 * b;
  const float amax = fmaxf(block_amax(x, 32), 1e-4f);
  const float s = pow2_ceil_scale(__fmul_rn(amax, __fdiv_rn(1.0f, 448.0f)));
  uint8_t* row = pool + slot * stride;
  for (int k = 0; k < 32; ++k) {
    const float q = round_e4m3(fminf(fmaxf(__fdiv_rn(x[k], s), -448.0f), 448.0f));
    row[32 * b + k] = static_cast<uint8_t>(e4m3_code(q));
  }
  row[dim + b] = static_cast<uint8_t>(__float_as_uint(s) >> 23);
}

__global__ void write_fp4_kernel(const float* __restrict__ rows,
                                 int64_t num_rows,
                                 int dim,
                                 const int32_t* __restrict__ slots,
                                 uint8_t* __restrict__ pool,
                                 int64_t stride) {
  const int blocks = dim / 16;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= num_rows * blocks) return;
  const int64_t r = i / blocks;
  const int b = static_cast<int>(i % blocks);
  const int64_t slot = slots ? slots[r] : r;
  if (slot < 0) return;
  const float* x = rows + r * dim + 16 * b;
  const float amax = fmaxf(block_amax(x, 16), __fmul_rn(6.0f, 0.001953125f));  // 6 * 2^-9
  const float s = round_e4m3(__fdiv_rn(amax, 6.0f));
  uint8_t* row = pool + slot * stride;
  for (int k = 0; k < 8; ++k) {
    const uint32_t lo = e2m1_code(fminf(fmaxf(__fdiv_rn(x[2 * k], s), -6.0f), 6.0f));
    const uint32_t hi = e2m1_code(fminf(fmaxf(__fdiv_rn(x[2 * k + 1], s), -6.0f), 6.0f));
    row[8 * b + k] = static_cast<uint8_t>(lo | (hi << 4));
  }
  row[dim / 2 + b] = static_cast<uint8_t>(e4m3_code(s));
}

// One thread per output value.
__global__ void decode_kernel(const uint8_t* __restrict__ pool,
                              int64_t pool_rows,
                              const uint8_t* __restrict__ fresh,
                              bool fp8,
                              int dim,
                              int64_t stride,
                              const int32_t* __restrict__ index,
                              int64_t num_rows,
                              float* __restrict__ out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= num_rows * dim) return;
  const int64_t r = i / dim;
  const int d = static_cast<int>(i % dim);
  const int32_t k = index[r];
  if (k < 0) {
    out[i] = 0.0f;
    return;
  }
  const uint8_t* row = k < pool_rows ? pool + static_cast<int64_t>(k) * stride
                                     : fresh + (static_cast<int64_t>(k) - pool_rows) * stride;
  const float v = fp8 ? __fmul_rn(e4m3_to_float(row[d]), e8m0_to_float(row[dim + d / 32]))
                      : __fmul_rn(e2m1_to_float((row[d / 2] >> (4 * (d % 2))) & 0xfu),
                                  e4m3_to_float(row[dim / 2 + d / 16]));
  out[i] = round_bf16(v);
}

__global__ void to_bf16_kernel(const float* __restrict__ x, int64_t n, uint16_t* __restrict__ out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i < n) out[i] = static_cast<uint16_t>(__float_as_uint(round_bf16(x[i])) >> 16);
}

__global__ void from_bf16_kernel(const uint16_t* __restrict__ x,
                                 int64_t n,
                                 float* __restrict__ out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i < n) out[i] = __uint_as_float(static_cast<uint32_t>(x[i]) << 16);
}

__global__ void slots_kernel(const int32_t* __restrict__ window_index,
                             int num_window,
                             const int32_t* __restrict__ compressed_index,
                             int num_compressed,
                             int64_t num_queries,
                             int32_t* __restrict__ slot) {
  const int64_t keys = static_cast<int64_t>(num_window) + num_compressed;
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= num_queries * keys) return;
  const int64_t t = i / keys, j = i % keys;
  if (j < num_window) {
    slot[i] = window_index[t * num_window + j] < 0 ? -1 : static_cast<int32_t>(t * num_window + j);
  } else {
    const int64_t c = j - num_window;
    slot[i] = compressed_index[t * num_compressed + c] < 0
                  ? -1
                  : static_cast<int32_t>(num_queries * num_window + t * num_compressed + c);
  }
}

unsigned grid(int64_t n) {
  return static_cast<unsigned>((n + kThreads - 1) / kThreads);
}

}  // namespace

cudaError_t write_kv_rows(const float* rows,
                          int64_t num_rows,
                          int dim,
                          KvFormat format,
                          const int32_t* slots,
                          uint8_t* pool,
                          cudaStream_t stream) {
  if (num_rows < 0 || dim <= 0 || dim % 32 != 0) return cudaErrorInvalidValue;
  if (num_rows == 0) return cudaSuccess;
  const int64_t stride = kv_row_stride(format, dim);
  if (format == KvFormat::kFp8) {
    write_fp8_kernel<<<grid(num_rows * (dim / 32)), kThreads, 0, stream>>>(rows, num_rows, dim,
                                                                           slots, pool, stride);
  } else {
    write_fp4_kernel<<<grid(num_rows * (dim / 16)), kThreads, 0, stream>>>(rows, num_rows, dim,
                                                                           slots, pool, stride);
  }
  return cudaGetLastError();
}

cudaError_t decode_kv_rows_f32(const uint8_t* pool,
                               int64_t pool_rows,
                               const uint8_t* fresh,
                               KvFormat format,
                               int dim,
                               const int32_t* index,
                               int64_t num_rows,
                               float* out,
                               cudaStream_t stream) {
  if (num_rows < 0 || dim <= 0 || dim % 32 != 0) return cudaErrorInvalidValue;
  if (num_rows == 0) return cudaSuccess;
  decode_kernel<<<grid(num_rows * dim), kThreads, 0, stream>>>(
      pool, pool_rows, fresh, format == KvFormat::kFp8, dim, kv_row_stride(format, dim), index,
      num_rows, out);
  return cudaGetLastError();
}

cudaError_t kv_table_slots(const int32_t* window_index,
                           int num_window,
                           const int32_t* compressed_index,
                           int num_compressed,
                           int64_t num_queries,
                           int32_t* slot,
                           cudaStream_t stream) {
  const int64_t keys = static_cast<int64_t>(num_window) + num_compressed;
  const int64_t n = num_queries * keys;
  if (n <= 0) return n == 0 ? cudaSuccess : cudaErrorInvalidValue;
  slots_kernel<<<grid(n), kThreads, 0, stream>>>(window_index, num_window, compressed_index,
                                                 num_compressed, num_queries, slot);
  return cudaGetLastError();
}

cudaError_t f32_to_bf16_bits(const float* x, int64_t n, uint16_t* out, cudaStream_t stream) {
  if (n <= 0) return n == 0 ? cudaSuccess : cudaErrorInvalidValue;
  to_bf16_kernel<<<grid(n), kThreads, 0, stream>>>(x, n, out);
  return cudaGetLastError();
}

cudaError_t bf16_bits_to_f32(const uint16_t* x, int64_t n, float* out, cudaStream_t stream) {
  if (n <= 0) return n == 0 ? cudaSuccess : cudaErrorInvalidValue;
  from_bf16_kernel<<<grid(n), kThreads, 0, stream>>>(x, n, out);
  return cudaGetLastError();
}

}  // namespace di::backend::cuda
