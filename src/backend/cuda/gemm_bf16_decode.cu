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
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "backend/cuda/device_numeric.cuh"
#include "backend/cuda/e4m3_bf16.cuh"
#include "backend/cuda/gemm_bf16_decode.h"
#include "backend/cuda/grid_dependency_cluster.cuh"
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

// The block sum of one 32-block for lane (g, q): its 16 weight bytes `v` and its B fragments
// `xv` (k 2q, 2q + 1 and 2q + 8, 2q + 9 of each k16 half) as the pair of chained bf16 m16n8k16
// MMAs from zero (the A fragments as gemm_wgmma_bf16.cu's `frag` takes them).
__device__ __forceinline__ void block_sum(const uint4& v, const uint32_t (&xv)[4], float (&d)[4]) {
  uint32_t a0[4], a1[4];
  lane_order_frags(v, a0, a1);
  d[0] = d[1] = d[2] = d[3] = 0.0f;
  mma_bf16(d, a0, xv[0], xv[1]);
  mma_bf16(d, a1, xv[2], xv[3]);
}

// The block sums of blocks [b0, b0 + kChunk) (clipped at `end`) of one warp: lane L's 16 weight
// bytes of block b are row 4 (b % 4) + L / 8 of the tile, columns 128 (b / 4) + 16 (L % 8)
// (wgmma_bf16_layout.cu); its token is g (the B fragment's column), and lanes past the last row
// multiply zeros. `wl` and `xl` are the lane's bases (block 0); the sum of block b goes to
// sums[(b - base) * 8 * QP + g * QP + q] (lanes q < QP). The weight loads are issued by
// `load_weights` (no dependence on earlier kernels), the rest by `finish` after the inputs are
// ready, so a caller can issue the weights before waiting for the previous grid.
template <int QP>
struct ChunkSums {
  uint4 v[kChunk];

  __device__ __forceinline__ void load_weights(const uint8_t* wl, int K, int b0, int end) {
#pragma unroll
    for (int c = 0; c < kChunk; ++c) {
      const int b = b0 + c;
      if (b < end) v[c] = load_stream(wl + static_cast<int64_t>(4 * (b % 4)) * K + 128 * (b / 4));
    }
  }

  __device__ __forceinline__ void finish(
      const uint16_t* xl, bool has_token, int b0, int end, int base, float4* sums) const {
    const int lane = threadIdx.x % 32, q = lane % 4, g = lane / 4;
#pragma unroll
    for (int c = 0; c < kChunk; ++c) {
      const int b = b0 + c;
      if (b >= end) continue;
      // B fragments: k 2q, 2q + 1 and 2q + 8, 2q + 9 of each k16 half (the CTA's warps read the
      // same activations: L1 hits after the first).
      const uint32_t* xp = reinterpret_cast<const uint32_t*>(xl + 32 * b);
      uint32_t xv[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) xv[i] = has_token ? __ldg(xp + 4 * i) : 0u;
      float d[4];
      block_sum(v[c], xv, d);
      if (q < QP) sums[((b - base) * 8 + g) * QP + q] = make_float4(d[0], d[1], d[2], d[3]);
    }
  }
};

// The lane's weight and activation bases for feature tile `tile` (see ChunkSums).
__device__ __forceinline__ const uint8_t* lane_weights(const uint8_t* w, int tile, int K) {
  const int lane = threadIdx.x % 32;
  return w + (static_cast<int64_t>(tile) * 16 + lane / 8) * K + 16 * (lane % 8);
}
__device__ __forceinline__ const uint16_t* lane_tokens(const uint16_t* xb, int rows, int K) {
  const int lane = threadIdx.x % 32, q = lane % 4, g = lane / 4;
  return xb + static_cast<int64_t>(g < rows ? g : 0) * K + 2 * q;
}

