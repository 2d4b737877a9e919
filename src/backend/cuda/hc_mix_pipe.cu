// The mix products of few rows (kernels::hc_mixes_token's (2+hc)*hc dot products and the sum of
// squares, 20,480 wide at V4.1) as a producer/consumer pipeline. Why: each is dot_f32's eight
// dependent chains of hc_dim / 8 adds (5.2 us at V4.1), and the staged kernel (hc_mixes.cu)
// first loads all of x and fn, multiplies into a by-lane buffer, and only then runs the chains,
// so the load round trips add to the chain. Here:
//  - fn is a weight, so its copies into shared memory (cp.async) are issued before the kernel
//    waits for the previous grid (programmatic dependent launch): they land under that kernel;
//  - producer warps (1..) own chunks of 512 elements (64 steps per lane); each loads its x with
//    16-byte loads (two or three chunks' worth in flight), multiplies with its fn, stores the
//    products in place, by lane, and arrives on the mbarrier of the chunk's group of 8;
//  - warp 0's lanes 0-7 run the chains group after group as the barriers complete, so the chain
//    starts after the first group, not after the last, and waits 5 times at V4.1, not 40.
// H200, one V4.1 row: 6.9 us against the staged kernel's 15.5 (23.3 with fn out of the L2).
// The bits are the staged kernel's: lane j adds products j, j + 8, ... in order, each rounded,
// then dot_f32's combine and the tail in order.
#include "backend/cuda/grid_dependency.cuh"
#include "backend/cuda/hc_mix_pipe.h"
#include "backend/cuda/lane_chain.cuh"
#include "backend/cuda/mbarrier.cuh"

namespace di::backend::cuda {

namespace {

constexpr int kChunkSteps = 64;               // products per lane in one chunk
constexpr int kChunk = 8 * kChunkSteps;       // elements of x and fn per chunk
constexpr int kLaneRow = kChunkSteps + 4;     // floats: 4 mod 32, see by_lane
constexpr int kRegion = 8 * kLaneRow;         // floats of shared memory per chunk
constexpr int kVecPerLane = kChunk / 4 / 32;  // a producer lane's 16-byte pieces per chunk
constexpr int kMaxChunks = 64;                // hc_dim <= 32,768: 136 KB of shared memory
constexpr int kGroup = 8;                     // chunks per mbarrier (one consumer wait)

// Region-local float index of lane j's step t (t < kChunkSteps). Rows of 68 floats: the eight
// chain lanes' 16-byte loads of the same steps and a producer warp's 32 scalar stores each touch
// 32 distinct banks, and a lane's loads within a chunk are one base plus constant offsets.
__device__ __forceinline__ int by_lane(int j, int t) {
  return j * kLaneRow + t;
}

__device__ __forceinline__ void copy16_async(float* dst, const float* src) {
  const uint32_t d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src) : "memory");
}

__device__ __forceinline__ float4 mul4(float4 a, float4 b) {
  return make_float4(__fmul_rn(a.x, b.x), __fmul_rn(a.y, b.y), __fmul_rn(a.z, b.z),
                     __fmul_rn(a.w, b.w));
}

// Producer warp `w` (1 .. kProducers) of the block: chunks w - 1, w - 1 + kProducers, ..., their
// x loaded kBatch chunks at a time (all of a batch's 16-byte loads in flight at once).
template <int kProducers, int kBatch, int kProbe>
__device__ __forceinline__ void produce(const float* xr,
                                        const float* other,
                                        bool squares,
                                        int full,
                                        int chunks,
                                        float* buf,
                                        uint64_t* bars) {
  const int w = static_cast<int>(threadIdx.x / 32) - 1, lane = static_cast<int>(threadIdx.x % 32);
  if (kProbe >= 2) {  // bench probes without products
    pdl::enter_dependent_grid();
    return;
  }
  // fn before the grid dependency: a weight no kernel of the forward writes.
  if (!squares) {
    for (int c = w; c < chunks; c += kProducers) {
#pragma unroll
      for (int i = 0; i < kVecPerLane; ++i) {
        const int k = 128 * i + 4 * lane;
        if (c * kChunk + k < full) copy16_async(buf + c * kRegion + k, other + c * kChunk + k);
      }
    }
  }
  pdl::enter_dependent_grid();
  bool fn_landed = squares;
  for (int c0 = w; c0 < chunks; c0 += kBatch * kProducers) {
    float4 xv[kBatch][kVecPerLane];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
#pragma unroll
      for (int i = 0; i < kVecPerLane; ++i) {
        const int k = (c0 + b * kProducers) * kChunk + 128 * i + 4 * lane;
        xv[b][i] = k < full ? *reinterpret_cast<const float4*>(xr + k) : float4{0, 0, 0, 0};
      }
    }
    if (!fn_landed) {
      asm volatile("cp.async.wait_all;\n" ::: "memory");  // this lane's own copies
      fn_landed = true;
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int c = c0 + b * kProducers;
      if (c >= chunks) break;
      float* chunk = buf + c * kRegion;
      float4 p[kVecPerLane];
#pragma unroll
      for (int i = 0; i < kVecPerLane; ++i) {
        const int k = 128 * i + 4 * lane;
        const float4 f =
            squares
                ? xv[b][i]
                : (c * kChunk + k < full ? *reinterpret_cast<const float4*>(chunk + k) : xv[b][i]);
        p[i] = mul4(xv[b][i], f);
      }
      __syncwarp();  // every lane has read its fn before any lane overwrites the chunk
#pragma unroll
      for (int i = 0; i < kVecPerLane; ++i) {
        const int k = 128 * i + 4 * lane;  // k % 8 is 0 or 4: lanes 4 * (lane % 2) + q
        if (c * kChunk + k < full) {
          const int t = k >> 3, j = k & 7;
          chunk[by_lane(j, t)] = p[i].x;
          chunk[by_lane(j + 1, t)] = p[i].y;
          chunk[by_lane(j + 2, t)] = p[i].z;
          chunk[by_lane(j + 3, t)] = p[i].w;
        }
      }
      mbar::arrive(mbar::smem_u32(bars + c / kGroup));  // release: this lane's stores
    }
  }
}

