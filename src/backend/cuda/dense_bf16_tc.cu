// Dense BF16-weight products on tensor cores for the `tensor` GEMM path (the head and the
// DSpark Markov head: 129,280 x 5,120). The exact kernels accumulate in the CPU's 8-lane fp32
// order on CUDA cores, which at 64-256 rows makes the head most of a decode step; here each
// output is a chain of bf16 m16n8k16 MMAs with fp32 accumulation in K order: within tolerance of
// the CPU, and the same chain for a row whatever else is in the call (an MMA output element
// depends only on its row of A and column of B), so batch invariance holds for every M.
#include <cstdint>

#include "backend/cuda/dense_bf16_wgmma.h"
#include "backend/cuda/device_numeric.cuh"
#include "backend/cuda/grid_dependency.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/mma_bf16.cuh"
#include "backend/cuda/mma_e4m3.cuh"

namespace di::backend::cuda {

namespace {

constexpr int kWarps = 4;      // 16 output features per warp, 64 per CTA
constexpr int kTokGroups = 8;  // 8 tokens per MMA column group, 64 tokens per pass
constexpr int kAhead = 4;      // 32-wide K chunks whose weight loads a warp issues at once
constexpr int kAheadOne = 8;   // the same with one token group (up to 8 rows)
// Outputs from which the shared tile takes kDenseTcTiledMinRows rows and more (16 feature tiles).
constexpr int64_t kTiledMinFeatures = 2048;

__device__ __forceinline__ uint4 load16(const uint16_t* p) {
  return __ldg(reinterpret_cast<const uint4*>(p));
}

// Each thread loads 8 consecutive K values (16 bytes) per 32-wide K chunk for W rows f0 + g and
// f0 + g + 8 and for token g of each group: K is permuted the same way for both operands (logical
// k 2q, 2q+1, 2q+8, 2q+9 of an MMA are physical 8q .. 8q+3, then 8q+4 .. 8q+7 for the second
// MMA), which leaves every dot product unchanged and makes each operand one 16-byte load.
// `splits` warps share a 16-feature tile, each a contiguous K range, and their partial sums are
// added in split order: the split depends on the weight only (dense_bf16_tc_k_parts, never on
// the rows), and it gives small batches four times the warps to keep weight bytes in flight.
// TG token groups per pass: kTokGroups, or 1 for up to 8 rows (decode), where a chunk's x values
// then load with its weights instead of an L2 round trip of their own per chunk, in far fewer
// registers. The same MMAs for every row either way.
template <int TG>
__global__ void __launch_bounds__(kWarps * 32) dense_bf16_tc_kernel(const uint16_t* __restrict__ x,
                                                                    int64_t rows,
                                                                    const uint16_t* __restrict__ w,
                                                                    int64_t n_out,
                                                                    int64_t k,
                                                                    int splits,
                                                                    int64_t group_out,
                                                                    int64_t x_stride,
                                                                    float* __restrict__ y,
                                                                    bool round) {
  constexpr int kA = TG == 1 ? kAheadOne : kAhead;
  pdl::enter_dependent_grid();
  __shared__ float partial[kWarps][TG][4][32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
  const int tile = warp / splits, part = warp % splits;
  const int64_t f0 = (static_cast<int64_t>(blockIdx.x) * (kWarps / splits) + tile) * 16;
  const int64_t fa = f0 + g, fb = f0 + g + 8;
  const int64_t k_part = k / splits, k_begin = part * k_part, k_end = k_begin + k_part;
  // Grouped products (wo_a): the tile's 16 features lie in one group, which reads its x slice.
  const uint16_t* xg = x + (min(f0, n_out - 1) / group_out) * k;
  const uint4 zero = make_uint4(0, 0, 0, 0);
  for (int64_t t0 = 0; t0 < rows; t0 += TG * 8) {
    float acc[TG][4];
#pragma unroll
    for (int tg = 0; tg < TG; ++tg) acc[tg][0] = acc[tg][1] = acc[tg][2] = acc[tg][3] = 0.0f;
    const int64_t left = rows - t0;
    const int groups = left >= TG * 8 ? TG : static_cast<int>((left + 7) / 8);
    // The weight loads of kA chunks are issued before their MMAs: at a few rows the kernel
    // streams weights, and two chunks in flight per warp left it at ~0.4 of the byte floor.
    for (int64_t kc0 = k_begin; kc0 < k_end; kc0 += 32 * kA) {
      uint4 wa[kA], wb[kA], x1[TG == 1 ? kA : 1];
#pragma unroll
      for (int u = 0; u < kA; ++u) {
        const int64_t off = kc0 + 32 * u + 8 * q;
        const bool in = kc0 + 32 * u < k_end;
        wa[u] = in && fa < n_out ? load16(w + fa * k + off) : zero;
        wb[u] = in && fb < n_out ? load16(w + fb * k + off) : zero;
        if constexpr (TG == 1) {
          x1[u] = in && t0 + g < rows ? load16(xg + (t0 + g) * x_stride + off) : zero;
        }
      }
#pragma unroll
      for (int u = 0; u < kA; ++u) {
        if (kc0 + 32 * u >= k_end) break;
        const int64_t off = kc0 + 32 * u + 8 * q;
        const uint4 a = wa[u], b = wb[u];
        const uint32_t a0[4] = {a.x, b.x, a.y, b.y}, a1[4] = {a.z, b.z, a.w, b.w};
#pragma unroll
        for (int tg = 0; tg < TG; ++tg) {
          if (tg < groups) {
            const int64_t t = t0 + tg * 8 + g;
            uint4 xv;
            if constexpr (TG == 1) {
              xv = x1[u];
            } else {
              xv = t < rows ? load16(xg + t * x_stride + off) : zero;
            }
            mma_bf16(acc[tg], a0, xv.x, xv.y);
            mma_bf16(acc[tg], a1, xv.z, xv.w);
          }
        }
      }
    }
    if (splits > 1) {
#pragma unroll
      for (int tg = 0; tg < TG; ++tg) {
#pragma unroll
        for (int i = 0; i < 4; ++i) partial[warp][tg][i][lane] = acc[tg][i];
      }
      __syncthreads();
      if (part == 0) {
#pragma unroll
        for (int tg = 0; tg < TG; ++tg) {
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            float v = partial[warp][tg][i][lane];
            for (int p = 1; p < splits; ++p) v = __fadd_rn(v, partial[warp + p][tg][i][lane]);
            acc[tg][i] = v;
          }
        }
      }
      __syncthreads();  // `partial` is written again by the next pass
    }
    if (part != 0) continue;
#pragma unroll
    for (int tg = 0; tg < TG; ++tg) {
      if (tg >= groups) continue;
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int64_t t = t0 + tg * 8 + 2 * q + j;
        if (t >= rows) continue;
        if (fa < n_out) y[t * n_out + fa] = round ? round_bf16(acc[tg][j]) : acc[tg][j];
        if (fb < n_out) y[t * n_out + fb] = round ? round_bf16(acc[tg][2 + j]) : acc[tg][2 + j];
      }
    }
  }
}

// --- The shared-tile kernel for many rows ---
// The row-group kernel reads each weight tile once per 64 rows and each x row once per 16
// features (from L2), so at 64-256 rows it is bound by those re-reads, not by the tensor cores.
// Here a CTA stages a 128-feature x 64-K weight tile and a TT-row x 64-K x tile in shared memory
// (cp.async, ST stages deep) and 8 warps multiply them (TT = 64: each 32 features x 32 rows;
// TT = 16: each 16 features x 16 rows). Every output
// runs exactly the row-group kernel's arithmetic: the same K permutation within each 32-wide
// chunk, the same two MMAs per chunk in K order, a fresh chain per K part (k_splits) and the
// parts added in part order, so both kernels give the same bits for every output.
constexpr int kTileF = 128, kTileK = 64;
constexpr int kTiledThreads = 256;
// TT rows per CTA, ST stages. 64 x 3 for many rows; at <= 32 rows (the head at decode) a 64-row
// x tile is mostly zero-fill, so 16 x 5 and 32 x 4 keep more weight bytes in flight per SM in
// the same shared memory (two CTAs per SM in every shape).
template <int TT, int ST>
struct TiledShape {
  static constexpr int kWarpRows = TT < 32 ? TT : 32;   // rows per warp
  static constexpr int kWarpsF = 8 / (TT / kWarpRows);  // warps along the features
  static constexpr int kMF = kTileF / kWarpsF / 16;     // 16-feature MMA rows per warp
  static constexpr int kNF = kWarpRows / 8;             // 8-row MMA columns per warp
  // One stage: [2 chunks][kTileF rows][32] weights, then [2 chunks][TT rows][32] x; a row of a
  // chunk is 64 contiguous bytes, so the 16-byte fragment loads of a quarter warp (2 rows x 4
  // lanes) cover 128 distinct bytes: no bank conflicts.
  static constexpr int kStageW = 2 * kTileF * 32, kStageX = 2 * TT * 32;  // bf16 elements
  static constexpr size_t kSmem = size_t{ST} * (kStageW + kStageX) * sizeof(uint16_t) +
                                  size_t{kTiledThreads} * kMF * kNF * 4 * sizeof(float);
  static_assert(kMF >= 1 && kNF >= 1 && kSmem <= 113 * 1024, "two CTAs per SM");
};

__device__ __forceinline__ uint4 lds16(const uint16_t* p) {
  return *reinterpret_cast<const uint4*>(p);
}

template <int TT, int ST>
__global__ void __launch_bounds__(kTiledThreads, 2)
    dense_bf16_tc_tiled_kernel(const uint16_t* __restrict__ x,
                               int64_t rows,
                               const uint16_t* __restrict__ w,
                               int64_t n_out,
                               int64_t k,
                               int64_t k_part,
                               int64_t group_out,
                               int64_t x_stride,
                               float* __restrict__ y,
                               bool round) {
  pdl::enter_dependent_grid();
  using S = TiledShape<TT, ST>;
  constexpr int MF = S::kMF, NF = S::kNF;
  extern __shared__ __align__(16) uint16_t smem[];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, q = lane % 4;
  // The warp's first feature and row.
  const int wf = (warp % S::kWarpsF) * (16 * MF), wt = (warp / S::kWarpsF) * S::kWarpRows;
  // Row tiles vary fastest, so the CTAs sharing a weight tile run together and the second reads
  // it from L2.
  const int64_t t_base = static_cast<int64_t>(blockIdx.x) * TT;
  const int64_t f_base = static_cast<int64_t>(blockIdx.y) * kTileF;
  const uint16_t* xg = x + (f_base / group_out) * k;  // host checks group_out % kTileF == 0
  const int stages = static_cast<int>((k + kTileK - 1) / kTileK);

  // Each thread copies 16-byte piece c of rows r0, r0 + 32, ... of both tiles: one base pointer
  // per tile, advanced by 32 rows and by K (few registers next to the accumulators).
  const int r0 = tid / 8, c = tid % 8;
  const uint16_t* wp = w + (f_base + r0) * k + c * 8;
  const uint16_t* xp = xg + (t_base + r0) * x_stride + c * 8;
  const int s_off = r0 * 32 + (c % 4) * 8;
  auto load_stage = [&](int s) {
    uint16_t* sw = smem + (s % ST) * (S::kStageW + S::kStageX);
    uint16_t* sx = sw + S::kStageW;
    const int64_t k0 = static_cast<int64_t>(s) * kTileK;
    const bool k_ok = k0 + (c / 4) * 32 < k;  // the stage's second chunk may lie past K
#pragma unroll
    for (int i = 0; i < kTileF / 32; ++i) {
      const bool ok = k_ok && f_base + r0 + 32 * i < n_out;
      cp_async16(sw + (c / 4) * kTileF * 32 + s_off + i * 32 * 32, ok ? wp + 32 * i * k + k0 : w,
                 ok ? 16 : 0);
    }
#pragma unroll
    for (int i = 0; i < (TT + 31) / 32; ++i) {
      if (r0 + 32 * i >= TT) break;
      const bool ok = k_ok && t_base + r0 + 32 * i < rows;
      cp_async16(sx + (c / 4) * TT * 32 + s_off + i * 32 * 32, ok ? xp + 32 * i * x_stride + k0 : x,
                 ok ? 16 : 0);
    }
  };

  // The sum of the finished K parts, per warp value and lane (shared memory: registers hold the
  // current part's chain; each thread only touches its own entries, so no barrier).
  float* sum = reinterpret_cast<float*>(smem + ST * (S::kStageW + S::kStageX)) +
               warp * (MF * NF * 4) * 32 + lane;
  float acc[MF][NF][4];
#pragma unroll
  for (int m = 0; m < MF; ++m) {
#pragma unroll
    for (int n = 0; n < NF; ++n) {
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[m][n][i] = 0.0f;
    }
  }
  // Column groups of this warp that hold rows (warp-uniform): empty ones skip their MMAs.
  const int64_t warp_rows = rows - (t_base + wt);
  const int live = warp_rows <= 0              ? 0
                   : warp_rows >= S::kWarpRows ? NF
                                               : static_cast<int>((warp_rows + 7) / 8);
  bool first_part = true;
  int64_t part_end = k_part;  // where the current K part ends

#pragma unroll 1
  for (int s = 0; s < ST - 1; ++s) {
    if (s < stages) load_stage(s);
    cp_async_commit();
  }
#pragma unroll 1
  for (int s = 0; s < stages; ++s) {
    cp_async_wait<ST - 2>();
    __syncthreads();  // stage s landed for every thread; stage s - 1's buffer is free again
    if (s + ST - 1 < stages) load_stage(s + ST - 1);
    cp_async_commit();
    const uint16_t* sw = smem + (s % ST) * (S::kStageW + S::kStageX);
    const uint16_t* sx = sw + S::kStageW;
#pragma unroll 1
    for (int h = 0; h < 2; ++h) {
      const int64_t kc = static_cast<int64_t>(s) * kTileK + h * 32;
      if (kc >= k) break;
      uint32_t a0[MF][4], a1[MF][4];
#pragma unroll
      for (int m = 0; m < MF; ++m) {
        const uint16_t* base = sw + h * kTileF * 32 + (wf + m * 16 + g) * 32 + 8 * q;
        const uint4 a = lds16(base), b = lds16(base + 8 * 32);
        a0[m][0] = a.x, a0[m][1] = b.x, a0[m][2] = a.y, a0[m][3] = b.y;
        a1[m][0] = a.z, a1[m][1] = b.z, a1[m][2] = a.w, a1[m][3] = b.w;
      }
#pragma unroll
      for (int n = 0; n < NF; ++n) {
        if (n >= live) continue;
        const uint4 xv = lds16(sx + h * TT * 32 + (wt + n * 8 + g) * 32 + 8 * q);
#pragma unroll
        for (int m = 0; m < MF; ++m) {
          mma_bf16(acc[m][n], a0[m], xv.x, xv.y);
          mma_bf16(acc[m][n], a1[m], xv.z, xv.w);
        }
      }
      if (kc + 32 == part_end) {  // a K part ends: add its chain to the earlier parts'
#pragma unroll
        for (int m = 0; m < MF; ++m) {
#pragma unroll
          for (int n = 0; n < NF; ++n) {
#pragma unroll
            for (int i = 0; i < 4; ++i) {
              float& v = sum[((m * NF + n) * 4 + i) * 32];
              v = first_part ? acc[m][n][i] : __fadd_rn(v, acc[m][n][i]);
              acc[m][n][i] = 0.0f;
            }
          }
        }
        first_part = false;
        part_end += k_part;
      }
    }
  }
  cp_async_wait<0>();
#pragma unroll
  for (int m = 0; m < MF; ++m) {
    const int64_t fa = f_base + wf + m * 16 + g, fb = fa + 8;
#pragma unroll
    for (int n = 0; n < NF; ++n) {
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int64_t t = t_base + wt + n * 8 + 2 * q + j;
        if (t >= rows) continue;
        const float va = sum[((m * NF + n) * 4 + j) * 32];
        const float vb = sum[((m * NF + n) * 4 + 2 + j) * 32];
        if (fa < n_out) y[t * n_out + fa] = round ? round_bf16(va) : va;
        if (fb < n_out) y[t * n_out + fb] = round ? round_bf16(vb) : vb;
      }
    }
  }
}