// The promotion chain in K order for the calling thread's output, (g, q, e) = feature
// 16 tile + g + 8 (e / 2) and token 2q + e % 2 (d[e] of lane (g, q)): acc = fma(sum, scale, acc)
// over blocks [b_begin, b_end) of `sums` (entry 0 = block b_begin) with `scales` (entry 0 =
// block 0).
template <int QP>
__device__ __forceinline__ float promote(
    const float4* sums, const float* scales, int b_begin, int b_end, int slot, float acc) {
  const float* s = reinterpret_cast<const float*>(sums) + slot;
#pragma unroll 8
  for (int b = b_begin; b < b_end; ++b)
    acc = __fmaf_rn(s[static_cast<int64_t>(b - b_begin) * 32 * QP], scales[b], acc);
  return acc;
}

// One launch's products: one weight, or two weights of the same K that read the same
// activations (CudaOps::linear_pair), tiles [0, tiles0) of the first and the rest of the second.
struct DecodeOperands {
  const uint8_t* w0;
  const uint8_t* scale0;
  float* y0;
  int n0;
  const uint8_t* w1;
  const uint8_t* scale1;
  float* y1;
  int n1;
  int tiles0;
};

// The product a CTA's tile belongs to, and the tile's index in it.
struct DecodeTile {
  const uint8_t* w;
  const uint8_t* wscale;
  float* y;
  int N;
  int tile;
};
__device__ __forceinline__ DecodeTile decode_tile(const DecodeOperands& o, int tile) {
  const bool second = tile >= o.tiles0;
  return DecodeTile{second ? o.w1 : o.w0, second ? o.scale1 : o.scale0, second ? o.y1 : o.y0,
                    second ? o.n1 : o.n0, second ? tile - o.tiles0 : tile};
}

// Shared memory: block sums [nblk][8 (g)][QP (q)] float4 (d0..d3 of lane (g, q)), then the
// decoded weight scales [nblk]. QP = ceil(rows / 2): lanes with 2q >= rows hold no real token.
template <int QP>
__global__ void __launch_bounds__(512)
    bf16_decode_kernel(DecodeOperands o, const uint16_t* __restrict__ xb, int rows, int K) {
  const DecodeTile dt = decode_tile(o, static_cast<int>(blockIdx.x));
  const uint8_t* const __restrict__ w = dt.w;
  const uint8_t* const __restrict__ wscale = dt.wscale;
  float* const __restrict__ y = dt.y;
  const int N = dt.N, tile = dt.tile;
  pdl::enter_dependent_grid();
  extern __shared__ float4 sums[];
  const int nblk = K / 32;
  float* const scales = reinterpret_cast<float*>(sums + static_cast<int64_t>(nblk) * 8 * QP);
  const int warps = blockDim.x / 32, warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32, q = lane % 4, g = lane / 4;
  // Rows 16 tile .. 16 tile + 15 lie in one 32-row scale group.
  const uint8_t* const srow = wscale + static_cast<int64_t>(tile / 2) * nblk;
  for (int b = threadIdx.x; b < nblk; b += blockDim.x) scales[b] = e8m0_to_float(srow[b]);
  const uint8_t* const wl = lane_weights(w, tile, K);
  const uint16_t* const xl = lane_tokens(xb, rows, K);
  const bool has_token = g < rows;
  // A chunk's weight and activation loads all go out before its MMAs.
  for (int b0 = warp * kChunk; b0 < nblk; b0 += warps * kChunk) {
    uint4 v[kChunk];
    uint32_t xv[kChunk][4];
#pragma unroll
    for (int c = 0; c < kChunk; ++c) {
      const int b = b0 + c;
      if (b < nblk) {
        v[c] = load_stream(wl + static_cast<int64_t>(4 * (b % 4)) * K + 128 * (b / 4));
        const uint32_t* xp = reinterpret_cast<const uint32_t*>(xl + 32 * b);
#pragma unroll
        for (int i = 0; i < 4; ++i) xv[c][i] = has_token ? __ldg(xp + 4 * i) : 0u;
      }
    }
#pragma unroll
    for (int c = 0; c < kChunk; ++c) {
      const int b = b0 + c;
      if (b >= nblk) continue;
      float d[4];
      block_sum(v[c], xv[c], d);
      if (q < QP) sums[(b * 8 + g) * QP + q] = make_float4(d[0], d[1], d[2], d[3]);
    }
  }
  __syncthreads();
  if (threadIdx.x < 32 * QP) {
    const int e = threadIdx.x % 4, qq = threadIdx.x / 4 % QP, gg = threadIdx.x / (4 * QP);
    const int f = 16 * tile + gg + 8 * (e / 2), t = 2 * qq + e % 2;
    const float acc = promote<QP>(sums, scales, 0, nblk, (gg * QP + qq) * 4 + e, 0.0f);
    if (f < N && t < rows) y[static_cast<int64_t>(t) * N + f] = round_bf16(acc);
  }
}

