// Block-scaled FP8/FP4 GEMM and the dense (BF16/F32 weight) GEMM on CUDA cores, bitwise equal to
// kernels/ref/gemm.cc: every 32-wide K block is summed in the 8-lane order of dot_f32, scaled by
// both power-of-two scales and accumulated in K order; the output is rounded to bf16. Tensor
// cores are not used yet: their fp8 block sums are not IEEE fp32 sums (docs/notes/cuda-kernels.md).
#include "backend/cuda/device_numeric.cuh"
#include "backend/cuda/kernels.h"

namespace di::backend::cuda {

namespace {

__device__ __forceinline__ float weight_code(const DeviceWeight& w, int64_t n, int64_t k) {
  if (w.format == WeightFormat::kFP8) return e4m3_to_float(w.data[n * w.in_features + k]);
  const uint8_t byte = w.data[n * (w.in_features / 2) + k / 2];
  return e2m1_to_float(static_cast<uint8_t>((k & 1) ? byte >> 4 : byte & 0xf));
}

__device__ __forceinline__ float weight_block_scale(const DeviceWeight& w, int64_t n, int64_t b) {
  if (w.format == WeightFormat::kFP8) {
    return e8m0_to_float(w.scale[(n / 32) * ((w.in_features + 31) / 32) + b]);
  }
  return e8m0_to_float(w.scale[n * (w.in_features / 32) + b]);
}

// The 32 weight codes of block b of row n with 16-byte loads (rows are 32-byte aligned: the
// arena aligns to 256 and K is a multiple of 32).
__device__ __forceinline__ void load_block_codes(const DeviceWeight& w,
                                                 int64_t n,
                                                 int b,
                                                 float* out) {
  if (w.format == WeightFormat::kFP8) {
    const uint4* p = reinterpret_cast<const uint4*>(w.data + n * w.in_features + int64_t{b} * 32);
    const uint4 v[2] = {p[0], p[1]};
    const uint8_t* bytes = reinterpret_cast<const uint8_t*>(v);
#pragma unroll
    for (int k = 0; k < 32; ++k) out[k] = e4m3_to_float(bytes[k]);
  } else {
    const uint4 v =
        *reinterpret_cast<const uint4*>(w.data + n * (w.in_features / 2) + int64_t{b} * 16);
    const uint8_t* bytes = reinterpret_cast<const uint8_t*>(&v);
#pragma unroll
    for (int k = 0; k < 16; ++k) {
      out[2 * k] = e2m1_to_float(bytes[k] & 0xf);
      out[2 * k + 1] = e2m1_to_float(bytes[k] >> 4);
    }
  }
}

// The 8-lane dot of one 32-wide block (dot_f32 with n = 32: no tail).
__device__ __forceinline__ float block_dot(const float* a, const float* w) {
  float l[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) l[j] = __fadd_rn(0.0f, __fmul_rn(a[j], w[j]));
#pragma unroll
  for (int k = 8; k < 32; k += 8) {
#pragma unroll
    for (int j = 0; j < 8; ++j) l[j] = __fadd_rn(l[j], __fmul_rn(a[k + j], w[k + j]));
  }
  return __fadd_rn(__fadd_rn(__fadd_rn(l[0], l[1]), __fadd_rn(l[2], l[3])),
                   __fadd_rn(__fadd_rn(l[4], l[5]), __fadd_rn(l[6], l[7])));
}

// Tiled kernel for many rows: a 32 x 64 output tile per block of 256 threads, K staged through
// shared memory two 32-blocks at a time; each thread owns 2 x 4 outputs.
constexpr int kTileM = 32, kTileN = 64, kChunk = 64;

__global__ void __launch_bounds__(256) block_scaled_tiled(
    const float* q, const float* scales, int64_t rows, DeviceWeight w, float* y) {
  __shared__ float a_s[kTileM][kChunk + 1];
  __shared__ float w_s[kTileN][kChunk + 1];
  __shared__ float a_sc[kTileM][2];
  __shared__ float w_sc[kTileN][2];
  const int64_t K = w.in_features, N = w.out_features, nblk = K / 32;
  const int64_t m0 = blockIdx.y * int64_t{kTileM}, n0 = blockIdx.x * int64_t{kTileN};
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  float acc[2][4] = {};
  for (int64_t k0 = 0; k0 < K; k0 += kChunk) {
    const int nb = static_cast<int>((K - k0) / 32 < 2 ? (K - k0) / 32 : 2);
    for (int i = threadIdx.x; i < kTileM * kChunk; i += 256) {
      const int r = i / kChunk, c = i % kChunk;
      const int64_t m = m0 + r;
      a_s[r][c] = (m < rows && c < nb * 32) ? q[m * K + k0 + c] : 0.0f;
    }
    for (int i = threadIdx.x; i < kTileN * kChunk; i += 256) {
      const int r = i / kChunk, c = i % kChunk;
      const int64_t n = n0 + r;
      w_s[r][c] = (n < N && c < nb * 32) ? weight_code(w, n, k0 + c) : 0.0f;
    }
    if (threadIdx.x < kTileM * 2) {
      const int r = threadIdx.x / 2, b = threadIdx.x % 2;
      const int64_t m = m0 + r;
      a_sc[r][b] = (m < rows && b < nb) ? scales[m * nblk + k0 / 32 + b] : 0.0f;
    } else if (threadIdx.x < kTileM * 2 + kTileN * 2) {
      const int t = threadIdx.x - kTileM * 2, r = t / 2, b = t % 2;
      const int64_t n = n0 + r;
      w_sc[r][b] = (n < N && b < nb) ? weight_block_scale(w, n, k0 / 32 + b) : 0.0f;
    }
    __syncthreads();
    for (int b = 0; b < nb; ++b) {
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int r = ty + 16 * i;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int c = tx + 16 * j;
          const float partial = block_dot(&a_s[r][b * 32], &w_s[c][b * 32]);
          acc[i][j] = __fadd_rn(acc[i][j], __fmul_rn(__fmul_rn(partial, a_sc[r][b]), w_sc[c][b]));
        }
      }
    }
    __syncthreads();
  }
  for (int i = 0; i < 2; ++i) {
    const int64_t m = m0 + ty + 16 * i;
    for (int j = 0; j < 4; ++j) {
      const int64_t n = n0 + tx + 16 * j;
      if (m < rows && n < N) y[m * N + n] = round_bf16(acc[i][j]);
    }
  }
}

