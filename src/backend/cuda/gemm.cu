// Block-scaled FP8/FP4 GEMM and the dense (BF16/F32 weight) GEMM on CUDA cores, bitwise equal to
// kernels/ref/gemm.cc: every 32-wide K block is summed in the 8-lane order of dot_f32, scaled by
// both power-of-two scales and accumulated in K order; the output is rounded to bf16. Tensor
// cores are not used yet: their fp8 block sums are not IEEE fp32 sums (docs/notes/cuda-kernels.md).
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "backend/cuda/device_numeric.cuh"
#include "backend/cuda/grid_dependency.cuh"
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

// The raw bytes of block b of row n (32 bytes FP8, 16 FP4) with 16-byte loads; rows are 16-byte
// aligned (the arena aligns to 256 and K is a multiple of 32).
struct BlockBytes {
  uint4 v[2];
};

__device__ __forceinline__ BlockBytes load_block_bytes(const DeviceWeight& w, int64_t n, int b) {
  BlockBytes r;
  if (w.format == WeightFormat::kFP8) {
    const uint4* p = reinterpret_cast<const uint4*>(w.data + n * w.in_features + int64_t{b} * 32);
    r.v[0] = p[0];
    r.v[1] = p[1];
  } else {
    r.v[0] = *reinterpret_cast<const uint4*>(w.data + n * (w.in_features / 2) + int64_t{b} * 16);
  }
  return r;
}

