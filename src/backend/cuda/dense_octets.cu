// BF16-weight products with fp32 activations at 1-8 rows, bitwise equal to dot_f32 (and so to
// dense_staged): eight threads (an octet) own the eight lane chains of one (output, row); a warp
// holds four outputs of one row, a block four outputs for all its rows (a warp per row).
// Why: dense_staged's block per (output, row) runs its eight chains on eight of 256 threads and
// loads x and the weight row once per (output, row); here every thread runs a chain, the block's
// four weight rows are copied to shared memory at once (cp.async, issued before the wait on the
// previous kernel: nothing writes weights during a forward) and serve all rows.
// A chain's operands: thread i of an octet multiplies the eight elements of group g (k = 8g ..
// 8g+7: one 16-byte weight load, two of x) and writes them to a per-warp tile; thread j then reads
// column j, lane j's products of eight consecutive groups, in group order. Tiles are double
// buffered so a round's products are written while the previous round's chain runs.
#include "backend/cuda/device_numeric.cuh"
#include "backend/cuda/grid_dependency.cuh"
#include "backend/cuda/kernels.h"

namespace di::backend::cuda {

namespace {

constexpr int kOctetOutputs = 4;  // outputs per block (octets per warp)
constexpr int kTiles = 4;         // 8 x 8 tiles per octet per round: 32 chain steps a round
// Floats of one octet's tiles in one buffer, padded by 8 so that the four octets' column reads
// (thread j of octet q at q * kOctetFloats + 8 i + j) fall in 32 distinct banks.
constexpr int kOctetFloats = kTiles * 64 + 8;
constexpr int kWarpTileFloats = 2 * kOctetOutputs * kOctetFloats;  // both buffers
constexpr int kMaxRows = 8;

// x of a round: 32 groups x 8 floats per row, in a ring of kRing rounds per warp.
constexpr int kRoundFloats = 8 * 8 * kTiles;
constexpr int kRing = 8;  // rounds of x in flight: a round's chain (~150 cycles) x 8 > L2 latency

struct XGroups {
  float4 lo[kTiles], hi[kTiles];
};

// Thread `lane` of the row's warp copies group r * 32 + lane of x into the ring (none past the
// last group) and commits, so that every round is one cp.async group of every thread.
__device__ __forceinline__ void copy_x_round(
    const float* xr, int64_t groups, int64_t r, int lane, float* ring) {
  const int64_t g = r * (8 * kTiles) + lane;
  if (g < groups) {
    float* dst = ring + (r % kRing) * kRoundFloats + 8 * lane;
    const uint32_t d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(xr + 8 * g)
                 : "memory");
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d + 16), "l"(xr + 8 * g + 4)
                 : "memory");
  }
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

// The x that thread i multiplies in round r (tile t: group r * 32 + 8 t + i), from the ring.
__device__ __forceinline__ XGroups ring_x(const float* ring, int64_t r, int i) {
  XGroups v;
  const float4* slot = reinterpret_cast<const float4*>(ring + (r % kRing) * kRoundFloats);
#pragma unroll
  for (int t = 0; t < kTiles; ++t) {
    v.lo[t] = slot[2 * (8 * t + i)];
    v.hi[t] = slot[2 * (8 * t + i) + 1];
  }
  return v;
}

__device__ __forceinline__ float lo_bf16(uint32_t u) {
  return __uint_as_float(u << 16);
}
__device__ __forceinline__ float hi_bf16(uint32_t u) {
  return __uint_as_float(u & 0xffff0000u);
}

// Thread i's products of round r into its rows of the octet's tiles (`tile` = the octet's
// buffer): tile t, row i = the eight products of group r * 8 * kTiles + 8 t + i.
__device__ __forceinline__ void write_products(
    const uint16_t* wrow, int64_t groups, int64_t r, int i, const XGroups& x, float* tile) {
#pragma unroll
  for (int t = 0; t < kTiles; ++t) {
    const int64_t g = r * (8 * kTiles) + 8 * t + i;
    const uint4 w = g < groups ? reinterpret_cast<const uint4*>(wrow)[g] : make_uint4(0, 0, 0, 0);
    float4 a, b;
    a.x = __fmul_rn(x.lo[t].x, lo_bf16(w.x));
    a.y = __fmul_rn(x.lo[t].y, hi_bf16(w.x));
    a.z = __fmul_rn(x.lo[t].z, lo_bf16(w.y));
    a.w = __fmul_rn(x.lo[t].w, hi_bf16(w.y));
    b.x = __fmul_rn(x.hi[t].x, lo_bf16(w.z));
    b.y = __fmul_rn(x.hi[t].y, hi_bf16(w.z));
    b.z = __fmul_rn(x.hi[t].z, lo_bf16(w.w));
    b.w = __fmul_rn(x.hi[t].w, hi_bf16(w.w));
    float4* row = reinterpret_cast<float4*>(tile + t * 64 + 8 * i);
    row[0] = a;
    row[1] = b;
  }
}

// Shared memory: the four weight rows, then per row (warp) its x ring and its product tiles.
size_t octet_smem_bytes(int64_t rows, int64_t K) {
  return static_cast<size_t>(kOctetOutputs * K * 2) +
         static_cast<size_t>(rows) * (kRing * kRoundFloats + kWarpTileFloats) * sizeof(float);
}

