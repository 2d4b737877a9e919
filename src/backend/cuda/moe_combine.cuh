// The combine of moe_grouped.cu: each token's routed-expert rows added in ascending expert index
// into an fp32 sum from 0, then the shared expert's row, one bf16 rounding (Model::moe's order,
// so the result does not depend on the slot order or on the other tokens).
#pragma once

#include <cstdint>

#include "backend/cuda/bulk_copy.cuh"
#include "backend/cuda/device_numeric.cuh"
#include "backend/cuda/grid_dependency.cuh"

namespace di::backend::cuda::moe {

constexpr int kMaxTopk = 16;

// out[t] = bf16((sum over t's experts in ascending index of y[slot]) + shared[t]).
static __global__ void combine_kernel(const int32_t* experts,
                                      const int32_t* slot_of,
                                      int topk,
                                      int64_t dim,
                                      const float* y,
                                      const float* shared,
                                      float* out) {
  pdl::wait_for_previous_grid();  // y is the previous launch's
  pdl::release_next_grid();
  const int64_t t = blockIdx.y, d = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (d >= dim) return;
  int ex[kMaxTopk], sl[kMaxTopk];
  for (int k = 0; k < topk; ++k) {  // insertion sort by expert index (ids are distinct)
    int e = experts[t * topk + k], s = slot_of[t * topk + k], i = k;
    for (; i > 0 && ex[i - 1] > e; --i) {
      ex[i] = ex[i - 1];
      sl[i] = sl[i - 1];
    }
    ex[i] = e;
    sl[i] = s;
  }
  float acc = 0.0f;
  for (int k = 0; k < topk; ++k) {
    if (sl[k] >= 0) acc = __fadd_rn(acc, y[int64_t{sl[k]} * dim + d]);
  }
  out[t * dim + d] = round_bf16(shared ? __fadd_rn(acc, shared[t * dim + d]) : acc);
}

}  // namespace di::backend::cuda::moe
