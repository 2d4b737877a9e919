// Dense (BF16/F32 weight) products with many rows, bitwise equal to kernels/ref dense_gemm
// (dot_f32 / dot_f32_bf16) as a register-tiled SIMT GEMM. The CPU's order for one output is
// eight lane chains (lane j: k = j, j + 8, ... below K / 8 * 8, each product rounded and then
// added), the fixed tree ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)), then the tail in K
// order. Here the lane is a thread: eight consecutive threads share a TM x TN tile of outputs and
// thread j runs chain j of each, reading x and w from k-major shared-memory tiles (row kk holds
// element kk of every tile row, so thread j's operands of step s sit in row 8 s + j). Three
// xor-shuffles then form the tree exactly as dense_gemm does, and one of the eight adds the
// tail. Past K / 8 * 8 the tiles are zero: a chain that starts at +0 is never -0, so adding
// 0 * 0 leaves it unchanged. Every output's arithmetic is fixed, so the bits do not depend on the
// tile, the row count or the launch.
#include <utility>

#include "backend/cuda/device_numeric.cuh"
#include "backend/cuda/grid_dependency.cuh"
#include "backend/cuda/kernels.h"

namespace di::backend::cuda {

namespace {

constexpr int kThreads = 256;  // 32 output threads x 8 lanes

// A k-major tile's row stride for `n` columns: a multiple of 4 floats (16-byte fragments) and 4 x
// an odd number, so the rows 8 s + 0..7 that a lane group reads start in distinct 4-bank groups.
constexpr int pad_stride(int n) {
  const int s = (n + 3) / 4 * 4;
  return (s / 4) % 2 == 1 ? s : s + 4;
}

// Each output thread owns TM rows x TN columns; RG x CG = 32 output threads per block.
template <int TM_, int TN_, int RG_, int BK_>
struct Tile {
  static constexpr int TM = TM_, TN = TN_, RG = RG_, CG = 32 / RG_, BK = BK_;
  static constexpr int BM = TM * RG, BN = TN * CG;
  static constexpr int SA = pad_stride(BM), SW = pad_stride(BN);
  // Four-element quads of K per thread per chunk (x and w tiles).
  static constexpr int QA = (BM * BK / 4 + kThreads - 1) / kThreads;
  static constexpr int QW = (BN * BK / 4 + kThreads - 1) / kThreads;
  static_assert(RG * CG == 32 && BK % 8 == 0);
};

using NarrowTile = Tile<1, 4, 32, 64>;  // 32 x 4: few outputs (hc_mixes' 24)
using TinyTile = Tile<2, 4, 8, 64>;     // 16 x 16: too few outputs for larger tiles to fill the GPU
using SmallTile = Tile<4, 8, 8, 64>;    // 32 x 32
using LargeTile = Tile<8, 8, 8, 32>;    // 64 x 32: many rows

// n consecutive floats of shared memory (16-byte aligned when n % 4 == 0) into registers.
template <int N>
__device__ __forceinline__ void load_frag(const float* p, float* out) {
  if constexpr (N % 4 == 0) {
#pragma unroll
    for (int i = 0; i < N; i += 4) {
      const float4 v = *reinterpret_cast<const float4*>(p + i);
      out[i] = v.x;
      out[i + 1] = v.y;
      out[i + 2] = v.z;
      out[i + 3] = v.w;
    }
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) out[i] = p[i];
  }
}

__device__ __forceinline__ float widen_bf16(uint16_t v) {
  return __uint_as_float(static_cast<uint32_t>(v) << 16);
}

// Four consecutive elements k..k+3 of a source row (x or w), zero where the row or k is out of
// range. `vec`: 16-byte (f32) / 8-byte (bf16) aligned quads, so one load when k < k8.
template <class T>
__device__ __forceinline__ void load_quad(
    const T* row, bool row_ok, int64_t k, int64_t k8, bool vec, float* out) {
  if (row_ok && vec && k < k8) {
    if constexpr (sizeof(T) == 4) {
      const float4 v = *reinterpret_cast<const float4*>(row + k);
      out[0] = v.x;
      out[1] = v.y;
      out[2] = v.z;
      out[3] = v.w;
    } else {
      const uint2 v = *reinterpret_cast<const uint2*>(row + k);
      out[0] = __uint_as_float(v.x << 16);
      out[1] = __uint_as_float(v.x & 0xffff0000u);
      out[2] = __uint_as_float(v.y << 16);
      out[3] = __uint_as_float(v.y & 0xffff0000u);
    }
    return;
  }
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    float v = 0.0f;
    if (row_ok && k + e < k8) {
      if constexpr (sizeof(T) == 4) {
        v = row[k + e];
      } else {
        v = widen_bf16(row[k + e]);
      }
    }
    out[e] = v;
  }
}