template <int TT, int ST>
cudaError_t launch_tiled(const uint16_t* x,
                         int64_t rows,
                         const DeviceWeight& w,
                         int groups,
                         int splits,
                         float* y,
                         bool round_bf16,
                         cudaStream_t s) {
  auto* kernel = dense_bf16_tc_tiled_kernel<TT, ST>;
  const int smem = static_cast<int>(TiledShape<TT, ST>::kSmem);
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (e != cudaSuccess) return e;
  const dim3 grid(static_cast<unsigned>((rows + TT - 1) / TT),
                  static_cast<unsigned>((w.out_features + kTileF - 1) / kTileF));
  return pdl::launch_dependent(kernel, grid, dim3(kTiledThreads), static_cast<size_t>(smem), s, x,
                               rows, reinterpret_cast<const uint16_t*>(w.data), w.out_features,
                               w.in_features, w.in_features / splits, w.out_features / groups,
                               groups * w.in_features, y, round_bf16);
}

// K split in 4 (2) when every part stays a whole number of 32-wide chunks.
int k_splits(int64_t k) {
  return k % (4 * 32) == 0 ? 4 : k % (2 * 32) == 0 ? 2 : 1;
}

}  // namespace

int dense_bf16_tc_k_parts(const DeviceWeight& w) {
  return w.out_features >= kDenseTcTiledMinOutputs ? 1 : k_splits(w.in_features);
}

