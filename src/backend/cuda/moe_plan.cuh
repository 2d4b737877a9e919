// The routing plan of moe_grouped.cu, built on the device from the router's (token, k) choices:
// per-expert row counts and offsets, a slot per (token, k) (rows of one expert are contiguous;
// their order inside the expert is arbitrary, rows are independent), and the work units of the
// grouped GEMMs: one unit per `rows_per_pass` rows of an expert, in ascending expert order, so a
// persistent GEMM CTA can map "item i" to (unit, column tile) without knowing the counts on the
// host. The same launch quantizes the FFN input (act_quant) in its other CTAs, one launch fewer.
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <utility>

#include "backend/cuda/bulk_copy.cuh"
#include "backend/cuda/device_numeric.cuh"
#include "backend/cuda/grid_dependency.cuh"

namespace di::backend::cuda::moe {

constexpr int kPlanThreads = 1024;  // one CTA plans; also the largest expert count

// Device-side routing plan (scratch).
struct Plan {
  int32_t* counts;       // [E] rows per expert
  int32_t* offsets;      // [E] first slot of each expert
  int32_t* unit_expert;  // [P] expert of each work unit (at most one unit per slot)
  int32_t* unit_row0;    // [P] first row of the unit inside its expert
  int32_t* num_units;    // [1]
  int32_t* row_of;       // [P] token of each slot
  float* weight_of;      // [P] routing weight of each slot
  int32_t* slot_of;      // [P] slot of each (token, k); -1 for an out-of-range expert id
};

// Work unit `u` of the plan (at most `max_rows` rows of one expert): its expert, first slot, rows.
struct Unit {
  int expert, slot0, rows;
};
__device__ __forceinline__ Unit unit_of(const Plan& p, int u, int max_rows) {
  const int e = __ldcg(p.unit_expert + u), r0 = __ldcg(p.unit_row0 + u);
  return {e, __ldcg(p.offsets + e) + r0, min(max_rows, __ldcg(p.counts + e) - r0)};
}

// The max of |v| over a warp: order-free, so the same scale as quantize_fp8's loop.
__device__ __forceinline__ float warp_amax(float v) {
  for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// act_quant's scale for a 32-block whose max |v| is amax, and v's e4m3 value under it
// (quantize_fp8_kernel's operations).
__device__ __forceinline__ float act_scale(float amax) {
  return pow2_ceil_scale(__fmul_rn(fmaxf(amax, 1e-4f), __fdiv_rn(1.0f, 448.0f)));
}
__device__ __forceinline__ float act_value(float v, float s) {
  return round_e4m3(fminf(fmaxf(__fdiv_rn(v, s), -448.0f), 448.0f));
}
// The e4m3 byte of an act_value (exact: the value is representable).
__device__ __forceinline__ uint8_t e4m3_byte(float v) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3));
}

// act_quant of one 32-block held one element per lane: lane 0 stores the scale; every lane its
// e4m3 value (as a float).
__device__ __forceinline__ void quantize_lane(float v, float* q, float* scale) {
  const float s = act_scale(warp_amax(fabsf(v)));
  if (threadIdx.x % 32 == 0) *scale = s;
  *q = act_value(v, s);
}

// The tensor-core expert GEMMs (moe_grouped_tc.cu) read act_quant values as f16 (e4m3 values are
// exact in f16) in "MMA order": inside each 8-wide group the element at offset j sits at
// position mma_pos(j), so that one 16-byte load gives a thread its m16n8k16 B fragments for
// both k16 halves of a 32-block (pairs (0,4), (1,5), (2,6), (3,7)).
__device__ __forceinline__ int mma_pos(int j) {
  return (j & ~7) | ((j & 3) << 1) | ((j >> 2) & 1);
}

// ops.swiglu for one element (elementwise.cu's swiglu_kernel), times the routing weight.
__device__ __forceinline__ float swiglu_one(float gate, float up, float rw, float limit) {
  if (limit > 0) {
    up = fminf(fmaxf(up, -limit), limit);
    gate = fminf(gate, limit);
  }
  const float silu = __fdiv_rn(gate, __fadd_rn(1.0f, exp_f32(-gate)));
  return round_bf16(__fmul_rn(rw, __fmul_rn(silu, up)));
}