// The split form: a cluster of S CTAs per feature tile, CTA rank r taking blocks
// [r bps, (r + 1) bps) of K, one chunk per warp where it fits (so each warp pays one DRAM round
// trip), its weight loads issued before the wait for the previous grid (weights are never
// written during a forward: CudaOps permutes a weight two launches before its first product, with
// act_quant between). Every CTA stores its slice's block sums into the leader CTA's shared memory
// (distributed shared memory); after a cluster barrier the leader runs the chain over all of K
// from its own shared memory and the others are done. Same block sums, same chain: the bits of
// bf16_decode_kernel.
template <int QP, int kMinBlocks>
__global__ void __launch_bounds__(256, kMinBlocks) bf16_decode_split_kernel(
    DecodeOperands o, const uint16_t* __restrict__ xb, int rows, int K, int bps) {
  namespace cg = cooperative_groups;
  const cg::cluster_group cluster = cg::this_cluster();
  const int rank = static_cast<int>(cluster.block_rank());
  const int ranks = static_cast<int>(cluster.num_blocks());
  const DecodeTile dt = decode_tile(o, static_cast<int>(blockIdx.x) / ranks);
  const uint8_t* const __restrict__ w = dt.w;
  const uint8_t* const __restrict__ wscale = dt.wscale;
  float* const __restrict__ y = dt.y;
  const int N = dt.N, tile = dt.tile;
  const int nblk = K / 32, warps = blockDim.x / 32;
  const int warp = threadIdx.x / 32;
  const int begin = rank * bps, end = min(nblk, begin + bps);
  const uint8_t* const wl = lane_weights(w, tile, K);
  ChunkSums<QP> chunk;
  chunk.load_weights(wl, K, begin + warp * kChunk, end);
  // Distributed shared memory may be written only once every CTA of the cluster runs: arrive
  // now, wait just before the first store into the leader (the latency hides behind the loads).
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
  extern __shared__ float4 sums[];
  float* const scales = reinterpret_cast<float*>(sums + static_cast<int64_t>(nblk) * 8 * QP);
  const uint8_t* const srow = wscale + static_cast<int64_t>(tile / 2) * nblk;
  if (rank == 0) {
    for (int b = threadIdx.x; b < nblk; b += blockDim.x) scales[b] = e8m0_to_float(srow[b]);
  }
  pdl::enter_dependent_grid();
  float4* const leader = cluster.map_shared_rank(sums, 0);
  const uint16_t* const xl = lane_tokens(xb, rows, K);
  const bool has_token = threadIdx.x % 32 / 4 < rows;
  asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory");
  for (int b0 = begin + warp * kChunk; b0 < end; b0 += warps * kChunk) {
    if (b0 != begin + warp * kChunk) chunk.load_weights(wl, K, b0, end);
    chunk.finish(xl, has_token, b0, end, 0, leader);
  }
  cluster.sync();
  if (rank != 0 || threadIdx.x >= 32 * QP) return;
  const int e = threadIdx.x % 4, qq = threadIdx.x / 4 % QP, gg = threadIdx.x / (4 * QP);
  const int f = 16 * tile + gg + 8 * (e / 2), t = 2 * qq + e % 2;
  const float acc = promote<QP>(sums, scales, 0, nblk, (gg * QP + qq) * 4 + e, 0.0f);
  if (f < N && t < rows) y[static_cast<int64_t>(t) * N + f] = round_bf16(acc);
}