// Decodes a block's codes exactly: e4m3 -> f16 by the hardware conversion (exact: f16 holds every
// e4m3 value) -> f32.
__device__ __forceinline__ void decode_block(WeightFormat f, const BlockBytes& r, float* out) {
  const uint32_t* words = reinterpret_cast<const uint32_t*>(r.v);
  if (f == WeightFormat::kFP8) {
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const uint16_t pair = static_cast<uint16_t>(words[i / 2] >> (16 * (i % 2)));
      const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(pair, __NV_E4M3);
      const float2 v = __half22float2(__half2(h));
      out[2 * i] = v.x;
      out[2 * i + 1] = v.y;
    }
  } else {
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const uint32_t byte = words[i / 4] >> (8 * (i % 4)) & 0xff;
      out[2 * i] = e2m1_to_float(byte & 0xf);
      out[2 * i + 1] = e2m1_to_float(byte >> 4);
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
  pdl::enter_dependent_grid();
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

// The 8-lane dot of one 32-wide block whose activation element j sits at a[j * stride].
__device__ __forceinline__ float block_dot_strided(const float* a, int stride, const float* w) {
  float l[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) l[j] = __fadd_rn(0.0f, __fmul_rn(a[j * stride], w[j]));
#pragma unroll
  for (int k = 8; k < 32; k += 8) {
#pragma unroll
    for (int j = 0; j < 8; ++j) l[j] = __fadd_rn(l[j], __fmul_rn(a[(k + j) * stride], w[k + j]));
  }
  return __fadd_rn(__fadd_rn(__fadd_rn(l[0], l[1]), __fadd_rn(l[2], l[3])),
                   __fadd_rn(__fadd_rn(l[4], l[5]), __fadd_rn(l[6], l[7])));
}

// Few rows (decode): one warp per output column. Lanes take blocks lane, lane + 32, ... two at a
// time (both loads issued before any use), write their scaled block sums to a per-warp staging
// area, and lane m then adds row m's sums in K order. Weight bytes are read once per row chunk;
// the activations are staged in shared memory transposed ([row][element j][block], odd stride)
// so that the lanes of a warp, which read the same j of consecutive blocks, hit distinct banks.
constexpr int kDecodeWarps = 8;
constexpr int kPrefetch = 2;
constexpr size_t kDecodeSmemBudget = 220 * 1024;

__host__ __device__ inline int odd_stride(int64_t n) {
  return static_cast<int>(n | 1);
}

size_t decode_smem_bytes(int rows, int64_t nblk) {
  const size_t p = static_cast<size_t>(odd_stride(nblk));
  return sizeof(float) * (static_cast<size_t>(rows) * 33 * p +
                          static_cast<size_t>(kDecodeWarps) * 32 * kPrefetch * odd_stride(rows));
}

__global__ void __launch_bounds__(32 * kDecodeWarps, 2)
    block_scaled_decode(const float* q, const float* scales, int rows, DeviceWeight w, float* y) {
  pdl::enter_dependent_grid();
  extern __shared__ float smem[];
  const int64_t K = w.in_features, N = w.out_features;
  const int nblk = static_cast<int>(K / 32);
  const int P = odd_stride(nblk), RS = odd_stride(rows);
  float* qs = smem;                // [rows][32][P]
  float* ss = qs + rows * 32 * P;  // [rows][P]
  float* stage = ss + rows * P;    // [kDecodeWarps][32 * kPrefetch][RS]
  for (int64_t i = threadIdx.x; i < rows * K; i += blockDim.x) {
    const int m = static_cast<int>(i / K), k = static_cast<int>(i % K);
    qs[(m * 32 + k % 32) * P + k / 32] = q[i];
  }
  for (int i = threadIdx.x; i < rows * nblk; i += blockDim.x) {
    ss[(i / nblk) * P + i % nblk] = scales[i];
  }
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* ws_stage = stage + warp * 32 * kPrefetch * RS;
  // Grid-stride over columns: as many blocks as fit on the GPU at once, no partial last wave.
  for (int64_t n = blockIdx.x * int64_t{kDecodeWarps} + warp; n < N;
       n += int64_t{gridDim.x} * kDecodeWarps) {
    float acc = 0.0f;  // lane m < rows: row m's K-order sum
    for (int b0 = 0; b0 < nblk; b0 += 32 * kPrefetch) {
      BlockBytes raw[kPrefetch];
      float wscale[kPrefetch];
#pragma unroll
      for (int u = 0; u < kPrefetch; ++u) {
        const int b = b0 + 32 * u + lane;
        if (b < nblk) {
          raw[u] = load_block_bytes(w, n, b);
          wscale[u] = weight_block_scale(w, n, b);
        }
      }
#pragma unroll
      for (int u = 0; u < kPrefetch; ++u) {
        const int b = b0 + 32 * u + lane;
        if (b >= nblk) continue;
        float wv[32];
        decode_block(w.format, raw[u], wv);
        for (int m = 0; m < rows; ++m) {
          const float partial = block_dot_strided(qs + m * 32 * P + b, P, wv);
          ws_stage[(32 * u + lane) * RS + m] =
              __fmul_rn(__fmul_rn(partial, ss[m * P + b]), wscale[u]);
        }
      }
      __syncwarp();
      if (lane < rows) {
        const int count = nblk - b0 < 32 * kPrefetch ? nblk - b0 : 32 * kPrefetch;
        for (int j = 0; j < count; ++j) acc = __fadd_rn(acc, ws_stage[j * RS + lane]);
      }
      __syncwarp();
    }
    if (lane < rows) y[lane * N + n] = round_bf16(acc);
  }
}

// Eight threads per output, one per dot_f32 chain: thread j sums a[k + j] * w[k + j] for
// k = 0, 8, 16, ... in K order; three xor-shuffle levels then form dot_f32's fixed tree
// ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)) (IEEE addition is commutative, so each lane of
// a pair computes the same sum), and lane 0 adds the tail. Bitwise the CPU's result, with 8x the
// parallelism of one thread per output and the eight chains' loads side by side.
template <bool kBf16>
__global__ void dense_gemm_kernel(const float* x,
                                  int64_t rows,
                                  int64_t x_stride,
                                  int64_t group_out,
                                  DeviceWeight w,
                                  float* y,
                                  bool round_out) {
  pdl::enter_dependent_grid();
  const int64_t gid = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  const int j = static_cast<int>(threadIdx.x & 7);
  const int64_t n = gid >> 3, m = blockIdx.y;
  const int64_t K = w.in_features, N = w.out_features, k8 = K / 8 * 8;
  const bool live = n < N && m < rows;  // every lane reaches the shuffles
  const float* a = x + m * x_stride + (n / group_out) * K;
  float l = 0;
  if (live) {
    // The lane's chain is sequential, so its loads must run ahead of it: batches of kAhead
    // independent loads, then the adds (one round trip per batch instead of per step).
    constexpr int kAhead = 16;
    auto weight = [&](int64_t k) {
      if constexpr (kBf16) {
        return __uint_as_float(
            static_cast<uint32_t>(reinterpret_cast<const uint16_t*>(w.data)[n * K + k]) << 16);
      } else {
        return reinterpret_cast<const float*>(w.data)[n * K + k];
      }
    };
    int64_t k = j;
    for (; k + 8 * (kAhead - 1) < k8; k += 8 * kAhead) {
      float wv[kAhead], av[kAhead];
#pragma unroll
      for (int i = 0; i < kAhead; ++i) {
        wv[i] = weight(k + 8 * i);
        av[i] = a[k + 8 * i];
      }
#pragma unroll
      for (int i = 0; i < kAhead; ++i) l = __fadd_rn(l, __fmul_rn(av[i], wv[i]));
    }
    for (; k < k8; k += 8) l = __fadd_rn(l, __fmul_rn(a[k], weight(k)));
  }
  l = __fadd_rn(l, __shfl_xor_sync(0xffffffffu, l, 1));
  l = __fadd_rn(l, __shfl_xor_sync(0xffffffffu, l, 2));
  l = __fadd_rn(l, __shfl_xor_sync(0xffffffffu, l, 4));
  if (!live || j != 0) return;
  float s = l;
  if constexpr (kBf16) {
    const uint16_t* wr = reinterpret_cast<const uint16_t*>(w.data) + n * K;
    for (int64_t k = k8; k < K; ++k) {
      s = __fadd_rn(s, __fmul_rn(a[k], __uint_as_float(static_cast<uint32_t>(wr[k]) << 16)));
    }
  } else {
    const float* wr = reinterpret_cast<const float*>(w.data) + n * K;
    for (int64_t k = k8; k < K; ++k) s = __fadd_rn(s, __fmul_rn(a[k], wr[k]));
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
  // Rows per decode launch: as many as the shared-memory budget holds (each launch reads the
  // weights once); many rows, or rows too wide for even one, take the tiled kernel.
  int chunk = 0;
  while (chunk < 32 && decode_smem_bytes(chunk + 1, nblk) <= kDecodeSmemBudget) ++chunk;
  if (chunk > 0 && rows <= 64) {
    cudaError_t e =
        cudaFuncSetAttribute(block_scaled_decode, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(kDecodeSmemBudget));
    if (e != cudaSuccess) return e;
    int device = 0, sms = 0;
    if ((e = cudaGetDevice(&device)) != cudaSuccess) return e;
    if ((e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device)) != cudaSuccess) {
      return e;
    }
    const int64_t groups = (w.out_features + kDecodeWarps - 1) / kDecodeWarps;
    for (int64_t m0 = 0; m0 < rows; m0 += chunk) {
      const int r = static_cast<int>(rows - m0 < chunk ? rows - m0 : chunk);
      int per_sm = 0;
      e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
          &per_sm, block_scaled_decode, 32 * kDecodeWarps, decode_smem_bytes(r, nblk));
      if (e != cudaSuccess) return e;
      const int64_t resident = int64_t{sms} * (per_sm > 0 ? per_sm : 1);
      const unsigned grid = static_cast<unsigned>(groups < resident ? groups : resident);
      pdl::launch_dependent(block_scaled_decode, dim3(grid), dim3(32 * kDecodeWarps),
                            decode_smem_bytes(r, nblk), s, q + m0 * w.in_features,
                            scales + m0 * nblk, r, w, y + m0 * w.out_features);
    }
    return cudaGetLastError();
  }
  const dim3 grid(static_cast<unsigned>((w.out_features + kTileN - 1) / kTileN),
                  static_cast<unsigned>((rows + kTileM - 1) / kTileM));
  pdl::launch_dependent(block_scaled_tiled, dim3(grid), dim3(256), 0, s, q, scales, rows, w, y);
  return cudaGetLastError();
}