__device__ __forceinline__ int2 warp_inclusive_scan(int2 v) {
  const int lane = threadIdx.x % 32;
  for (int o = 1; o < 32; o *= 2) {
    const int a = __shfl_up_sync(0xffffffffu, v.x, o), b = __shfl_up_sync(0xffffffffu, v.y, o);
    if (lane >= o) {
      v.x += a;
      v.y += b;
    }
  }
  return v;
}

struct PlanArgs {
  const int32_t* experts;  // [tokens, topk]
  const float* weights;    // [tokens, topk]
  int pairs, topk, num_experts, rows_per_unit;
  const float* x;  // [tokens, dim] FFN input, quantized by CTAs 1..: q, scales
  int64_t x_blocks;
  float *qx, *sx;
  uint16_t* qx16;          // non-null: the values as f16 in MMA order (mma_pos) instead of qx
  uint8_t* qx8 = nullptr;  // non-null: as e4m3 bytes in MMA order (the wgmma GEMMs)
};

// CTA 0: the plan. CTAs 1..: act_quant of x, one warp per 32-block. The next kernel (the grouped
// w1/w3 GEMM, launched programmatically) may start its prologue at once: it waits for this whole
// grid before reading anything.
static __global__ void __launch_bounds__(kPlanThreads) plan_kernel(PlanArgs a, Plan p) {
  pdl::enter_dependent_grid();
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  if (blockIdx.x > 0) {
    const int64_t warps = int64_t{gridDim.x - 1} * (kPlanThreads / 32);
    for (int64_t b = int64_t{blockIdx.x - 1} * (kPlanThreads / 32) + warp; b < a.x_blocks;
         b += warps) {
      const float v = a.x[b * 32 + lane];
      if (a.qx8) {
        const float s = act_scale(warp_amax(fabsf(v)));
        if (lane == 0) a.sx[b] = s;
        a.qx8[b * 32 + mma_pos(lane)] = e4m3_byte(act_value(v, s));
      } else if (a.qx16) {
        const float s = act_scale(warp_amax(fabsf(v)));
        if (lane == 0) a.sx[b] = s;
        a.qx16[b * 32 + mma_pos(lane)] = __half_as_ushort(__float2half_rn(act_value(v, s)));
      } else {
        quantize_lane(v, a.qx + b * 32 + lane, a.sx + b);
      }
    }
    return;
  }
  __shared__ int count[kPlanThreads];
  __shared__ int cursor[kPlanThreads];
  __shared__ int2 warp_total[32];
  count[tid] = 0;
  __syncthreads();
  for (int i = tid; i < a.pairs; i += kPlanThreads) {
    const int e = a.experts[i];
    if (e >= 0 && e < a.num_experts) atomicAdd(&count[e], 1);
  }
  __syncthreads();
  // Exclusive scans of the counts (offsets) and of the units per expert (first unit).
  const int2 own = make_int2(count[tid], (count[tid] + a.rows_per_unit - 1) / a.rows_per_unit);
  const int2 incl = warp_inclusive_scan(own);
  if (lane == 31) warp_total[warp] = incl;
  __syncthreads();
  if (warp == 0) {
    const int2 t = warp_total[lane];
    const int2 s = warp_inclusive_scan(t);
    warp_total[lane] = make_int2(s.x - t.x, s.y - t.y);
  }
  __syncthreads();
  const int2 before =
      make_int2(incl.x - own.x + warp_total[warp].x, incl.y - own.y + warp_total[warp].y);
  if (tid < a.num_experts) {
    p.counts[tid] = own.x;
    p.offsets[tid] = before.x;
    for (int u = 0; u < own.y; ++u) {
      p.unit_expert[before.y + u] = tid;
      p.unit_row0[before.y + u] = u * a.rows_per_unit;
    }
  }
  if (tid == kPlanThreads - 1) *p.num_units = before.y + own.y;
  cursor[tid] = before.x;
  __syncthreads();
  for (int i = tid; i < a.pairs; i += kPlanThreads) {
    const int e = a.experts[i];
    int slot = -1;
    if (e >= 0 && e < a.num_experts) {
      slot = atomicAdd(&cursor[e], 1);
      p.row_of[slot] = i / a.topk;
      p.weight_of[slot] = a.weights[i];
    }
    p.slot_of[i] = slot;
  }
}

}  // namespace di::backend::cuda::moe