// Few rows (decode): one warp per output column, each lane computes the scaled block sums of
// blocks lane, lane + 32, ... for up to kDecodeRows rows into shared memory; then one thread per
// (column, row) adds them in K order. Weight bytes are read once, coalesced across the warp.
constexpr int kDecodeRows = 8, kDecodeWarps = 8;

__global__ void __launch_bounds__(256)
    block_scaled_decode(const float* q, const float* scales, int rows, DeviceWeight w, float* y) {
  extern __shared__ float part[];  // [kDecodeWarps][rows][nblk]
  const int64_t K = w.in_features, N = w.out_features;
  const int nblk = static_cast<int>(K / 32);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t n = blockIdx.x * int64_t{kDecodeWarps} + warp;
  if (n < N) {
    for (int b = lane; b < nblk; b += 32) {
      float wv[32];
      load_block_codes(w, n, b, wv);
      const float ws = weight_block_scale(w, n, b);
      for (int m = 0; m < rows; ++m) {
        const float partial = block_dot(q + m * K + int64_t{b} * 32, wv);
        part[(warp * rows + m) * nblk + b] =
            __fmul_rn(__fmul_rn(partial, scales[m * nblk + b]), ws);
      }
    }
  }
  __syncthreads();
  if (threadIdx.x < kDecodeWarps * rows) {
    const int wi = threadIdx.x / rows, m = threadIdx.x % rows;
    const int64_t col = blockIdx.x * int64_t{kDecodeWarps} + wi;
    if (col < N) {
      float acc = 0;
      const float* p = part + (wi * rows + m) * nblk;
      for (int b = 0; b < nblk; ++b) acc = __fadd_rn(acc, p[b]);
      y[m * N + col] = round_bf16(acc);
    }
  }
}

