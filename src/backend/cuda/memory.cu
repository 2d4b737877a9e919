// Row movement inside device memory for the device-resident forward: gathers by index (the
// model's MoE permutation, bounded replay, logits rows) and by pointer (the sparse-attention and
// indexer key lists, which point into the state pool and the step's own rows), and the MoE
// combine's scatter-add and final rounded sum.
#include <algorithm>

#include "backend/checksum.h"
#include "backend/cuda/device_numeric.cuh"
#include "backend/cuda/grid_dependency.cuh"
#include "backend/cuda/kernels.h"

namespace di::backend::cuda {

namespace {

constexpr int kThreads = 256;

__global__ void gather_rows_kernel(
    const float* src, int64_t cols, const int64_t* rows, int64_t n, float* dst) {
  pdl::enter_dependent_grid();
  const int64_t r = blockIdx.y;
  const float* s = src + rows[r] * cols;
  float* d = dst + r * cols;
  for (int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; c < cols;
       c += int64_t{gridDim.x} * blockDim.x) {
    d[c] = s[c];
  }
}

// Any thread order gives the same sum (checksum.h): one atomic per thread.
__global__ void checksum_kernel(const uint8_t* p, size_t bytes, unsigned long long* out) {
  pdl::enter_dependent_grid();
  const uint64_t words = (bytes + 7) / 8;
  uint64_t sum = 0;
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < words;
       i += uint64_t{gridDim.x} * blockDim.x) {
    sum += checksum_term(i, checksum_word(p, bytes, i));
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) sum += checksum_length_term(bytes);
  atomicAdd(out, static_cast<unsigned long long>(sum));
}

__global__ void gather_pointed_rows_kernel(const float* const* ptrs, int64_t width, float* dst) {
  pdl::enter_dependent_grid();
  const int64_t r = blockIdx.y;
  const float* s = ptrs[r];
  float* d = dst + r * width;
  for (int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; c < width;
       c += int64_t{gridDim.x} * blockDim.x) {
    d[c] = s[c];
  }
}

// Block (r, c) converts values c * blockDim .. of row r once and stores them in every copy. (One
// block per row looped over the row with each load waiting for the stores before it: 12 us for
// one token.)
__global__ void embed_rows_kernel(const uint8_t* __restrict__ table,
                                  bool bf16,
                                  int64_t dim,
                                  const int32_t* __restrict__ tokens,
                                  int copies,
                                  float* __restrict__ out,
                                  int64_t out_cols) {
  pdl::enter_dependent_grid();
  const int64_t t = tokens[blockIdx.x];
  float* dst = out + blockIdx.x * out_cols;
  const int64_t d = blockIdx.y * int64_t{blockDim.x} + threadIdx.x;
  if (d < dim) {
    const float v =
        bf16 ? __uint_as_float(
                   static_cast<uint32_t>(reinterpret_cast<const uint16_t*>(table)[t * dim + d])
                   << 16)
             : reinterpret_cast<const float*>(table)[t * dim + d];
    for (int k = 0; k < copies; ++k) dst[k * dim + d] = v;
  }
}

// One block per row (the Engram embeddings: 24 of 256 values per token at the V4.1 shape).
__global__ void gather_fp8_rows_kernel(
    const uint8_t* data, const uint8_t* scale, int64_t width, const int32_t* index, float* out) {
  pdl::enter_dependent_grid();
  const int64_t t = index[blockIdx.x];
  const uint8_t* v = data + t * width;
  const uint8_t* sc = scale + t * (width / 32);
  float* dst = out + blockIdx.x * width;
  for (int64_t d = threadIdx.x; d < width; d += blockDim.x)
    dst[d] = round_bf16(e4m3_to_float(v[d]) * e8m0_to_float(sc[d / 32]));
}

__global__ void copy_rows_kernel(const float* const* src, float* const* dst, int64_t width) {
  pdl::enter_dependent_grid();
  const float* s = src[blockIdx.y];
  float* d = dst[blockIdx.y];
  for (int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; c < width;
       c += int64_t{gridDim.x} * blockDim.x) {
    d[c] = s[c];
  }
}

// Strided rows as one kernel rather than a copy-engine transfer: a memcpy node between two
// kernels ends their programmatic overlap (the next kernel starts only after the copy, and the copy
// after the whole previous grid), and a decode step ran about ten of them. T: float, or float4
// where the width and both strides are multiples of 4 and the rows 16-byte aligned (strides and
// width then in float4s).
template <class T>
__global__ void copy_2d_kernel(
    const T* src, int64_t src_stride, T* dst, int64_t dst_stride, int64_t width, int64_t rows) {
  pdl::enter_dependent_grid();
  const int64_t n = width * rows;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / width, c = i - r * width;
    dst[r * dst_stride + c] = src[r * src_stride + c];
  }
}