cudaError_t dense_gemm_grouped(const float* x,
                               int64_t rows,
                               const DeviceWeight& w,
                               int groups,
                               float* y,
                               bool round_bf16,
                               cudaStream_t s) {
  if (rows == 0 || w.out_features == 0) return cudaSuccess;
  if (groups < 1 || w.out_features % groups != 0) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>((w.out_features * 8 + 255) / 256),
                  static_cast<unsigned>(rows));
  const int64_t x_stride = w.in_features * groups, group_out = w.out_features / groups;
  if (w.format == WeightFormat::kBF16) {
    pdl::launch_dependent(dense_gemm_kernel<true>, dim3(grid), dim3(256), 0, s, x, rows, x_stride,
                          group_out, w, y, round_bf16);
  } else {
    pdl::launch_dependent(dense_gemm_kernel<false>, dim3(grid), dim3(256), 0, s, x, rows, x_stride,
                          group_out, w, y, round_bf16);
  }
  return cudaGetLastError();
}

cudaError_t dense_gemm(const float* x,
                       int64_t rows,
                       const DeviceWeight& w,
                       float* y,
                       bool round_bf16,
                       cudaStream_t s) {
  return dense_gemm_grouped(x, rows, w, 1, y, round_bf16, s);
}

}  // namespace di::backend::cuda
