// The MoE router's per-row part (kernels::moe_route_row) on the raw gate products: scores
// f(raw / temp), top-k of score + bias with ties to the lower index, weights normalized and
// scaled. One block per row. Element-wise steps run in parallel; every order-dependent step (the
// softmax sum, the weight sum) runs on one thread in the CPU's order; the arg-max of each top-k
// round is a (value, index) reduction that prefers the larger value and, between equal values,
// the lower index: for non-NaN scores that is exactly the CPU's "first strictly greater" scan.
// Scores are bitwise equal to the CPU's except where exp/log1p round differently from glibc's
// fp32 functions (device_numeric.cuh); indices are equal unless such an ulp decides a near-tie.
#include "backend/cuda/device_numeric.cuh"
#include "backend/cuda/grid_dependency.cuh"
#include "backend/cuda/kernels.h"

namespace di::backend::cuda {

namespace {

constexpr int kThreads = 128;

struct Best {
  float v;
  int i;  // -1: none
};

__device__ __forceinline__ Best better(Best a, Best b) {
  if (b.i < 0) return a;
  if (a.i < 0) return b;
  if (b.v > a.v || (b.v == a.v && b.i < a.i)) return b;
  return a;
}

__device__ Best block_best(Best b, Best* warp_best) {
  for (int o = 16; o > 0; o /= 2) {
    Best other{__shfl_xor_sync(0xffffffffu, b.v, o), __shfl_xor_sync(0xffffffffu, b.i, o)};
    b = better(b, other);
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) warp_best[warp] = b;
  __syncthreads();
  Best r{0.0f, -1};
  for (int w = 0; w < kThreads / 32; ++w) r = better(r, warp_best[w]);
  __syncthreads();  // warp_best is reused by the next round
  return r;
}

__device__ float block_max(float v, float* warp_max) {
  for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = v;
  __syncthreads();
  float r = -INFINITY;
  for (int w = 0; w < kThreads / 32; ++w) r = fmaxf(r, warp_max[w]);
  return r;
}

// Dynamic shared memory: scores[n], biased[n], taken[n] (bytes).
__global__ void moe_route_kernel(
    const float* raw, const float* bias, RouteParams p, int32_t* experts, float* weights) {
  pdl::enter_dependent_grid();
  extern __shared__ float shm[];
  __shared__ float warp_max[kThreads / 32];
  __shared__ Best warp_best[kThreads / 32];
  __shared__ float softmax_sum;
  const int n = p.num_experts;
  float* scores = shm;
  float* biased = shm + n;
  unsigned char* taken = reinterpret_cast<unsigned char*>(shm + 2 * n);
  const float* x = raw + static_cast<int64_t>(blockIdx.x) * n;
  float local_max = -INFINITY;
  for (int e = threadIdx.x; e < n; e += kThreads) {
    const float s = __fdiv_rn(x[e], p.gate_temp);
    scores[e] = s;
    taken[e] = 0;
    local_max = fmaxf(local_max, s);
  }
  const float max_score = block_max(local_max, warp_max);
  for (int e = threadIdx.x; e < n; e += kThreads) {
    float s = scores[e];
    switch (p.score_func) {
      case ScoreFunc::kSqrtSoftplus:
        s = __fsqrt_rn(s > 20.0f ? s : log1p_f32(exp_f32(s)));
        break;
      case ScoreFunc::kSigmoid:
        s = sigmoid_f32(s);
        break;
      case ScoreFunc::kSoftmax:
        s = exp_f32(__fsub_rn(s, max_score));
        break;
    }
    scores[e] = s;
  }
  __syncthreads();
  if (p.score_func == ScoreFunc::kSoftmax) {
    if (threadIdx.x == 0) {
      float sum = 0;
      for (int e = 0; e < n; ++e) sum = __fadd_rn(sum, scores[e]);
      softmax_sum = sum;
    }
    __syncthreads();
    for (int e = threadIdx.x; e < n; e += kThreads) scores[e] = __fdiv_rn(scores[e], softmax_sum);
    __syncthreads();
  }
  for (int e = threadIdx.x; e < n; e += kThreads)
    biased[e] = __fadd_rn(scores[e], bias ? bias[e] : 0.0f);
  __syncthreads();
  int32_t* ex = experts + static_cast<int64_t>(blockIdx.x) * p.topk;
  float* wt = weights + static_cast<int64_t>(blockIdx.x) * p.topk;
  for (int k = 0; k < p.topk; ++k) {
    Best b{0.0f, -1};
    for (int e = threadIdx.x; e < n; e += kThreads) {
      if (!taken[e]) b = better(b, Best{biased[e], e});
    }
    b = block_best(b, warp_best);
    if (threadIdx.x == 0) {
      // Fewer experts than topk: the CPU has no answer either; mark the slot instead of failing.
      ex[k] = b.i;
      wt[k] = b.i >= 0 ? scores[b.i] : 0.0f;
      if (b.i >= 0) taken[b.i] = 1;
    }
    __syncthreads();
  }
  if (threadIdx.x != 0) return;
  if (p.norm_topk_prob && p.topk > 1) {
    float sum = 0;
    for (int k = 0; k < p.topk; ++k) sum = __fadd_rn(sum, wt[k]);
    for (int k = 0; k < p.topk; ++k) wt[k] = __fdiv_rn(wt[k], __fadd_rn(sum, 1e-20f));
  }
  for (int k = 0; k < p.topk; ++k) wt[k] = __fmul_rn(wt[k], p.route_scale);
}

}  // namespace

cudaError_t moe_route(const float* raw,
                      int64_t rows,
                      const float* bias,
                      const RouteParams& p,
                      int32_t* experts,
                      float* weights,
                      cudaStream_t s) {
  if (rows == 0 || p.topk <= 0) return cudaSuccess;
  if (p.num_experts <= 0) return cudaErrorInvalidValue;
  const size_t smem = static_cast<size_t>(p.num_experts) * (2 * sizeof(float) + 1);
  if (smem > 48 * 1024) return cudaErrorInvalidValue;  // > 5000 experts: not a V4 shape
  pdl::launch_dependent(moe_route_kernel, dim3(static_cast<unsigned>(rows)), dim3(kThreads), smem,
                        s, raw, bias, p, experts, weights);
  return cudaGetLastError();
}

}  // namespace di::backend::cuda
