// The mix products of hc_mixes for many rows. Each output is kernels::dot_f32 over hc * dim
// (20,480 at the V4.1 shape) values: eight lane chains of n / 8 dependent adds (lane j: products
// j, j + 8, ... in order, each a rounded multiply then a rounded add), combine_lanes, then the tail
// in order. No split may shorten a chain, and the multiply/add pairs are fixed by the contract, so
// the work is to keep the CUDA cores issuing those pairs and little else.
//
// Register tiles: thread (output group, row group, lane j) runs lane j's chains for RT rows x OT
// outputs (RT * OT independent chains), so per four steps it loads RT + OT 16-byte vectors from
// shared memory for 8 RT OT arithmetic instructions. A block takes RG * RT rows and up to FG
// groups of OT fn outputs (blockIdx.y picks which), plus, in the blocks of y == 0, one more group
// for the sums of squares (its first slot; its products are x * x). The block stages
// chunks of its rows of x and fn in shared memory *by lane* (value k of a chunk at [k % 8][k / 8],
// so one 16-byte load holds four consecutive steps of a chain): 16-byte global loads into
// registers issued before the current chunk's arithmetic, stored after it (double-buffered, one
// barrier a chunk). fn is re-read from L2 once per block (per 16 rows at prefill sizes).
#include <algorithm>
#include <cstdint>

#include "backend/cuda/device_numeric.cuh"
#include "backend/cuda/grid_dependency.cuh"
#include "backend/cuda/hc_mix_rows.h"
#include "backend/cuda/lane_chain.cuh"

namespace di::backend::cuda {

namespace {

constexpr int kMaxOutputs = 96;  // mix + 1 for hc <= 8 is at most 81

__device__ __forceinline__ float step(float acc, float a, float b) {
  return __fadd_rn(acc, __fmul_rn(a, b));
}

// RT rows x OT outputs a thread, RG row groups and FG fn output groups a block, staged chunks of
// CH values (a multiple of 128).
template <int RT, int OT, int RG, int FG, int CH>
struct Tile {
  static constexpr int kRT = RT, kOT = OT, kRG = RG;
  static constexpr int kChunk = CH;
  static constexpr int kStride = CH / 8 + 4;    // floats per lane row: 16-byte aligned, 4 mod 16
  static constexpr int kLaneRow = 8 * kStride;  // floats per staged row of a chunk
  static constexpr int kRows = RG * RT;         // rows per block
  static constexpr int kFnGroups = FG;
  static constexpr int kFnOutputs = FG * OT;  // fn outputs per block
  static constexpr int kThreads = (FG + 1) * RG * 8;
  static constexpr int kStagedRows = kRows + kFnOutputs;
  static constexpr int kStageFloats = kStagedRows * kLaneRow;
  static constexpr int kVectors = kStagedRows * kChunk / 4;  // 16-byte loads per chunk
  static constexpr int kLoads = (kVectors + kThreads - 1) / kThreads;
};

// One chunk's 16-byte loads of this thread: vector e = t + i * threads is row e / 64 (the block's x
// rows, then its fn rows), values 4 (e % 64) .. + 3; zeros past the rows or past n.
template <class T>
struct ChunkLoads {
  float4 v[T::kLoads];