// x [rows, x_stride] (group g's columns at g * K), w [groups * group_out, K] as W (float or
// uint16_t bf16 bits), y [rows, groups * group_out]. Grid: (column tiles per group, row tiles,
// groups).
template <class T, class W>
__global__ void __launch_bounds__(kThreads, 2) dense_tiled_kernel(const float* __restrict__ x,
                                                                  int64_t rows,
                                                                  int64_t x_stride,
                                                                  int64_t group_out,
                                                                  const W* __restrict__ w,
                                                                  int64_t K,
                                                                  float* __restrict__ y,
                                                                  bool round_out,
                                                                  bool vec) {
  pdl::enter_dependent_grid();
  __shared__ __align__(16) float xs[2][T::BK * T::SA];
  __shared__ __align__(16) float ws[2][T::BK * T::SW];
  const int64_t g = blockIdx.z, N = group_out * gridDim.z;
  const int64_t m0 = blockIdx.y * int64_t{T::BM}, c0 = blockIdx.x * int64_t{T::BN};
  const int64_t k8 = K / 8 * 8;
  const float* xg = x + g * K;
  const W* wg = w + g * group_out * K;

  // Loader: quad q covers tile row q % B, elements 4 (q / B) .. +3 of the chunk; consecutive
  // threads take consecutive rows, so their transposed stores hit consecutive banks.
  float ra[T::QA][4], rw[T::QW][4];
  auto load = [&](int64_t k0) {
#pragma unroll
    for (int i = 0; i < T::QA; ++i) {
      const int q = threadIdx.x + kThreads * i;
      const int r = q % T::BM, kq = q / T::BM;
      const int64_t m = m0 + r;
      const bool ok = q < T::BM * T::BK / 4 && m < rows;
      load_quad(xg + (ok ? m : 0) * x_stride, ok, k0 + 4 * kq, k8, vec, ra[i]);
    }
#pragma unroll
    for (int i = 0; i < T::QW; ++i) {
      const int q = threadIdx.x + kThreads * i;
      const int r = q % T::BN, kq = q / T::BN;
      const int64_t c = c0 + r;
      const bool ok = q < T::BN * T::BK / 4 && c < group_out;
      load_quad(wg + (ok ? c : 0) * K, ok, k0 + 4 * kq, k8, vec, rw[i]);
    }
  };
  auto store = [&](int buf) {
#pragma unroll
    for (int i = 0; i < T::QA; ++i) {
      const int q = threadIdx.x + kThreads * i;
      if (q >= T::BM * T::BK / 4) continue;
      const int r = q % T::BM, kq = q / T::BM;
#pragma unroll
      for (int e = 0; e < 4; ++e) xs[buf][(4 * kq + e) * T::SA + r] = ra[i][e];
    }
#pragma unroll
    for (int i = 0; i < T::QW; ++i) {
      const int q = threadIdx.x + kThreads * i;
      if (q >= T::BN * T::BK / 4) continue;
      const int r = q % T::BN, kq = q / T::BN;
#pragma unroll
      for (int e = 0; e < 4; ++e) ws[buf][(4 * kq + e) * T::SW + r] = rw[i][e];
    }
  };

  const int lane = threadIdx.x & 7, t = threadIdx.x >> 3;
  const int tm = t % T::RG, tn = t / T::RG;
  float acc[T::TM][T::TN];
#pragma unroll
  for (int i = 0; i < T::TM; ++i) {
#pragma unroll
    for (int j = 0; j < T::TN; ++j) acc[i][j] = 0.0f;
  }

  const int64_t chunks = (k8 + T::BK - 1) / T::BK;
  if (chunks > 0) {
    load(0);
    store(0);
  }
  __syncthreads();
  for (int64_t c = 0; c < chunks; ++c) {
    const int buf = static_cast<int>(c & 1);
    if (c + 1 < chunks) load((c + 1) * T::BK);  // in flight during this chunk's products
    const float* xb = xs[buf] + tm * T::TM;
    const float* wb = ws[buf] + tn * T::TN;
#pragma unroll
    for (int s = 0; s < T::BK / 8; ++s) {
      const int kk = 8 * s + lane;
      float a[T::TM], b[T::TN];
      load_frag<T::TM>(xb + kk * T::SA, a);
      load_frag<T::TN>(wb + kk * T::SW, b);
#pragma unroll
      for (int i = 0; i < T::TM; ++i) {
#pragma unroll
        for (int j = 0; j < T::TN; ++j) acc[i][j] = __fadd_rn(acc[i][j], __fmul_rn(a[i], b[j]));
      }
    }
    if (c + 1 < chunks) store(buf ^ 1);
    __syncthreads();
  }

  // dot_f32's tree across the eight lanes (every lane ends with the same sums).
#pragma unroll
  for (int i = 0; i < T::TM; ++i) {
#pragma unroll
    for (int j = 0; j < T::TN; ++j) {
      float v = acc[i][j];
      v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, 1));
      v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, 2));
      v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, 4));
      acc[i][j] = v;
    }
  }
  // Lane j finishes outputs j, j + 8, ... of the thread's tile: the tail in K order, then the
  // store.