template <int QP>
cudaError_t launch(const uint16_t* xb,
                   int64_t rows,
                   int64_t K,
                   const DecodeOperands& o,
                   int64_t tiles,
                   cudaStream_t s,
                   int warps) {
  const int64_t nblk = K / 32;
  const size_t smem = static_cast<size_t>(nblk) * (8 * QP * sizeof(float4) + sizeof(float));
  auto* k = bf16_decode_kernel<QP>;
  cudaError_t e =
      cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (e != cudaSuccess) return e;
  pdl::launch_dependent(k, dim3(static_cast<unsigned>(tiles)), dim3(32 * warps), smem, s, o, xb,
                        static_cast<int>(rows), static_cast<int>(K));
  return cudaGetLastError();
}

// The split kernel: clusters of S <= 8 CTAs per tile, S such that a CTA's slice is at most 64
// blocks (8 warps of one chunk each), slices whole chunks. kMinBlocks: CTAs per SM the registers
// must allow (3: 80 registers; 4: 64, with a few bytes spilled).
template <int QP, int kMinBlocks>
cudaError_t launch_split(const uint16_t* xb,
                         int64_t rows,
                         int64_t K,
                         const DecodeOperands& o,
                         int64_t tiles,
                         cudaStream_t s) {
  const int nblk = static_cast<int>(K / 32);
  constexpr int kSliceBlocks = 8 * kChunk;
  const int ranks = std::min(8, (nblk + kSliceBlocks - 1) / kSliceBlocks);
  const int bps = ((nblk + ranks - 1) / ranks + kChunk - 1) / kChunk * kChunk;
  const int used = (nblk + bps - 1) / bps;  // ranks that hold blocks (chunk rounding may drop one)
  // At least QP warps: the leader's chain takes a thread per (feature, token pair) output.
  const int warps = std::max(QP, std::min(8, (bps + kChunk - 1) / kChunk));
  const size_t smem = static_cast<size_t>(nblk) * (8 * QP * sizeof(float4) + sizeof(float));
  auto* k = bf16_decode_split_kernel<QP, kMinBlocks>;
  cudaError_t e =
      cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (e != cudaSuccess) return e;
  pdl::launch_dependent_cluster(k, dim3(static_cast<unsigned>(tiles * used)), dim3(32 * warps),
                                smem, s, static_cast<unsigned>(used), o, xb, static_cast<int>(rows),
                                static_cast<int>(K), bps);
  return cudaGetLastError();
}

// The spread of a product, as measured on the H200 (docs/benchmarks.md, "FP8 products at few
// rows: K split over a cluster"; act_quant included, us at 1 row): the K split wins where few
// feature tiles leave SMs idle and K is long (wkv 512 x 5120: 7.0 -> 5.8, wq_a 1280 x 5120:
// 7.5 -> 7.0 up to 4 rows, wo_b 5120 x 8192 at 1-2 rows: 24.5 (wgmma tile) -> 23.0); otherwise
// 16 warps below 128 tiles and 8 from there (shared w1/w3 2304 x 5120: 13.3 -> 10.0, the
// indexer's 4096 x 1280: 7.0 -> 5.0).
// At one row and 128-320 tiles the split held to 4 CTAs per SM (variant 4) wins (row14,
// docs/benchmarks.md "FP8 products at one row toward the byte floor": wo_b 23.4 -> 22.5, DSpark
// 28.9 -> 27.1, the shared w1 + w3 pair 17.0 -> 15.1 from 8 warps).
int decode_variant(int64_t rows, int64_t tiles, int64_t K) {
  const int64_t nblk = K / 32;
  if (rows == 1 && tiles >= 128 && tiles <= 320 && nblk >= 160) return 4;
  const bool split = nblk >= 160 && (tiles <= 32 || (tiles <= 80 && rows <= 4) ||
                                     (tiles >= 264 && tiles <= 320 && nblk >= 256 && rows <= 2));
  if (split) return 3;
  return tiles < 128 ? 2 : 1;
}
int64_t tiles_of(const DeviceWeight& w) {
  return (w.out_features + 15) / 16;
}