  __device__ __forceinline__ void load(const float* x,
                                       int64_t r0,
                                       int64_t rows,
                                       int64_t hc_dim,
                                       const float* fn_rows,
                                       int nf,
                                       int64_t c0,
                                       int n,
                                       bool vec) {
#pragma unroll
    for (int i = 0; i < T::kLoads; ++i) {
      const int e = static_cast<int>(threadIdx.x) + i * T::kThreads;
      const int row = e / (T::kChunk / 4), k = 4 * (e % (T::kChunk / 4));
      const float* src = nullptr;
      if (e < T::kVectors && k < n) {
        if (row < T::kRows) {
          if (r0 + row < rows) src = x + (r0 + row) * hc_dim + c0 + k;
        } else if (row - T::kRows < nf) {
          src = fn_rows + static_cast<int64_t>(row - T::kRows) * hc_dim + c0 + k;
        }
      }
      // `vec`: x and fn 16-byte aligned and hc_dim % 4 == 0 (else four scalar loads).
      v[i] = src ? (vec ? __ldg(reinterpret_cast<const float4*>(src))
                        : make_float4(src[0], src[1], src[2], src[3]))
                 : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
  }

  // Value k of a row goes to lane k % 8, step k / 8. A warp's 32 threads store 128 consecutive
  // values; with T::kStride = 4 mod 16 the 32 words of each of the four stores are in 32 banks.
  __device__ __forceinline__ void store(float* buf) const {
#pragma unroll
    for (int i = 0; i < T::kLoads; ++i) {
      const int e = static_cast<int>(threadIdx.x) + i * T::kThreads;
      if (e >= T::kVectors) break;
      const int row = e / (T::kChunk / 4), k = 4 * (e % (T::kChunk / 4));
      float* d = buf + row * T::kLaneRow + (k % 8) * T::kStride + k / 8;
      d[0] = v[i].x;
      d[T::kStride] = v[i].y;
      d[2 * T::kStride] = v[i].z;
      d[3 * T::kStride] = v[i].w;
    }
  }
};

// Steps [0, steps) of the thread's chains over a staged chunk. `xs`: lane row of the thread's
// first x row; `ws`: of its first fn row. Squares: one output (slot 0), each row's x * x.
template <class T, bool Squares>
__device__ __forceinline__ void chunk_steps(float (&acc)[T::kRT][T::kOT],
                                            const float* xs,
                                            const float* ws,
                                            int steps) {
  constexpr int RT = T::kRT, OT = T::kOT;
  int s = 0;
  for (; s + 4 <= steps; s += 4) {
    float4 w4[OT];
    if constexpr (!Squares) {
#pragma unroll
      for (int o = 0; o < OT; ++o)
        w4[o] = *reinterpret_cast<const float4*>(ws + o * T::kLaneRow + s);
    }
#pragma unroll
    for (int r = 0; r < RT; ++r) {
      const float4 a = *reinterpret_cast<const float4*>(xs + r * T::kLaneRow + s);
      if constexpr (Squares) {
        acc[r][0] = step(step(step(step(acc[r][0], a.x, a.x), a.y, a.y), a.z, a.z), a.w, a.w);
      } else {
#pragma unroll
        for (int o = 0; o < OT; ++o) {
          acc[r][o] = step(step(step(step(acc[r][o], a.x, w4[o].x), a.y, w4[o].y), a.z, w4[o].z),
                           a.w, w4[o].w);
        }
      }
    }
  }
  for (; s < steps; ++s) {
#pragma unroll
    for (int r = 0; r < RT; ++r) {
      const float a = xs[r * T::kLaneRow + s];
      if constexpr (Squares) {
        acc[r][0] = step(acc[r][0], a, a);
      } else {
#pragma unroll
        for (int o = 0; o < OT; ++o) acc[r][o] = step(acc[r][o], a, ws[o * T::kLaneRow + s]);
      }
    }
  }
}

template <class T>
__global__ void __launch_bounds__(T::kThreads) hc_mix_rows_kernel(const float* x,
                                                                  int64_t rows,
                                                                  int64_t hc_dim,
                                                                  const float* fn,
                                                                  int mix,
                                                                  float* raw,
                                                                  float* sum_squares,
                                                                  bool round_out,
                                                                  bool vec) {
  constexpr int RT = T::kRT, OT = T::kOT, RG = T::kRG;
  extern __shared__ float4 smem4[];
  float* smem = reinterpret_cast<float*>(smem4);
  const int t = static_cast<int>(threadIdx.x), j = t % 8, rg = (t / 8) % RG, og = t / (8 * RG);
  const int f0 = static_cast<int>(blockIdx.y) * T::kFnOutputs;  // the block's first fn output
  const int nf = min(T::kFnOutputs, mix - f0);                  // ... and how many it has
  const bool squares = og == T::kFnGroups;
  const bool with_squares = sum_squares != nullptr;
  const bool active = squares ? blockIdx.y == 0 && with_squares : og * OT < nf;
  const int64_t r0 = int64_t{blockIdx.x} * T::kRows;
  const int64_t full = hc_dim / 8 * 8;
  const float* fn_rows = fn + static_cast<int64_t>(f0) * hc_dim;
  const int chunks = static_cast<int>((full + T::kChunk - 1) / T::kChunk);
  auto chunk_len = [&](int c) {
    const int64_t c0 = int64_t{c} * T::kChunk;
    return static_cast<int>(full - c0 < T::kChunk ? full - c0 : T::kChunk);
  };

  pdl::enter_dependent_grid();
  ChunkLoads<T> loads;
  if (chunks > 0) {
    loads.load(x, r0, rows, hc_dim, fn_rows, nf, 0, chunk_len(0), vec);
    loads.store(smem);
  }
  __syncthreads();
  float acc[RT][OT];
#pragma unroll
  for (int r = 0; r < RT; ++r) {
#pragma unroll
    for (int o = 0; o < OT; ++o) acc[r][o] = 0.0f;
  }
  for (int c = 0; c < chunks; ++c) {
    const bool next = c + 1 < chunks;
    if (next) {
      loads.load(x, r0, rows, hc_dim, fn_rows, nf, int64_t{c + 1} * T::kChunk, chunk_len(c + 1),
                 vec);
    }
    if (active) {
      const float* buf = smem + (c % 2) * T::kStageFloats + j * T::kStride;
      const float* xs = buf + rg * RT * T::kLaneRow;
      if (squares) {
        chunk_steps<T, true>(acc, xs, xs, chunk_len(c) / 8);
      } else {
        chunk_steps<T, false>(acc, xs, buf + (T::kRows + og * OT) * T::kLaneRow, chunk_len(c) / 8);
      }
    }
    // The other buffer was last read in chunk c - 1, before the barrier that ended it.
    if (next) loads.store(smem + ((c + 1) % 2) * T::kStageFloats);
    __syncthreads();
  }
  // The eight lanes of each (row, output slot) meet in shared memory (the buffers are free:
  // the loop ended with a barrier). Slot og * OT + o; the squares' slot is kFnOutputs.
  constexpr int kSlots = T::kFnOutputs + 1;
  float* lanes = smem;
  if (active) {
#pragma unroll
    for (int r = 0; r < RT; ++r) {
#pragma unroll
      for (int o = 0; o < (squares ? 1 : OT); ++o) {
        const int slot = squares ? T::kFnOutputs : og * OT + o;
        lanes[((rg * RT + r) * kSlots + slot) * 8 + j] = acc[r][o];
      }
    }
  }
  __syncthreads();
  for (int p = t; p < T::kRows * kSlots; p += T::kThreads) {
    const int row = p / kSlots, slot = p % kSlots;
    const bool is_squares = slot == T::kFnOutputs;
    if (r0 + row >= rows || (is_squares ? blockIdx.y != 0 || !with_squares : slot >= nf)) continue;
    const float* xr = x + (r0 + row) * hc_dim;
    const float* wr = is_squares ? xr : fn_rows + static_cast<int64_t>(slot) * hc_dim;
    float s = combine_lanes(lanes + p * 8);
    for (int64_t k = full; k < hc_dim; ++k) s = step(s, xr[k], wr[k]);
    if (is_squares) {
      sum_squares[r0 + row] = s;
    } else {
      raw[(r0 + row) * mix + f0 + slot] = round_out ? round_bf16(s) : s;
    }
  }
}

template <class T>
cudaError_t launch(const float* x,
                   int64_t rows,
                   int64_t hc_dim,
                   const float* fn,
                   int mix,
                   float* raw,
                   float* sum_squares,
                   bool round_out,
                   cudaStream_t s) {
  const bool vec = hc_dim % 4 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(fn) % 16 == 0;
  const int64_t row_blocks = (rows + T::kRows - 1) / T::kRows;
  if (row_blocks > 0x7fffffff) return cudaErrorInvalidValue;
  const size_t stage = sizeof(float) * 2 * static_cast<size_t>(T::kStageFloats);
  const size_t lanes = sizeof(float) * static_cast<size_t>(T::kRows * (T::kFnOutputs + 1) * 8);
  const size_t bytes = std::max(stage, lanes);
  cudaError_t e = cudaFuncSetAttribute(
      hc_mix_rows_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
  if (e != cudaSuccess) return e;
  const dim3 grid(static_cast<unsigned>(row_blocks),
                  static_cast<unsigned>((mix + T::kFnOutputs - 1) / T::kFnOutputs));
  e = pdl::launch_dependent(hc_mix_rows_kernel<T>, grid, dim3(T::kThreads), bytes, s, x, rows,
                            hc_dim, fn, mix, raw, sum_squares, round_out, vec);
  return e != cudaSuccess ? e : cudaGetLastError();
}

}  // namespace

bool hc_mix_rows_supports(int mix) {
  return mix >= 1 && mix + 1 <= kMaxOutputs;
}

cudaError_t hc_mix_rows(const float* x,
                        int64_t rows,
                        int64_t hc_dim,
                        const float* fn,
                        int mix,
                        float* raw,
                        float* sum_squares,
                        bool round_out,
                        cudaStream_t s) {
  if (rows == 0) return cudaSuccess;
  if (!hc_mix_rows_supports(mix)) return cudaErrorInvalidValue;
  // 4 rows x 4 outputs a thread (16-row blocks) from 2,048 rows, 2 rows from 1,024; below, one
  // row x 2 outputs (4-row blocks, two output halves: 256 rows make 128 blocks of 7 warps) and
  // 512-value chunks, a quarter as many load round trips per block.
  if (rows >= 2048) {
    return launch<Tile<4, 4, 4, 6, 128>>(x, rows, hc_dim, fn, mix, raw, sum_squares, round_out, s);
  }
  if (rows >= 1024) {
    return launch<Tile<2, 4, 4, 6, 128>>(x, rows, hc_dim, fn, mix, raw, sum_squares, round_out, s);
  }
  return launch<Tile<1, 2, 4, 6, 512>>(x, rows, hc_dim, fn, mix, raw, sum_squares, round_out, s);
}

}  // namespace di::backend::cuda