#pragma unroll
  for (int o = 0; o < T::TM * T::TN; ++o) {
    if ((o & 7) != lane) continue;
    const int i = o / T::TN, j = o % T::TN;
    const int64_t m = m0 + tm * T::TM + i, c = c0 + tn * T::TN + j;
    if (m >= rows || c >= group_out) continue;
    float sum = acc[i][j];
    const float* xr = xg + m * x_stride;
    const W* wr = wg + c * K;
    for (int64_t k = k8; k < K; ++k) {
      float wv;
      if constexpr (sizeof(W) == 4) {
        wv = wr[k];
      } else {
        wv = widen_bf16(wr[k]);
      }
      sum = __fadd_rn(sum, __fmul_rn(xr[k], wv));
    }
    y[m * N + g * group_out + c] = round_out ? round_bf16(sum) : sum;
  }
}

template <class T>
int64_t tile_blocks(int64_t rows, int64_t group_out, int groups) {
  return ((group_out + T::BN - 1) / T::BN) * ((rows + T::BM - 1) / T::BM) * groups;
}

// Tile choice by a cost model: the busiest SM's work (waves of blocks over the H200's 132 SMs x
// outputs per block) over the tile's relative speed per output. Larger tiles reuse each staged
// element more (large: 4 fragment loads per 64 outputs; small 3 per 32; tiny and narrow are
// bound by shared-memory loads) but give fewer blocks.
constexpr int64_t kSms = 132;

template <class T>
double tile_cost(int64_t rows, int64_t group_out, int groups, double speed) {
  const int64_t waves = (tile_blocks<T>(rows, group_out, groups) + kSms - 1) / kSms;
  return static_cast<double>(waves * T::BM * T::BN) / speed;
}

DenseTiledTile pick_tile(int64_t rows, int64_t group_out, int groups) {
  const std::pair<DenseTiledTile, double> costs[] = {
      {DenseTiledTile::kLarge, tile_cost<LargeTile>(rows, group_out, groups, 1.0)},
      {DenseTiledTile::kSmall, tile_cost<SmallTile>(rows, group_out, groups, 0.85)},
      {DenseTiledTile::kTiny, tile_cost<TinyTile>(rows, group_out, groups, 0.4)},
      {DenseTiledTile::kNarrow, tile_cost<NarrowTile>(rows, group_out, groups, 0.3)},
  };
  auto best = costs[0];
  for (const auto& c : costs) {
    if (c.second < best.second) best = c;
  }
  return best.first;
}

