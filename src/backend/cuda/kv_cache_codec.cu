// The generic KV-row codecs (kv_cache_codec.h): one thread per value (the writers: a warp per
// scale block), the reference's arithmetic (kernels/ref/kv_codec.cc) with explicitly rounded
// operations.
// Not tuned: a step writes a few rows per layer, and the exact attention path that decodes is
// taken only off the V4.1 shape.
#include "backend/cuda/device_numeric.cuh"
#include "backend/cuda/grid_dependency.cuh"
#include "backend/cuda/kv_cache_codec.h"
#include "backend/cuda/kv_cache_encode.cuh"

namespace di::backend::cuda {

namespace {

constexpr int kThreads = 256;

// The largest |v| over `width` consecutive lanes (a power of two dividing 32): a max, so the
// shuffle tree gives the sequential loop's value.
template <int width>
__device__ __forceinline__ float lanes_amax(float v) {
  v = fabsf(v);
#pragma unroll
  for (int o = width / 2; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// One warp per 32-dim scale block, one value per lane (each value's operations are the
// reference's; only the block's amax is a shuffle tree). Whole warps share a row (dim % 32 ==
// 0), so they leave together.
__global__ void write_fp8_kernel(const float* __restrict__ rows,
                                 int64_t num_rows,
                                 int dim,
                                 const int32_t* __restrict__ slots,
                                 uint8_t* __restrict__ pool,
                                 int64_t stride) {
  pdl::enter_dependent_grid();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= num_rows * dim) return;
  const int64_t r = i / dim;
  const int d = static_cast<int>(i % dim);
  const int64_t slot = slots ? slots[r] : r;
  if (slot < 0) return;
  const float v = rows[i];
  const float amax = fmaxf(lanes_amax<32>(v), 1e-4f);
  const float s = pow2_ceil_scale(__fmul_rn(amax, __fdiv_rn(1.0f, 448.0f)));
  uint8_t* row = pool + slot * stride;
  const float q = round_e4m3(fminf(fmaxf(__fdiv_rn(v, s), -448.0f), 448.0f));
  row[d] = static_cast<uint8_t>(e4m3_code(q));
  if (d % 32 == 0) row[dim + d / 32] = static_cast<uint8_t>(__float_as_uint(s) >> 23);
}

// Half a warp per 16-dim block, one value per lane; even lanes pack their odd neighbour's code.
__global__ void write_fp4_kernel(const float* __restrict__ rows,
                                 int64_t num_rows,
                                 int dim,
                                 const int32_t* __restrict__ slots,
                                 uint8_t* __restrict__ pool,
                                 int64_t stride) {
  pdl::enter_dependent_grid();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= num_rows * dim) return;
  const int64_t r = i / dim;
  const int d = static_cast<int>(i % dim);
  const int64_t slot = slots ? slots[r] : r;
  if (slot < 0) return;
  const float v = rows[i];
  const float amax = fmaxf(lanes_amax<16>(v), __fmul_rn(6.0f, 0.001953125f));  // 6 * 2^-9
  const float s = round_e4m3(__fdiv_rn(amax, 6.0f));
  uint8_t* row = pool + slot * stride;
  const uint32_t code = e2m1_code(fminf(fmaxf(__fdiv_rn(v, s), -6.0f), 6.0f));
  const uint32_t hi = __shfl_down_sync(0xffffffffu, code, 1);
  if (d % 2 == 0) row[d / 2] = static_cast<uint8_t>(code | (hi << 4));
  if (d % 16 == 0) row[dim / 2 + d / 16] = static_cast<uint8_t>(e4m3_code(s));
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
  pdl::enter_dependent_grid();
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

__device__ __forceinline__ uint32_t bf16_bits(float v) {
  return __float_as_uint(round_bf16(v)) >> 16;
}

// Eight values a thread when both pointers are 16-byte aligned (two 16-byte loads, one store:
// the scalar form moved 2-4 bytes per instruction and reached ~0.4 of the copy bandwidth on the
// batch-256 step's 8M-value conversions), one value a thread otherwise; `n` counts values.
template <bool kWide>
__global__ void to_bf16_kernel(const float* __restrict__ x, int64_t n, uint16_t* __restrict__ out) {
  pdl::enter_dependent_grid();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if constexpr (kWide) {
    if (8 * i + 8 <= n) {
      const float4 a = reinterpret_cast<const float4*>(x)[2 * i];
      const float4 b = reinterpret_cast<const float4*>(x)[2 * i + 1];
      reinterpret_cast<uint4*>(out)[i] =
          make_uint4(bf16_bits(a.x) | bf16_bits(a.y) << 16, bf16_bits(a.z) | bf16_bits(a.w) << 16,
                     bf16_bits(b.x) | bf16_bits(b.y) << 16, bf16_bits(b.z) | bf16_bits(b.w) << 16);
    } else {
      for (int64_t j = 8 * i; j < n; ++j) out[j] = static_cast<uint16_t>(bf16_bits(x[j]));
    }
  } else {
    if (i < n) out[i] = static_cast<uint16_t>(bf16_bits(x[i]));
  }
}

template <bool kWide>
__global__ void from_bf16_kernel(const uint16_t* __restrict__ x,
                                 int64_t n,
                                 float* __restrict__ out) {
  pdl::enter_dependent_grid();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  auto widen = [](uint32_t h) { return __uint_as_float(h << 16); };
  if constexpr (kWide) {
    if (8 * i + 8 <= n) {
      const uint4 v = reinterpret_cast<const uint4*>(x)[i];
      reinterpret_cast<float4*>(out)[2 * i] = make_float4(widen(v.x & 0xffffu), widen(v.x >> 16),
                                                          widen(v.y & 0xffffu), widen(v.y >> 16));
      reinterpret_cast<float4*>(out)[2 * i + 1] = make_float4(
          widen(v.z & 0xffffu), widen(v.z >> 16), widen(v.w & 0xffffu), widen(v.w >> 16));
    } else {
      for (int64_t j = 8 * i; j < n; ++j) out[j] = widen(x[j]);
    }
  } else {
    if (i < n) out[i] = widen(x[i]);
  }
}

__global__ void slots_kernel(const int32_t* __restrict__ window_index,
                             int num_window,
                             const int32_t* __restrict__ compressed_index,
                             int num_compressed,
                             int64_t num_queries,
                             int32_t* __restrict__ slot) {
  pdl::enter_dependent_grid();
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

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
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
    pdl::launch_dependent(write_fp8_kernel, dim3(grid(num_rows * dim)), dim3(kThreads), 0, stream,
                          rows, num_rows, dim, slots, pool, stride);
  } else {
    pdl::launch_dependent(write_fp4_kernel, dim3(grid(num_rows * dim)), dim3(kThreads), 0, stream,
                          rows, num_rows, dim, slots, pool, stride);
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
  pdl::launch_dependent(decode_kernel, dim3(grid(num_rows * dim)), dim3(kThreads), 0, stream, pool,
                        pool_rows, fresh, format == KvFormat::kFp8, dim, kv_row_stride(format, dim),
                        index, num_rows, out);
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
  pdl::launch_dependent(slots_kernel, dim3(grid(n)), dim3(kThreads), 0, stream, window_index,
                        num_window, compressed_index, num_compressed, num_queries, slot);
  return cudaGetLastError();
}

cudaError_t f32_to_bf16_bits(const float* x, int64_t n, uint16_t* out, cudaStream_t stream) {
  if (n <= 0) return n == 0 ? cudaSuccess : cudaErrorInvalidValue;
  if (aligned16(x) && aligned16(out)) {
    pdl::launch_dependent(to_bf16_kernel<true>, dim3(grid((n + 7) / 8)), dim3(kThreads), 0, stream,
                          x, n, out);
  } else {
    pdl::launch_dependent(to_bf16_kernel<false>, dim3(grid(n)), dim3(kThreads), 0, stream, x, n,
                          out);
  }
  return cudaGetLastError();
}

cudaError_t bf16_bits_to_f32(const uint16_t* x, int64_t n, float* out, cudaStream_t stream) {
  if (n <= 0) return n == 0 ? cudaSuccess : cudaErrorInvalidValue;
  if (aligned16(x) && aligned16(out)) {
    pdl::launch_dependent(from_bf16_kernel<true>, dim3(grid((n + 7) / 8)), dim3(kThreads), 0,
                          stream, x, n, out);
  } else {
    pdl::launch_dependent(from_bf16_kernel<false>, dim3(grid(n)), dim3(kThreads), 0, stream, x, n,
                          out);
  }
  return cudaGetLastError();
}

}  // namespace di::backend::cuda