__global__ void fill_kernel(float* dst, float value, int64_t n) {
  pdl::enter_dependent_grid();
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    dst[i] = value;
  }
}

// Host -> device from the pinned staging ring, mapped into the device's address space: each
// thread reads its 16 bytes over PCIe before the wait for the previous grid (the host wrote them
// before the launch, and no kernel writes them), so the read overlaps the previous kernel; only
// the store waits. A cudaMemcpyAsync here was a copy-engine transfer between two kernels, which
// ends their programmatic overlap; a decode step made dozens (positions, page and slot lists).
__global__ void upload_kernel(const uint4* __restrict__ host, uint8_t* dst, int64_t bytes) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  const int64_t at = 16 * i;
  uint4 v{};
  if (at < bytes) v = host[i];  // the ring's slots are 256-byte aligned and sized
  pdl::enter_dependent_grid();
  if (at >= bytes) return;
  if (at + 16 <= bytes && reinterpret_cast<uintptr_t>(dst) % 16 == 0) {
    *reinterpret_cast<uint4*>(dst + at) = v;
    return;
  }
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
  for (int b = 0; b < 16 && at + b < bytes; ++b)
    dst[at + b] = static_cast<uint8_t>(w[b / 4] >> (8 * (b % 4)));
}

// Blocks for n grid-stride items: enough to fill the device several times over at large n.
unsigned stride_blocks(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 4096 ? b : 4096);
}

__global__ void add_rows_kernel(const float* src, int64_t cols, const int64_t* rows, float* dst) {
  pdl::enter_dependent_grid();
  const int64_t r = blockIdx.y;
  const float* s = src + r * cols;
  float* d = dst + rows[r] * cols;
  for (int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; c < cols;
       c += int64_t{gridDim.x} * blockDim.x) {
    d[c] = __fadd_rn(d[c], s[c]);
  }
}

__global__ void add_round_bf16_kernel(const float* a, const float* b, int64_t n, float* out) {
  pdl::enter_dependent_grid();
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n) out[i] = round_bf16(__fadd_rn(a[i], b[i]));
}

__global__ void scale_round_bf16_kernel(float* x, int64_t n, float scale) {
  pdl::enter_dependent_grid();
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n) x[i] = round_bf16(__fmul_rn(x[i], scale));
}

dim3 grid_for(int64_t rows, int64_t cols) {
  const int64_t x = (cols + kThreads - 1) / kThreads;
  return dim3(static_cast<unsigned>(x < 8 ? x : 8), static_cast<unsigned>(rows));
}

}  // namespace

cudaError_t add_rows(
    const float* src, int64_t cols, const int64_t* rows, int64_t n, float* dst, cudaStream_t s) {
  if (n == 0 || cols == 0) return cudaSuccess;
  pdl::launch_dependent(add_rows_kernel, dim3(grid_for(n, cols)), dim3(kThreads), 0, s, src, cols,
                        rows, dst);
  return cudaGetLastError();
}

cudaError_t add_round_bf16(const float* a, const float* b, int64_t n, float* out, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  pdl::launch_dependent(add_round_bf16_kernel,
                        dim3(static_cast<unsigned>((n + kThreads - 1) / kThreads)), dim3(kThreads),
                        0, s, a, b, n, out);
  return cudaGetLastError();
}

cudaError_t scale_round_bf16(float* x, int64_t n, float scale, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  pdl::launch_dependent(scale_round_bf16_kernel,
                        dim3(static_cast<unsigned>((n + kThreads - 1) / kThreads)), dim3(kThreads),
                        0, s, x, n, scale);
  return cudaGetLastError();
}

cudaError_t gather_rows(
    const float* src, int64_t cols, const int64_t* rows, int64_t n, float* dst, cudaStream_t s) {
  if (n == 0 || cols == 0) return cudaSuccess;
  pdl::launch_dependent(gather_rows_kernel, dim3(grid_for(n, cols)), dim3(kThreads), 0, s, src,
                        cols, rows, n, dst);
  return cudaGetLastError();
}

cudaError_t gather_pointed_rows(
    const float* const* ptrs, int64_t n, int64_t width, float* dst, cudaStream_t s) {
  if (n == 0 || width == 0) return cudaSuccess;
  pdl::launch_dependent(gather_pointed_rows_kernel, dim3(grid_for(n, width)), dim3(kThreads), 0, s,
                        ptrs, width, dst);
  return cudaGetLastError();
}

