// The tensor path's FP8 products at 1-8 rows. The bf16 wgmma kernel (gemm_wgmma_bf16.cu) gives a
// CTA 64 output features and runs its whole K as one chain (wgmma -> wait -> promote, 4 blocks per
// stage), so at one token a 512 x 5120 product has 8 CTAs, each pulling 320 KB through one
// pipeline: 15.7 us against a 0.7 us byte floor (ncu, batch-1 step). The contract's chain cannot be
// split (acc = fma(block_sum, w_scale, acc) in K order), but the block sums do not depend on each
// other: here every warp of a CTA computes the block sums of its share of K at once (each a pair
// of chained bf16 m16n8k16 MMAs from zero, the wgmma kernel's pair of k16 steps on the same
// operands: HMMA and HGMMA give the same bits for bf16 k16 steps, docs/notes/cuda-kernels.md
// "attn3"), parks them in shared memory, and then one thread per output runs the promotion chain
// over them in K order. A CTA takes 16 features (one group of the lane-order layout), so a 512 x
// 5120 product has 32 CTAs of 8-16 warps, and a lane's weight bytes of a block are the 16
// contiguous bytes the wgmma kernel reads from shared memory, here straight from global memory.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "backend/cuda/device_numeric.cuh"
#include "backend/cuda/e4m3_bf16.cuh"
#include "backend/cuda/gemm_bf16_decode.h"
#include "backend/cuda/grid_dependency.cuh"
#include "backend/cuda/mma_bf16.cuh"

