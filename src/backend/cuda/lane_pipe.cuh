// dot_f32's lane chains (lane_chain.cuh's by-lane buffer) with the products streamed in: warp 0
// runs the eight chains while warps 1.. still load and multiply. Why: a single row's dot product
// is a load phase (one or more global round trips) then eight chains of n / 8 dependent adds;
// with a barrier between them the row pays both. Split into chunks of steps (at most
// kPipeChunks, one named barrier each), chunk c's chains run as soon as every producer warp has
// stored its products of chunk c (bar.arrive: producers never wait), so the loads of later
// chunks land under the adds of earlier ones and the kernel approaches max(loads, chain). The
// bits are lane_chain's: each lane still adds its products in order, from the same buffer.
//
// Protocol (every thread of the block takes part; blockDim.x a multiple of 32, >= 64):
//   warp 0:     float l = pipe_chains(buf, plan);   // lanes 0-7: the eight lane sums
//   warps 1..:  store products by lane in increasing k, calling pipe_arrive(...) after each store
//               step, then pipe_arrive_rest(...) once all are stored.
// Barrier ids 1..kPipeChunks are used; __syncthreads (id 0) stays free for the caller.
//
// Used by engram_gate (one block per row; faster on the H200). rms_norm used it until lat13: with
// all of a row's loads landing in one round trip there was little to overlap, and the chunks'
// barriers and arrival checks cost more than they hid (rms_norm.cu says how much). The mix
// products' 25 blocks per row were slower with it (docs/notes/cuda-kernels.md, latency2); their
// pipeline is hc_mix_pipe.cu (fn copied before the grid dependency, one wait per 8 chunks).
#pragma once

#include <cstdint>

#include "backend/cuda/lane_chain.cuh"

namespace di::backend::cuda {

constexpr int kPipeChunks = 15;

// 32-bit counts (a row is far below 2^31 values): 64-bit index math cost the producers
// registers they then spilled, each spill waiting on its load.
struct PipePlan {
  int steps;        // n / 8: products per lane
  int chunk_steps;  // a multiple of 16 (the chains' float4 groups stay whole)
  int chunks;       // ceil(steps / chunk_steps) <= kPipeChunks; 0 when steps == 0
};

__host__ __device__ constexpr PipePlan pipe_plan(int64_t n) {
  const int steps = static_cast<int>(n / 8);
  const int per = (steps + kPipeChunks - 1) / kPipeChunks;
  const int cs = per < 16 ? 16 : (per + 15) / 16 * 16;
  return {steps, cs, (steps + cs - 1) / cs};
}

// The aligned barrier forms: a whole warp arrives (counted as 32 threads), so callers keep their
// warps converged here; __syncwarp makes that explicit. Both order the shared stores before them.
__device__ __forceinline__ void pipe_bar_arrive(int id) {
  __syncwarp();
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(static_cast<int>(blockDim.x)) : "memory");
}
__device__ __forceinline__ void pipe_bar_sync(int id) {
  __syncwarp();
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(static_cast<int>(blockDim.x)) : "memory");
}

// Producer warps: `low` is the smallest element index this warp has not yet stored (the next
// index of its first lane; every element of the warp below it is in the buffer). Arrives on each
// chunk lying wholly below it; `done` counts the chunks arrived on. Warp-uniform arguments.
__device__ __forceinline__ void pipe_arrive(const PipePlan& p, int low, int& done) {
  const int chunk = p.chunk_steps * 8, full = p.steps * 8;
  while (done < p.chunks && (low >= full || low >= (done + 1) * chunk)) pipe_bar_arrive(1 + done++);
}

__device__ __forceinline__ void pipe_arrive_rest(const PipePlan& p, int& done) {
  for (; done < p.chunks; ++done) pipe_bar_arrive(1 + done);
}

// Warp 0 (all 32 lanes call it): lane j < `lanes` (8 per dot product; the buffers of up to four
// products lie one after another, lane j's chain at buf + j * lane_stride(steps)) returns its
// chain's sum, chunk by chunk as the producers release them; the other lanes only take part in
// the barriers. Chains of several products run side by side in the same instructions.
__device__ __forceinline__ float pipe_chains(const float* buf, const PipePlan& p, int lanes = 8) {
  const int j = static_cast<int>(threadIdx.x);
  const float* row = buf + (j < lanes ? j : 0) * static_cast<int>(lane_stride(p.steps));
  float l = 0;
  for (int c = 0; c < p.chunks; ++c) {
    pipe_bar_sync(1 + c);
    const int s0 = c * p.chunk_steps;
    const int s1 = s0 + p.chunk_steps < p.steps ? s0 + p.chunk_steps : p.steps;
    if (j < lanes) l = chain_range(row, s0, s1, l);
  }
  return l;
}

// dot_f32's combine of the eight lane sums held by lanes first .. first + 7 of the warp (gathered
// by shuffles; all 32 lanes call it and get the sum).
__device__ __forceinline__ float pipe_lane_sum(float l, int first) {
  float v[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) v[i] = __shfl_sync(0xffffffffu, l, first + i);
  return combine_lanes(v);
}

// Lane 0 of warp 0 after pipe_chains: the combine plus the tail a(k) * b(k), k >= 8 * steps, in
// order. All 32 lanes call it.
template <class A, class B>
__device__ __forceinline__ float pipe_combine(float l, int64_t n, A a, B b) {
  float s = pipe_lane_sum(l, 0);
  if (threadIdx.x == 0) {
    for (int64_t k = n / 8 * 8; k < n; ++k) s = __fadd_rn(s, __fmul_rn(a(k), b(k)));
  }
  return s;
}

}  // namespace di::backend::cuda
