// Session 7's hc_mix_rows (a block of two rows, every output of them, x staged in shared memory
// in row order and fn read from L2 by each thread per step), kept as the baseline that
// `cuda_kernels_bench --mix-rows` times next to the current kernel
// (src/backend/cuda/hc_mix_rows.cu) in the same run. Same outputs, bit for bit (the bench compares
// the hashes).
#include "backend/cuda/grid_dependency.cuh"
#include "backend/cuda/lane_chain.cuh"
#include "cuda/mix_rows_previous.h"

namespace di::bench {

using backend::cuda::combine_lanes;

namespace {

constexpr int kRows = 2;         // rows per block (128 blocks at batch 256)
constexpr int kChunk = 2048;     // staged values per row, a multiple of 8
constexpr int kMaxOutputs = 96;  // mix + 1 for hc <= 8 is at most 81
constexpr int kAhead = 32;       // chain steps whose fn loads a thread issues at once
constexpr int kStageLoads = 8;   // x values a thread loads at once when staging a chunk

__global__ void hc_mix_rows_kernel(const float* x,
                                   int64_t rows,
                                   int64_t hc_dim,
                                   const float* fn,
                                   int mix,
                                   float* raw,
                                   float* sum_squares) {
  backend::cuda::pdl::enter_dependent_grid();
  __shared__ float xs[kRows][kChunk];
  __shared__ float lanes[kRows][kMaxOutputs][8];
  const int t = static_cast<int>(threadIdx.x), o = t / 8, j = t % 8;
  const bool active = o <= mix;
  const int64_t r0 = int64_t{blockIdx.x} * kRows;
  const int nr = static_cast<int>(rows - r0 < kRows ? rows - r0 : kRows);
  const int64_t full = hc_dim / 8 * 8;
  const float* w = active && o < mix ? fn + static_cast<int64_t>(o) * hc_dim : nullptr;
  float acc[kRows];
#pragma unroll
  for (int rr = 0; rr < kRows; ++rr) acc[rr] = 0.0f;
  for (int64_t c0 = 0; c0 < full; c0 += kChunk) {
    const int n = static_cast<int>(full - c0 < kChunk ? full - c0 : kChunk);
    __syncthreads();  // the previous chunk's readers are done
    // The chunk of x: all of a thread's loads issued before its stores (a plain loop waited for
    // each load in turn: about half the kernel's time at 256 rows).
    for (int i0 = t; i0 < kRows * kChunk; i0 += kStageLoads * static_cast<int>(blockDim.x)) {
      float v[kStageLoads];
#pragma unroll
      for (int u = 0; u < kStageLoads; ++u) {
        const int i = i0 + u * static_cast<int>(blockDim.x), rr = i / kChunk, k = i % kChunk;
        v[u] = rr < nr && k < n ? x[(r0 + rr) * hc_dim + c0 + k] : 0.0f;
      }
#pragma unroll
      for (int u = 0; u < kStageLoads; ++u) {
        const int i = i0 + u * static_cast<int>(blockDim.x);
        if (i < kRows * kChunk) xs[i / kChunk][i % kChunk] = v[u];
      }
    }
    __syncthreads();
    if (!active) continue;
    // Lane j's steps k = j, j + 8, ... of the chunk, in order; fn's loads for kAhead steps are
    // issued before their adds (the chain waited on an L2 load every eighth step before).
    const int steps = n / 8;
    for (int s0 = 0; s0 < steps; s0 += kAhead) {
      float wv[kAhead];
#pragma unroll
      for (int u = 0; u < kAhead; ++u) {
        wv[u] = w && s0 + u < steps ? __ldg(w + c0 + j + 8 * (s0 + u)) : 0.0f;
      }
#pragma unroll
      for (int u = 0; u < kAhead; ++u) {
        if (s0 + u >= steps) break;
        const int k = j + 8 * (s0 + u);
#pragma unroll
        for (int rr = 0; rr < kRows; ++rr) {
          if (rr < nr) {
            const float xv = xs[rr][k];
            acc[rr] = __fadd_rn(acc[rr], __fmul_rn(xv, w ? wv[u] : xv));
          }
        }
      }
    }
  }
  if (active) {
#pragma unroll
    for (int rr = 0; rr < kRows; ++rr) lanes[rr][o][j] = acc[rr];
  }
  __syncthreads();
  if (!active || j != 0) return;
  for (int rr = 0; rr < nr; ++rr) {
    const float* xr = x + (r0 + rr) * hc_dim;
    float s = combine_lanes(lanes[rr][o]);
    for (int64_t k = full; k < hc_dim; ++k) s = __fadd_rn(s, __fmul_rn(xr[k], w ? w[k] : xr[k]));
    if (o < mix) {
      raw[(r0 + rr) * mix + o] = s;
    } else {
      sum_squares[r0 + rr] = s;
    }
  }
}

}  // namespace

cudaError_t hc_mix_rows_previous(const float* x,
                                 int64_t rows,
                                 int64_t hc_dim,
                                 const float* fn,
                                 int mix,
                                 float* raw,
                                 float* sum_squares,
                                 cudaStream_t s) {
  if (rows == 0) return cudaSuccess;
  if (mix < 1 || mix + 1 > kMaxOutputs || (rows + kRows - 1) / kRows > 0x7fffffff) {
    return cudaErrorInvalidValue;
  }
  const int threads = (8 * (mix + 1) + 31) / 32 * 32;
  const auto blocks = static_cast<unsigned>((rows + kRows - 1) / kRows);
  backend::cuda::pdl::launch_dependent(hc_mix_rows_kernel, dim3(blocks), dim3(threads), 0, s, x,
                                       rows, hc_dim, fn, mix, raw, sum_squares);
  return cudaGetLastError();
}

}  // namespace di::bench