namespace di::backend::cuda {

namespace {

constexpr int kChunk = 8;  // blocks whose weight loads a lane issues before it multiplies

__device__ __forceinline__ uint4 load_stream(const uint8_t* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// Shared memory: block sums [nblk][8 (g)][QP (q)] float4 (d0..d3 of lane (g, q)), then the
// decoded weight scales [nblk]. QP = ceil(rows / 2): lanes with 2q >= rows hold no real token.
template <int QP>
__global__ void __launch_bounds__(512) bf16_decode_kernel(const uint8_t* __restrict__ w,
                                                          const uint8_t* __restrict__ wscale,
                                                          const uint16_t* __restrict__ xb,
                                                          int rows,
                                                          int N,
                                                          int K,
                                                          float* __restrict__ y) {
  pdl::enter_dependent_grid();
  extern __shared__ float4 sums[];
  const int nblk = K / 32;
  float* const scales = reinterpret_cast<float*>(sums + static_cast<int64_t>(nblk) * 8 * QP);
  const int tile = blockIdx.x, warps = blockDim.x / 32;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, q = lane % 4, g = lane / 4;
  // Rows 16 tile .. 16 tile + 15 lie in one 32-row scale group.
  const uint8_t* const srow = wscale + static_cast<int64_t>(tile / 2) * nblk;
  for (int b = threadIdx.x; b < nblk; b += blockDim.x) scales[b] = e8m0_to_float(srow[b]);

  // Lane L's 16 bytes of block b: row 4 (b % 4) + L / 8 of the tile, columns 128 (b / 4) +
  // 16 (L % 8) (wgmma_bf16_layout.cu). Its token is g (the B fragment's column); lanes past the
  // last row multiply zeros.
  const uint8_t* const wl = w + (static_cast<int64_t>(tile) * 16 + lane / 8) * K + 16 * (lane % 8);
  const bool has_token = g < rows;
  const uint16_t* const xl = xb + static_cast<int64_t>(has_token ? g : 0) * K + 2 * q;
  for (int b0 = warp * kChunk; b0 < nblk; b0 += warps * kChunk) {
    uint4 v[kChunk];
    uint32_t xv[kChunk][4];
#pragma unroll
    for (int c = 0; c < kChunk; ++c) {
      const int b = b0 + c;
      if (b < nblk) {
        v[c] = load_stream(wl + static_cast<int64_t>(4 * (b % 4)) * K + 128 * (b / 4));
        const uint32_t* xp = reinterpret_cast<const uint32_t*>(xl + 32 * b);
        // B fragments: k 2q, 2q + 1 and 2q + 8, 2q + 9 of each k16 half.
#pragma unroll
        for (int i = 0; i < 4; ++i) xv[c][i] = has_token ? __ldg(xp + 4 * i) : 0u;
      }
    }
#pragma unroll
    for (int c = 0; c < kChunk; ++c) {
      const int b = b0 + c;
      if (b >= nblk) continue;
      // gemm_wgmma_bf16.cu's `frag`: the A fragments of both k16 halves.
      uint32_t a0[4], a1[4];
      a0[0] = e4m3x2_to_bf16x2(static_cast<uint16_t>(v[c].x));
      a0[2] = e4m3x2_to_bf16x2(static_cast<uint16_t>(v[c].x >> 16));
      a1[0] = e4m3x2_to_bf16x2(static_cast<uint16_t>(v[c].y));
      a1[2] = e4m3x2_to_bf16x2(static_cast<uint16_t>(v[c].y >> 16));
      a0[1] = e4m3x2_to_bf16x2(static_cast<uint16_t>(v[c].z));
      a0[3] = e4m3x2_to_bf16x2(static_cast<uint16_t>(v[c].z >> 16));
      a1[1] = e4m3x2_to_bf16x2(static_cast<uint16_t>(v[c].w));
      a1[3] = e4m3x2_to_bf16x2(static_cast<uint16_t>(v[c].w >> 16));
      float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      mma_bf16(d, a0, xv[c][0], xv[c][1]);
      mma_bf16(d, a1, xv[c][2], xv[c][3]);
      if (q < QP) sums[(b * 8 + g) * QP + q] = make_float4(d[0], d[1], d[2], d[3]);
    }
  }
  __syncthreads();

  // The promotion chain in K order, one thread per output: (g, q, e) holds feature
  // 16 tile + g + 8 (e / 2) and token 2q + e % 2, as d[e] of lane (g, q).
  if (threadIdx.x < 32 * QP) {
    const int e = threadIdx.x % 4, qq = threadIdx.x / 4 % QP, gg = threadIdx.x / (4 * QP);
    const int f = 16 * tile + gg + 8 * (e / 2), t = 2 * qq + e % 2;
    const float* s = reinterpret_cast<const float*>(sums) + (gg * QP + qq) * 4 + e;
    float acc = 0.0f;
#pragma unroll 8
    for (int b = 0; b < nblk; ++b)
      acc = __fmaf_rn(s[static_cast<int64_t>(b) * 32 * QP], scales[b], acc);
    if (f < N && t < rows) y[static_cast<int64_t>(t) * N + f] = round_bf16(acc);
  }
}

template <int QP>
cudaError_t launch(
    const uint16_t* xb, int64_t rows, const DeviceWeight& w, float* y, cudaStream_t s, int warps) {
  const int64_t nblk = w.in_features / 32;
  const size_t smem = static_cast<size_t>(nblk) * (8 * QP * sizeof(float4) + sizeof(float));
  auto* k = bf16_decode_kernel<QP>;
  cudaError_t e =
      cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (e != cudaSuccess) return e;
  const int64_t tiles = (w.out_features + 15) / 16;
  pdl::launch_dependent(k, dim3(static_cast<unsigned>(tiles)), dim3(32 * warps), smem, s, w.data,
                        w.scale, xb, static_cast<int>(rows), static_cast<int>(w.out_features),
                        static_cast<int>(w.in_features), y);
  return cudaGetLastError();
}

// The rows and K the kernel takes: the block sums of the whole K sit in shared memory (227 KB).
bool decode_shape_fits(int64_t rows, int64_t in_features) {
  const int64_t qp = (rows + 1) / 2;
  return rows >= 1 && rows <= kBf16DecodeMaxRows && in_features <= (int64_t{1} << 20) &&
         in_features / 32 * (8 * qp * 16 + 4) <= 227 * 1024;
}

}  // namespace

bool bf16_decode_applies(int64_t rows, const DeviceWeight& w) {
  return decode_shape_fits(rows, w.in_features) && wgmma_bf16_applies(w);
}

cudaError_t block_scaled_gemm_bf16_decode(const uint16_t* xb,
                                          int64_t rows,
                                          const DeviceWeight& w,
                                          float* y,
                                          cudaStream_t s,
                                          int variant) {
  if (rows == 0 || w.out_features == 0) return cudaSuccess;
  if (!bf16_decode_applies(rows, w) || reinterpret_cast<uintptr_t>(xb) % 4 != 0) {
    return cudaErrorInvalidValue;
  }
  if (variant == 0) {
    // Few feature tiles: more warps per CTA keep more weight bytes in flight per SM.
    variant = (w.out_features + 15) / 16 < 264 ? 2 : 1;
  }
  if (variant < 1 || variant > kBf16DecodeVariants) return cudaErrorInvalidValue;
  const int warps = variant == 1 ? 8 : 16;
  switch ((rows + 1) / 2) {
    case 1:
      return launch<1>(xb, rows, w, y, s, warps);
    case 2:
      return launch<2>(xb, rows, w, y, s, warps);
    case 3:
      return launch<3>(xb, rows, w, y, s, warps);
    default:
      return launch<4>(xb, rows, w, y, s, warps);
  }
}

bool bf16_decode_preferred(int64_t rows, const DeviceWeight& w) {
  // Measured on the H200 (docs/benchmarks.md, "FP8 products at few rows"): the decode kernel wins
  // while the wgmma kernel's 64-feature CTAs cannot fill the device (N < 66 x 64); from there on
  // the wgmma tile is as fast or faster (5120 x 5120: 16.0 vs 16.9 us).
  // The caller has the weight from the wgmma path (wgmma_bf16_applies held): only the shape is
  // checked here, not the device again.
  return decode_shape_fits(rows, w.in_features) && w.out_features < 66 * 64;
}

}  // namespace di::backend::cuda