cudaError_t embed_rows(const DeviceWeight& table,
                       const int32_t* tokens,
                       int64_t rows,
                       int copies,
                       float* out,
                       int64_t out_cols,
                       cudaStream_t s) {
  if (rows == 0) return cudaSuccess;
  if (rows > 0x7fffffff) return cudaErrorInvalidValue;  // grid.x
  const int64_t chunks = (table.in_features + kThreads - 1) / kThreads;
  if (chunks > 65535) return cudaErrorInvalidValue;  // grid.y
  pdl::launch_dependent(embed_rows_kernel,
                        dim3(static_cast<unsigned>(rows), static_cast<unsigned>(chunks)),
                        dim3(kThreads), 0, s, table.data, table.format == WeightFormat::kBF16,
                        table.in_features, tokens, copies, out, out_cols);
  return cudaGetLastError();
}

cudaError_t gather_fp8_rows(const uint8_t* data,
                            const uint8_t* scale,
                            int64_t width,
                            const int32_t* index,
                            int64_t rows,
                            float* out,
                            cudaStream_t s) {
  if (rows == 0 || width == 0) return cudaSuccess;
  if (rows > 0x7fffffff || width % 32 != 0) return cudaErrorInvalidValue;
  pdl::launch_dependent(gather_fp8_rows_kernel, dim3(static_cast<unsigned>(rows)), dim3(kThreads),
                        0, s, data, scale, width, index, out);
  return cudaGetLastError();
}

cudaError_t add_checksum(const void* p, size_t bytes, uint64_t* out, cudaStream_t s) {
  const uint64_t words = (bytes + 7) / 8;
  const unsigned blocks =
      static_cast<unsigned>(std::min<uint64_t>(1024, std::max<uint64_t>(1, (words + 255) / 256)));
  pdl::launch_dependent(checksum_kernel, dim3(blocks), dim3(kThreads), 0, s,
                        static_cast<const uint8_t*>(p), bytes,
                        reinterpret_cast<unsigned long long*>(out));
  return cudaGetLastError();
}

cudaError_t copy_rows(
    const float* const* src, float* const* dst, int64_t n, int64_t width, cudaStream_t s) {
  for (int64_t r0 = 0; r0 < n; r0 += 65535) {  // grid.y
    const int64_t rows = std::min<int64_t>(65535, n - r0);
    pdl::launch_dependent(copy_rows_kernel, dim3(grid_for(rows, width)), dim3(kThreads), 0, s,
                          src + r0, dst + r0, width);
  }
  return cudaGetLastError();
}

cudaError_t copy_2d(const float* src,
                    int64_t src_stride,
                    float* dst,
                    int64_t dst_stride,
                    int64_t width,
                    int64_t rows,
                    cudaStream_t s) {
  if (width <= 0 || rows <= 0) return cudaSuccess;
  auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (width % 4 == 0 && src_stride % 4 == 0 && dst_stride % 4 == 0 && aligned(src) &&
      aligned(dst)) {
    pdl::launch_dependent(copy_2d_kernel<float4>, dim3(stride_blocks(width / 4 * rows)),
                          dim3(kThreads), 0, s, reinterpret_cast<const float4*>(src),
                          src_stride / 4, reinterpret_cast<float4*>(dst), dst_stride / 4, width / 4,
                          rows);
  } else {
    pdl::launch_dependent(copy_2d_kernel<float>, dim3(stride_blocks(width * rows)), dim3(kThreads),
                          0, s, src, src_stride, dst, dst_stride, width, rows);
  }
  return cudaGetLastError();
}

cudaError_t upload_from_mapped(const void* host_mapped, void* dst, size_t bytes, cudaStream_t s) {
  if (bytes == 0) return cudaSuccess;
  if (reinterpret_cast<uintptr_t>(host_mapped) % 16 != 0) return cudaErrorInvalidValue;
  const int64_t chunks = static_cast<int64_t>((bytes + 15) / 16);
  pdl::launch_dependent(upload_kernel,
                        dim3(static_cast<unsigned>((chunks + kThreads - 1) / kThreads)),
                        dim3(kThreads), 0, s, static_cast<const uint4*>(host_mapped),
                        static_cast<uint8_t*>(dst), static_cast<int64_t>(bytes));
  return cudaGetLastError();
}

cudaError_t fill(float* dst, float value, int64_t n, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  pdl::launch_dependent(fill_kernel, dim3(stride_blocks(n)), dim3(kThreads), 0, s, dst, value, n);
  return cudaGetLastError();
}

}  // namespace di::backend::cuda