// One launch of `variant` (0 = decode_variant) over `tiles` tiles of the operands.
cudaError_t run_decode(const uint16_t* xb,
                       int64_t rows,
                       int64_t K,
                       const DecodeOperands& o,
                       int64_t tiles,
                       cudaStream_t s,
                       int variant) {
  if (variant == 0) variant = decode_variant(rows, tiles, K);
  if (variant < 1 || variant > kBf16DecodeVariants) return cudaErrorInvalidValue;
  const int qp = static_cast<int>((rows + 1) / 2);
  if (variant == 3 || variant == 4) {
    const bool held = variant == 4;
    switch (qp) {
      case 1:
        return held ? launch_split<1, 4>(xb, rows, K, o, tiles, s)
                    : launch_split<1, 3>(xb, rows, K, o, tiles, s);
      case 2:
        return held ? launch_split<2, 4>(xb, rows, K, o, tiles, s)
                    : launch_split<2, 3>(xb, rows, K, o, tiles, s);
      case 3:
        return held ? launch_split<3, 4>(xb, rows, K, o, tiles, s)
                    : launch_split<3, 3>(xb, rows, K, o, tiles, s);
      default:
        return held ? launch_split<4, 4>(xb, rows, K, o, tiles, s)
                    : launch_split<4, 3>(xb, rows, K, o, tiles, s);
    }
  }
  const int warps = variant == 1 ? 8 : 16;
  switch (qp) {
    case 1:
      return launch<1>(xb, rows, K, o, tiles, s, warps);
    case 2:
      return launch<2>(xb, rows, K, o, tiles, s, warps);
    case 3:
      return launch<3>(xb, rows, K, o, tiles, s, warps);
    default:
      return launch<4>(xb, rows, K, o, tiles, s, warps);
  }
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
  const int64_t tiles = tiles_of(w);
  const DecodeOperands o{w.data,
                         w.scale,
                         y,
                         static_cast<int>(w.out_features),
                         w.data,
                         w.scale,
                         y,
                         static_cast<int>(w.out_features),
                         static_cast<int>(tiles)};
  return run_decode(xb, rows, w.in_features, o, tiles, s, variant);
}

cudaError_t block_scaled_gemm_bf16_decode_pair(const uint16_t* xb,
                                               int64_t rows,
                                               const DeviceWeight& w0,
                                               float* y0,
                                               const DeviceWeight& w1,
                                               float* y1,
                                               cudaStream_t s,
                                               int variant) {
  if (rows == 0) return cudaSuccess;
  if (!bf16_decode_applies(rows, w0) || !bf16_decode_applies(rows, w1) ||
      w0.in_features != w1.in_features || w0.out_features == 0 || w1.out_features == 0 ||
      reinterpret_cast<uintptr_t>(xb) % 4 != 0) {
    return cudaErrorInvalidValue;
  }
  const int64_t t0 = tiles_of(w0), tiles = t0 + tiles_of(w1);
  if (tiles > (int64_t{1} << 30)) return cudaErrorInvalidValue;
  const DecodeOperands o{w0.data,
                         w0.scale,
                         y0,
                         static_cast<int>(w0.out_features),
                         w1.data,
                         w1.scale,
                         y1,
                         static_cast<int>(w1.out_features),
                         static_cast<int>(t0)};
  return run_decode(xb, rows, w0.in_features, o, tiles, s, variant);
}

bool bf16_decode_preferred(int64_t rows, const DeviceWeight& w) {
  // Measured on the H200 (docs/benchmarks.md, "FP8 products at few rows"): the decode kernel wins
  // while the wgmma kernel's 64-feature CTAs cannot fill the device (N < 66 x 64); from there on
  // the wgmma tile is as fast or faster (5120 x 5120: 16.0 vs 16.9 us).
  // The caller has the weight from the wgmma path (wgmma_bf16_applies held): only the shape is
  // checked here, not the device again.
  // Of the outputs past that, the K split keeps the long products (wo_b, DSpark: K >= 8192); a
  // 5120 x 5120 product at one row is faster on the tile (16.0 vs 16.9 us, row14).
  const int v = decode_variant(rows, tiles_of(w), w.in_features);
  return decode_shape_fits(rows, w.in_features) &&
         (w.out_features < 66 * 64 || v == 3 || (v == 4 && w.in_features >= 8192));
}

}  // namespace di::backend::cuda