// grid.x: blocks of kOctetOutputs outputs; block: 32 threads per row (warp m = row m).
__global__ void dense_octets_kernel(
    const float* x, int64_t K, const uint16_t* w, int64_t N, float* y, bool round_out) {
  extern __shared__ float4 smem4[];
  uint16_t* wsh = reinterpret_cast<uint16_t*>(smem4);
  float* per_row = reinterpret_cast<float*>(wsh + kOctetOutputs * K);
  const int64_t n0 = int64_t{blockIdx.x} * kOctetOutputs;
  const int64_t block_rows = N - n0 < kOctetOutputs ? N - n0 : kOctetOutputs;
  // The block's weight rows (contiguous in w), every 16-byte copy in flight at once, before the
  // wait on the previous kernel.
  {
    const int64_t chunks = block_rows * K / 8;
    const uint4* src = reinterpret_cast<const uint4*>(w + n0 * K);
    for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
      const uint32_t d = static_cast<uint32_t>(__cvta_generic_to_shared(wsh + 8 * c));
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src + c) : "memory");
    }
  }
  asm volatile("cp.async.commit_group;\n" ::: "memory");
  pdl::enter_dependent_grid();
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int q = lane / 8, i = lane % 8;  // octet (output n0 + q); thread i of it (later lane i)
  const int64_t m = warp;
  const float* xr = x + m * K;
  const uint16_t* wrow = wsh + q * K;
  float* ring = per_row + warp * (kRing * kRoundFloats + kWarpTileFloats);
  float* warp_tiles = ring + kRing * kRoundFloats;
  const int64_t groups = K / 8, rounds = (groups + 8 * kTiles - 1) / (8 * kTiles);
  for (int r = 0; r < kRing; ++r) copy_x_round(xr, groups, r, lane, ring);
  // Pending cp.async groups: the weights, then x rounds 0 .. kRing - 1; waiting for all but the
  // newest kRing - 1 completes the weights and round 0.
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kRing - 1) : "memory");
  __syncthreads();
  write_products(wrow, groups, 0, i, ring_x(ring, 0, i), warp_tiles + q * kOctetFloats);
  __syncwarp();
  copy_x_round(xr, groups, kRing, lane, ring);
  float l = 0.0f;
  for (int64_t r = 0; r < rounds; ++r) {
    // Pending: x rounds r + 1 .. r + kRing.
    if (r + 1 < rounds) {
      asm volatile("cp.async.wait_group %0;\n" ::"n"(kRing - 1) : "memory");
      __syncwarp();
      write_products(wrow, groups, r + 1, i, ring_x(ring, r + 1, i),
                     warp_tiles + ((r + 1) & 1) * kOctetOutputs * kOctetFloats + q * kOctetFloats);
    }
    const float* tile = warp_tiles + (r & 1) * kOctetOutputs * kOctetFloats + q * kOctetFloats;
#pragma unroll
    for (int t = 0; t < kTiles; ++t) {
#pragma unroll
      for (int s = 0; s < 8; ++s) {
        if (r * (8 * kTiles) + 8 * t + s < groups) l = __fadd_rn(l, tile[t * 64 + 8 * s + i]);
      }
    }
    __syncwarp();
    copy_x_round(xr, groups, r + 1 + kRing, lane, ring);  // into round r + 1's slot, now read
  }
  asm volatile("cp.async.wait_all;\n" ::: "memory");
  // dot_f32's combine ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)) across the octet (fp32 addition is
  // commutative, so the partner's order does not matter); thread 0 of the octet holds it.
  l = __fadd_rn(l, __shfl_xor_sync(0xffffffffu, l, 1));
  l = __fadd_rn(l, __shfl_xor_sync(0xffffffffu, l, 2));
  l = __fadd_rn(l, __shfl_xor_sync(0xffffffffu, l, 4));
  if (i == 0 && q < block_rows) y[m * N + n0 + q] = round_out ? round_bf16(l) : l;
}

}  // namespace

bool dense_octets_applies(int64_t rows, const DeviceWeight& w) {
  return w.format == WeightFormat::kBF16 && rows >= 1 && rows <= kMaxRows && w.out_features >= 1 &&
         w.out_features / kOctetOutputs < (int64_t{1} << 30) && w.in_features >= 8 &&
         w.in_features % 8 == 0 && octet_smem_bytes(rows, w.in_features) <= 200 * 1024 &&
         reinterpret_cast<uintptr_t>(w.data) % 16 == 0;
}

cudaError_t dense_octets(const float* x,
                         int64_t rows,
                         const DeviceWeight& w,
                         float* y,
                         bool round_bf16,
                         cudaStream_t s) {
  if (!dense_octets_applies(rows, w) || reinterpret_cast<uintptr_t>(x) % 16 != 0)
    return cudaErrorInvalidValue;
  const size_t smem = octet_smem_bytes(rows, w.in_features);
  const cudaError_t e = cudaFuncSetAttribute(
      dense_octets_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (e != cudaSuccess) return e;
  const dim3 grid(static_cast<unsigned>((w.out_features + kOctetOutputs - 1) / kOctetOutputs));
  pdl::launch_dependent(dense_octets_kernel, grid, dim3(static_cast<unsigned>(32 * rows)), smem, s,
                        x, w.in_features, reinterpret_cast<const uint16_t*>(w.data), w.out_features,
                        y, round_bf16);
  return cudaGetLastError();
}

}  // namespace di::backend::cuda