template <class T>
cudaError_t launch(const float* x,
                   int64_t rows,
                   const DeviceWeight& w,
                   int groups,
                   float* y,
                   bool round_out,
                   cudaStream_t s) {
  const int64_t K = w.in_features, group_out = w.out_features / groups;
  const int64_t col_tiles = (group_out + T::BN - 1) / T::BN, row_tiles = (rows + T::BM - 1) / T::BM;
  if (row_tiles > 65535 || groups > 65535 || col_tiles > (int64_t{1} << 31) - 1) {
    return cudaErrorInvalidValue;
  }
  const size_t elem = w.format == WeightFormat::kBF16 ? 8 : 16;
  const bool vec = K % 4 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(w.data) % elem == 0;
  const dim3 grid(static_cast<unsigned>(col_tiles), static_cast<unsigned>(row_tiles),
                  static_cast<unsigned>(groups));
  const int64_t x_stride = K * groups;
  if (w.format == WeightFormat::kBF16) {
    pdl::launch_dependent(dense_tiled_kernel<T, uint16_t>, dim3(grid), dim3(kThreads), 0, s, x,
                          rows, x_stride, group_out, reinterpret_cast<const uint16_t*>(w.data), K,
                          y, round_out, vec);
  } else {
    pdl::launch_dependent(dense_tiled_kernel<T, float>, dim3(grid), dim3(kThreads), 0, s, x, rows,
                          x_stride, group_out, reinterpret_cast<const float*>(w.data), K, y,
                          round_out, vec);
  }
  return cudaGetLastError();
}

// When `linear` and `grouped_linear` take the tiled kernel (H200, `cuda_kernels_bench
// --dense-f32`, docs/benchmarks.md): from 16 rows and 32K outputs (rows x out), where it beat the
// eight-lane kernel at every measured shape (512 x 5120 from 64 rows, 32 x 5120 from 1024, 128 x
// 512 from 256, wo_a from 16) and lost below (fewer blocks than SMs at the smallest tile); and
// for K >= 16K from 4K outputs, where the eight-lane kernel's K / 8 dependent loads per chain
// dominate (hc_mixes' 24 x 20480 at 256 rows: 0.245 vs 0.292 ms).
constexpr int64_t kDenseTiledMinRows = 16;
constexpr int64_t kDenseTiledMinOutputs = 32768;
constexpr int64_t kDenseTiledLongK = 16384;
constexpr int64_t kDenseTiledLongKMinOutputs = 4096;

}  // namespace

bool dense_tiled_applies(int64_t rows, const DeviceWeight& w, int groups) {
  const bool dense = w.format == WeightFormat::kBF16 || w.format == WeightFormat::kF32;
  if (!dense || rows < kDenseTiledMinRows || groups < 1 || w.out_features % groups != 0 ||
      (rows + 15) / 16 > 65535 || groups > 65535) {
    return false;
  }
  const int64_t outputs = rows * w.out_features;
  return outputs >= kDenseTiledMinOutputs ||
         (w.in_features >= kDenseTiledLongK && outputs >= kDenseTiledLongKMinOutputs);
}

cudaError_t dense_tiled(const float* x,
                        int64_t rows,
                        const DeviceWeight& w,
                        int groups,
                        float* y,
                        bool round_bf16,
                        cudaStream_t s,
                        DenseTiledTile tile) {
  if (w.format != WeightFormat::kBF16 && w.format != WeightFormat::kF32) {
    return cudaErrorInvalidValue;
  }
  if (groups < 1 || w.out_features % groups != 0) return cudaErrorInvalidValue;
  if (rows == 0 || w.out_features == 0) return cudaSuccess;
  if (tile == DenseTiledTile::kAuto) tile = pick_tile(rows, w.out_features / groups, groups);
  switch (tile) {
    case DenseTiledTile::kNarrow:
      return launch<NarrowTile>(x, rows, w, groups, y, round_bf16, s);
    case DenseTiledTile::kTiny:
      return launch<TinyTile>(x, rows, w, groups, y, round_bf16, s);
    case DenseTiledTile::kSmall:
      return launch<SmallTile>(x, rows, w, groups, y, round_bf16, s);
    default:
      return launch<LargeTile>(x, rows, w, groups, y, round_bf16, s);
  }
}

}  // namespace di::backend::cuda