bool dense_bf16_tc_supports(const DeviceWeight& w, int groups) {
  if (w.format != WeightFormat::kBF16 || w.in_features % 32 != 0 || groups < 1 ||
      w.out_features % groups != 0 || reinterpret_cast<uintptr_t>(w.data) % 16 != 0) {
    return false;
  }
  return groups == 1 || (w.out_features / groups) % 16 == 0;  // a warp's features in one group
}

bool dense_bf16_tc_applies(const DeviceWeight& w) {
  // The heads (>= 16K outputs), and from kDenseTcLinearMinOutputs outputs in whole 128-feature
  // tiles (the compressor's 512 x 5120: its row-group kernel at 1-8 rows beats the fp32 octets,
  // and its wgmma tiles at many rows the register-tiled fp32 kernel; docs/benchmarks.md,
  // session 24). Fewer outputs (the router, the indexer's products) keep the fp32 kernels: the
  // router's top-k should not move with a summation order.
  if (w.out_features >= 16384) return dense_bf16_tc_supports(w, 1);
  return w.out_features >= kDenseTcLinearMinOutputs && dense_bf16_tc_tiled_supports(w, 1);
}

bool dense_bf16_tc_tiled_supports(const DeviceWeight& w, int groups) {
  // A CTA's 128 features must read one group's slice of x.
  return dense_bf16_tc_supports(w, groups) &&
         (groups == 1 || (w.out_features / groups) % kTileF == 0);
}