__device__ __forceinline__ float add16(float l, const float4* v) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    l = __fadd_rn(l, v[i].x);
    l = __fadd_rn(l, v[i].y);
    l = __fadd_rn(l, v[i].z);
    l = __fadd_rn(l, v[i].w);
  }
  return l;
}

// Lane j's 64 adds of the chunk at r (its first 16 products already in a), loading the rest 16
// steps ahead and, last, the first 16 of the chunk at `next` into a.
__device__ __forceinline__ float chunk_adds(float l,
                                            const float4* r,
                                            const float4* next,
                                            float4 (&a)[4]) {
  float4 b[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) b[i] = r[4 + i];
  l = add16(l, a);
#pragma unroll
  for (int i = 0; i < 4; ++i) a[i] = r[8 + i];
  l = add16(l, b);
#pragma unroll
  for (int i = 0; i < 4; ++i) b[i] = r[12 + i];
  l = add16(l, a);
#pragma unroll
  for (int i = 0; i < 4; ++i) a[i] = next[i];
  return add16(l, b);
}

// Warp 0, lanes 0-7: lane j's chain over `steps` products, chunk by chunk. Waits are per group
// of kGroup chunks (a group's chunks complete together: their producers run side by side), and a
// group's chunks are one straight-line unrolled body: an mbarrier wait stalls the warp until its
// answer comes back, and a branch per chunk keeps the compiler from interleaving the next loads
// with the adds (the first version, one wait and branch per chunk, was slower than the staged
// kernel). kWait false (a bench probe) runs the adds alone.
template <bool kWait>
__device__ __forceinline__ float consume(const float* buf, int steps, const uint64_t* bars) {
  const int j = static_cast<int>(threadIdx.x);
  auto wait_group = [&](int c) {
    if (kWait) mbar::wait(mbar::smem_u32(bars + c / kGroup), 0);
  };
  auto row = [&](int c) {
    return reinterpret_cast<const float4*>(buf + c * kRegion + j * kLaneRow);
  };
  const int whole = steps / kChunkSteps;
  float l = 0;
  int c = 0;
  float4 a[4];
  if (whole > 0) {
    wait_group(0);
#pragma unroll
    for (int i = 0; i < 4; ++i) a[i] = row(0)[i];
  }
  for (; c + kGroup <= whole; c += kGroup) {
#pragma unroll
    for (int q = 0; q < kGroup; ++q) {
      const int n = c + q + 1 < whole ? c + q + 1 : c + q;
      if (q == kGroup - 1 && n != c + q) wait_group(n);
      l = chunk_adds(l, row(c + q), row(n), a);
    }
  }
  for (; c < whole; ++c) {  // the last group's chunks when it has fewer than kGroup
    l = chunk_adds(l, row(c), row(c + 1 < whole ? c + 1 : c), a);
  }
  // A short last chunk (fewer than 64 steps per lane).
  if (whole * kChunkSteps < steps) {
    wait_group(whole);
    const float* rest = buf + whole * kRegion + j * kLaneRow;
    for (int t = 0; t < steps - whole * kChunkSteps; ++t) l = __fadd_rn(l, rest[t]);
  }
  return l;
}