__global__ void dense_gemm_kernel(
    const float* x, int64_t rows, DeviceWeight w, float* y, bool round_out) {
  const int64_t n = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  const int64_t m = blockIdx.y;
  const int64_t K = w.in_features, N = w.out_features;
  if (n >= N || m >= rows) return;
  const float* a = x + m * K;
  float l[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  float s;
  if (w.format == WeightFormat::kBF16) {
    const uint16_t* wr = reinterpret_cast<const uint16_t*>(w.data) + n * K;
    auto wv = [&](int64_t k) { return __uint_as_float(static_cast<uint32_t>(wr[k]) << 16); };
    int64_t k = 0;
    for (; k + 8 <= K; k += 8) {
      for (int j = 0; j < 8; ++j) l[j] = __fadd_rn(l[j], __fmul_rn(a[k + j], wv(k + j)));
    }
    s = __fadd_rn(__fadd_rn(__fadd_rn(l[0], l[1]), __fadd_rn(l[2], l[3])),
                  __fadd_rn(__fadd_rn(l[4], l[5]), __fadd_rn(l[6], l[7])));
    for (; k < K; ++k) s = __fadd_rn(s, __fmul_rn(a[k], wv(k)));
  } else {
    s = dot8(a, reinterpret_cast<const float*>(w.data) + n * K, K);
  }
  y[m * N + n] = round_out ? round_bf16(s) : s;
}

}  // namespace

cudaError_t block_scaled_gemm(const float* q,
                              const float* scales,
                              int64_t rows,
                              const DeviceWeight& w,
                              float* y,
                              cudaStream_t s) {
  if (rows == 0 || w.out_features == 0) return cudaSuccess;
  const int64_t nblk = w.in_features / 32;
  const size_t decode_smem = sizeof(float) * kDecodeWarps * kDecodeRows * static_cast<size_t>(nblk);
  if (rows <= 2 * kDecodeRows && decode_smem <= 48 * 1024) {
    for (int64_t m0 = 0; m0 < rows; m0 += kDecodeRows) {
      const int r = static_cast<int>(rows - m0 < kDecodeRows ? rows - m0 : kDecodeRows);
      const unsigned grid =
          static_cast<unsigned>((w.out_features + kDecodeWarps - 1) / kDecodeWarps);
      block_scaled_decode<<<grid, 32 * kDecodeWarps, sizeof(float) * kDecodeWarps * r * nblk, s>>>(
          q + m0 * w.in_features, scales + m0 * nblk, r, w, y + m0 * w.out_features);
    }
    return cudaGetLastError();
  }
  const dim3 grid(static_cast<unsigned>((w.out_features + kTileN - 1) / kTileN),
                  static_cast<unsigned>((rows + kTileM - 1) / kTileM));
  block_scaled_tiled<<<grid, 256, 0, s>>>(q, scales, rows, w, y);
  return cudaGetLastError();
}

cudaError_t dense_gemm(const float* x,
                       int64_t rows,
                       const DeviceWeight& w,
                       float* y,
                       bool round_bf16,
                       cudaStream_t s) {
  if (rows == 0 || w.out_features == 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>((w.out_features + 127) / 128), static_cast<unsigned>(rows));
  dense_gemm_kernel<<<grid, 128, 0, s>>>(x, rows, w, y, round_bf16);
  return cudaGetLastError();
}

}  // namespace di::backend::cuda