cudaError_t dense_bf16_tc(const uint16_t* x,
                          int64_t rows,
                          const DeviceWeight& w,
                          int groups,
                          float* y,
                          bool round_bf16,
                          cudaStream_t s,
                          DenseTcKernel kernel) {
  if (rows <= 0) return rows == 0 ? cudaSuccess : cudaErrorInvalidValue;
  if (!dense_bf16_tc_supports(w, groups) || reinterpret_cast<uintptr_t>(x) % 16 != 0) {
    return cudaErrorInvalidValue;
  }
  const int splits = dense_bf16_tc_k_parts(w);
  const bool tiled_ok = dense_bf16_tc_tiled_supports(w, groups);
  const bool force_wgmma = kernel == DenseTcKernel::kWgmma || kernel == DenseTcKernel::kWgmmaWide ||
                           kernel == DenseTcKernel::kWgmmaDrain;
  const bool force_tile = force_wgmma || kernel == DenseTcKernel::kSharedTile ||
                          kernel == DenseTcKernel::kSharedTileWide;
  if (force_tile && !tiled_ok) return cudaErrorInvalidValue;
  // The wgmma kernel gives the shared tile's bits too (dense_bf16_wgmma.cu); on sm_90 it takes
  // the shared tile's many-row calls (measured: docs/benchmarks.md, "headwg": the head from 64
  // rows, wo_a from 32).
  const int64_t wgmma_rows =
      w.out_features >= kDenseTcTiledMinOutputs ? kDenseTcWgmmaMinRows : kDenseTcWgmmaMinRowsFew;
  if (force_wgmma || (kernel == DenseTcKernel::kAuto && tiled_ok && rows >= wgmma_rows &&
                      dense_bf16_wgmma_available())) {
    return dense_bf16_wgmma(x, rows, w, groups, splits, y, round_bf16, s,
                            kernel == DenseTcKernel::kWgmmaWide,
                            kernel == DenseTcKernel::kWgmmaDrain);
  }
  // Both kernels give the same bits, so the choice may depend on host-known sizes. Measured on
  // the H200 (docs/benchmarks.md): the shared tile wins at every row count once its feature
  // tiles fill the device (the head: 0.35 vs 0.55 ms at 1 row), and from 16 rows on for wo_a
  // (64 feature tiles; the row groups keep more weight bytes in flight below that: 0.037 vs 0.039
  // ms at 8 rows, 0.053 vs 0.039 at 16).
  // (Below the wgmma rows, a product of few feature tiles keeps the row groups: the compressor's
  // 512 x 5120 at 16 rows took 38.7 us there and 47.9 in the shared tile's 4 CTAs.)
  const bool tiled =
      force_tile || (kernel == DenseTcKernel::kAuto && tiled_ok &&
                     ((rows >= kDenseTcTiledMinRows && w.out_features >= kTiledMinFeatures) ||
                      w.out_features >= kDenseTcTiledMinOutputs));
  if (tiled) {
    // The 16-row tile up to 16 rows, the 32-row one up to 32 (unless the 64-row one is forced):
    // the same bits.
    if (kernel == DenseTcKernel::kSharedTileWide || rows > 32) {
      return launch_tiled<64, 3>(x, rows, w, groups, splits, y, round_bf16, s);
    }
    return rows <= 16 ? launch_tiled<16, 5>(x, rows, w, groups, splits, y, round_bf16, s)
                      : launch_tiled<32, 4>(x, rows, w, groups, splits, y, round_bf16, s);
  }
  const int64_t per_cta = kWarps / splits * 16;  // features per CTA
  const int64_t ctas = (w.out_features + per_cta - 1) / per_cta;
  pdl::launch_dependent(rows <= 8 ? dense_bf16_tc_kernel<1> : dense_bf16_tc_kernel<kTokGroups>,
                        dim3(static_cast<unsigned>(ctas)), dim3(kWarps * 32), 0, s, x, rows,
                        reinterpret_cast<const uint16_t*>(w.data), w.out_features, w.in_features,
                        splits, w.out_features / groups, groups * w.in_features, y, round_bf16);
  return cudaGetLastError();
}

cudaError_t dense_bf16_tc(const uint16_t* x,
                          int64_t rows,
                          const DeviceWeight& w,
                          int groups,
                          float* y,
                          bool round_bf16,
                          cudaStream_t s) {
  return dense_bf16_tc(x, rows, w, groups, y, round_bf16, s, DenseTcKernel::kAuto);
}

}  // namespace di::backend::cuda