// Block (o - first, r): raw[r, o] = dot_f32(x[r], fn[o]) for o < mix, sum_squares[r] =
// dot_f32(x[r], x[r]) for o == mix. Two blocks fit an SM (registers and 82 KB of shared memory at
// V4.1), so 8 rows' 200 blocks are one wave on the H200's 132 SMs.
template <int kProducers, int kBatch, int kProbe>
__global__ void __launch_bounds__(32 * (1 + kProducers), 2) hc_mix_pipe_kernel(const float* x,
                                                                               int hc_dim,
                                                                               const float* fn,
                                                                               int mix,
                                                                               int first,
                                                                               float* raw,
                                                                               float* sum_squares) {
  extern __shared__ float4 smem4[];
  const int full = hc_dim / 8 * 8, steps = hc_dim / 8;
  const int chunks = (steps + kChunkSteps - 1) / kChunkSteps;
  float* buf = reinterpret_cast<float*>(smem4);
  uint64_t* bars = reinterpret_cast<uint64_t*>(buf + chunks * kRegion);
  const int o = first + static_cast<int>(blockIdx.x);
  const int64_t r = blockIdx.y;
  const float* xr = x + r * hc_dim;
  const bool squares = o == mix;
  const float* other = squares ? xr : fn + static_cast<int64_t>(o) * hc_dim;
  if (threadIdx.x == 0) {
    for (int g = 0; g * kGroup < chunks; ++g) {
      const int in_group = chunks - g * kGroup < kGroup ? chunks - g * kGroup : kGroup;
      mbar::init(mbar::smem_u32(bars + g), 32 * in_group);
    }
  }
  __syncthreads();
  if (threadIdx.x >= 32) {
    produce<kProducers, kBatch, kProbe>(xr, other, squares, full, chunks, buf, bars);
    return;
  }
  pdl::enter_dependent_grid();
  if (threadIdx.x >= 8) return;
  float l = 0;
  if constexpr (kProbe == 0) {
    l = consume<true>(buf, steps, bars);
  } else if constexpr (kProbe == 1) {
    for (int g = 0; g * kGroup < chunks; ++g) mbar::wait(mbar::smem_u32(bars + g), 0);
  } else if constexpr (kProbe == 2) {
    l = consume<false>(buf, steps, bars);
  }
  float v[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) v[i] = __shfl_sync(0xffu, l, i);
  if (threadIdx.x != 0) return;
  float s = combine_lanes(v);
  for (int k = full; k < hc_dim; ++k) s = __fadd_rn(s, __fmul_rn(xr[k], other[k]));
  if (squares) {
    sum_squares[r] = s;
  } else {
    raw[r * mix + o] = s;
  }
}

template <int kProducers, int kBatch, int kProbe = 0>
cudaError_t launch(const float* x,
                   int64_t rows,
                   int64_t hc_dim,
                   const float* fn,
                   int mix,
                   int first,
                   float* raw,
                   float* sum_squares,
                   cudaStream_t s) {
  const int64_t chunks = (hc_dim / 8 + kChunkSteps - 1) / kChunkSteps;
  const size_t smem = static_cast<size_t>(chunks * (kRegion * sizeof(float) + sizeof(uint64_t)));
  cudaError_t e =
      cudaFuncSetAttribute(hc_mix_pipe_kernel<kProducers, kBatch, kProbe>,
                           cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (e != cudaSuccess) return e;
  const dim3 grid(static_cast<unsigned>(mix + 1 - first), static_cast<unsigned>(rows));
  pdl::launch_dependent(hc_mix_pipe_kernel<kProducers, kBatch, kProbe>, grid,
                        dim3(32 * (1 + kProducers)), smem, s, x, static_cast<int>(hc_dim), fn, mix,
                        first, raw, sum_squares);
  return cudaGetLastError();
}

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

}  // namespace

bool hc_mix_pipe_supports(const float* x, int64_t rows, int64_t hc_dim, const float* fn) {
  return rows >= 0 && rows <= 65535 && hc_dim >= 0 && hc_dim % 4 == 0 &&
         hc_dim / 8 <= int64_t{kMaxChunks} * kChunkSteps && aligned16(x) &&
         (fn == nullptr || aligned16(fn));
}

cudaError_t hc_mix_products_pipelined(const float* x,
                                      int64_t rows,
                                      int64_t hc_dim,
                                      const float* fn,
                                      int mix,
                                      int first,
                                      float* raw,
                                      float* sum_squares,
                                      int warps,
                                      cudaStream_t s) {
  if (rows == 0) return cudaSuccess;
  if (mix < 1 || first < 0 || first > mix || !hc_mix_pipe_supports(x, rows, hc_dim, fn)) {
    return cudaErrorInvalidValue;
  }
  switch (warps) {
    case 8:
      return launch<7, 3>(x, rows, hc_dim, fn, mix, first, raw, sum_squares, s);
    case 16:
      return launch<15, 2>(x, rows, hc_dim, fn, mix, first, raw, sum_squares, s);
    default:
      return cudaErrorInvalidValue;
  }
}

cudaError_t hc_mix_pipe_probe(const float* x,
                              int64_t rows,
                              int64_t hc_dim,
                              const float* fn,
                              int mix,
                              float* raw,
                              float* sum_squares,
                              int probe,
                              cudaStream_t s) {
  if (rows == 0) return cudaSuccess;
  if (mix < 1 || !hc_mix_pipe_supports(x, rows, hc_dim, fn)) return cudaErrorInvalidValue;
  switch (probe) {
    case 1:
      return launch<15, 2, 1>(x, rows, hc_dim, fn, mix, 0, raw, sum_squares, s);
    case 2:
      return launch<15, 2, 2>(x, rows, hc_dim, fn, mix, 0, raw, sum_squares, s);
    case 3:
      return launch<15, 2, 3>(x, rows, hc_dim, fn, mix, 0, raw, sum_squares, s);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace di::backend::cuda
