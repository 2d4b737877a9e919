// Routed experts on the device: routing plan, grouped FP4 GEMMs with device-side counts, combine
// (moe_grouped.h). The GEMMs are the skinny weight-streaming passes of skinny_gemm.cuh, one CTA
// per (active expert, column tile), looping over that expert's rows kMaxRows at a time.
#include "backend/cuda/kernels.h"
#include "backend/cuda/moe_grouped.h"
#include "backend/cuda/skinny_gemm.cuh"

namespace di::backend::cuda {

namespace {

using skinny::kThreads;

constexpr int kPrepThreads = 1024;  // one CTA; also the largest expert count
constexpr int kMaxTopk = 16;

// Device-side routing plan (scratch).
struct Plan {
  int32_t* counts;      // [E] rows per expert
  int32_t* offsets;     // [E] first slot of each expert
  int32_t* active;      // [E] experts with rows, ascending; first *num_active valid
  int32_t* num_active;  // [1]
  int32_t* row_of;      // [P] token of each slot
  float* weight_of;     // [P] routing weight of each slot
  int32_t* slot_of;     // [P] slot of each (token, k); -1 for an out-of-range expert id
};

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

__global__ void __launch_bounds__(kPrepThreads) moe_plan_kernel(
    const int32_t* experts, const float* weights, int pairs, int topk, int num_experts, Plan p) {
  __shared__ int count[kPrepThreads];
  __shared__ int cursor[kPrepThreads];
  __shared__ int2 warp_total[32];
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  count[tid] = 0;
  __syncthreads();
  for (int i = tid; i < pairs; i += kPrepThreads) {
    const int e = experts[i];
    if (e >= 0 && e < num_experts) atomicAdd(&count[e], 1);
  }
  __syncthreads();
  // Exclusive scans of the counts (offsets) and of "has rows" (positions in the active list).
  const int2 own = make_int2(count[tid], count[tid] > 0 ? 1 : 0);
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
  if (tid < num_experts) {
    p.counts[tid] = own.x;
    p.offsets[tid] = before.x;
    if (own.y) p.active[before.y] = tid;
  }
  if (tid == kPrepThreads - 1) *p.num_active = before.y + own.y;
  cursor[tid] = before.x;
  __syncthreads();
  for (int i = tid; i < pairs; i += kPrepThreads) {
    const int e = experts[i];
    int slot = -1;
    if (e >= 0 && e < num_experts) {
      slot = atomicAdd(&cursor[e], 1);
      p.row_of[slot] = i / topk;
      p.weight_of[slot] = weights[i];
    }
    p.slot_of[i] = slot;
  }
}

// ops.swiglu for one element (elementwise.cu's swiglu_kernel).
__device__ __forceinline__ float swiglu_one(float gate, float up, float rw, float limit) {
  if (limit > 0) {
    up = fminf(fmaxf(up, -limit), limit);
    gate = fminf(gate, limit);
  }
  const float silu = __fdiv_rn(gate, __fadd_rn(1.0f, exp_f32(-gate)));
  return round_bf16(__fmul_rn(rw, __fmul_rn(silu, up)));
}

// h[slot] = swiglu(bf16(x w1^T), bf16(x w3^T), weight) for every row of the active expert
// blockIdx.y, columns blockIdx.x * CW ...: segments alternate w1 and w3 per row group.
template <int CW, int kCtas>
__global__ void __launch_bounds__(kThreads, kCtas) moe_up_kernel(Plan p,
                                                                 const float* qx,
                                                                 const float* sx,
                                                                 ExpertMatrices w1,
                                                                 ExpertMatrices w3,
                                                                 int64_t dim,
                                                                 int64_t inter,
                                                                 int rows_per_pass,
                                                                 float limit,
                                                                 float* h) {
  extern __shared__ __align__(16) unsigned char smem[];
  if (static_cast<int>(blockIdx.y) >= *p.num_active) return;
  const int e = p.active[blockIdx.y];
  const int count = p.counts[e], off = p.offsets[e];
  const uint8_t *w1d = w1.data[e], *w1s = w1.scale[e], *w3d = w3.data[e], *w3s = w3.scale[e];
  using M = skinny::Mode<kCtas>;
  const skinny::Layout L = skinny::make_layout(CW, true, M::kPairs, rows_per_pass, M::kBudget);
  const int64_t n0 = int64_t{blockIdx.x} * CW;
  const int groups = (count + rows_per_pass - 1) / rows_per_pass;
  auto seg = [&](int s) {
    const int r0 = (s / 2) * rows_per_pass;
    return skinny::Segment{qx,
                           sx,
                           p.row_of + off,
                           r0,
                           count - r0 < rows_per_pass ? count - r0 : rows_per_pass,
                           (s & 1) ? w3d : w1d,
                           (s & 1) ? w3s : w1s,
                           inter,
                           n0};
  };
  float gate = 0.0f;
  auto done = [&](int s, int c, int m, float acc) {
    if ((s & 1) == 0) {
      gate = round_bf16(acc);
      return;
    }
    const skinny::Segment g = seg(s);
    const int64_t n = n0 + c, slot = off + g.row0 + m;
    if (n < inter)
      h[slot * inter + n] = swiglu_one(gate, round_bf16(acc), p.weight_of[slot], limit);
  };
  skinny::stream<CW, true, M::kPairs>(smem, L, dim, 2 * groups, seg, done);
}

// y[slot] = bf16(h[slot] w2^T) for every row of the active expert blockIdx.y.
template <int CW, int kCtas>
__global__ void __launch_bounds__(kThreads, kCtas) moe_down_kernel(Plan p,
                                                                   const float* qh,
                                                                   const float* sh,
                                                                   ExpertMatrices w2,
                                                                   int64_t dim,
                                                                   int64_t inter,
                                                                   int rows_per_pass,
                                                                   float* y) {
  extern __shared__ __align__(16) unsigned char smem[];
  if (static_cast<int>(blockIdx.y) >= *p.num_active) return;
  const int e = p.active[blockIdx.y];
  const int count = p.counts[e], off = p.offsets[e];
  const uint8_t *w2d = w2.data[e], *w2s = w2.scale[e];
  using M = skinny::Mode<kCtas>;
  const skinny::Layout L = skinny::make_layout(CW, true, M::kPairs, rows_per_pass, M::kBudget);
  const int64_t n0 = int64_t{blockIdx.x} * CW;
  const int groups = (count + rows_per_pass - 1) / rows_per_pass;
  auto seg = [&](int s) {
    const int r0 = s * rows_per_pass;
    return skinny::Segment{
        qh,  sh,  nullptr, off + r0, count - r0 < rows_per_pass ? count - r0 : rows_per_pass,
        w2d, w2s, dim,     n0};
  };
  auto done = [&](int s, int c, int m, float acc) {
    const skinny::Segment g = seg(s);
    const int64_t n = n0 + c, slot = g.row0 + m;
    if (n < dim) y[slot * dim + n] = round_bf16(acc);
  };
  skinny::stream<CW, true, M::kPairs>(smem, L, inter, groups, seg, done);
}

// out[t] = bf16((sum over t's experts in ascending index of y[slot]) + shared[t]).
__global__ void moe_combine_kernel(const int32_t* experts,
                                   const int32_t* slot_of,
                                   int topk,
                                   int64_t dim,
                                   const float* y,
                                   const float* shared,
                                   float* out) {
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

// Scratch pieces, 256-byte aligned, in one order for sizing and carving.
struct Scratch {
  float *qx, *sx, *h, *qh, *sh, *y;
  Plan plan;
};

size_t carve(
    void* base, int64_t tokens, int topk, int num_experts, int64_t dim, int64_t inter, Scratch* s) {
  size_t off = 0;
  auto take = [&](size_t bytes) {
    void* p = base ? static_cast<char*>(base) + off : nullptr;
    off += (bytes + 255) & ~size_t{255};
    return p;
  };
  const size_t P = static_cast<size_t>(tokens * topk), E = static_cast<size_t>(num_experts);
  Scratch r{};
  r.qx = static_cast<float*>(take(4 * static_cast<size_t>(tokens * dim)));
  r.sx = static_cast<float*>(take(4 * static_cast<size_t>(tokens * dim / 32)));
  r.h = static_cast<float*>(take(4 * P * static_cast<size_t>(inter)));
  r.qh = static_cast<float*>(take(4 * P * static_cast<size_t>(inter)));
  r.sh = static_cast<float*>(take(4 * P * static_cast<size_t>(inter / 32)));
  r.y = static_cast<float*>(take(4 * P * static_cast<size_t>(dim)));
  r.plan.counts = static_cast<int32_t*>(take(4 * E));
  r.plan.offsets = static_cast<int32_t*>(take(4 * E));
  r.plan.active = static_cast<int32_t*>(take(4 * E));
  r.plan.num_active = static_cast<int32_t*>(take(4));
  r.plan.row_of = static_cast<int32_t*>(take(4 * P));
  r.plan.weight_of = static_cast<float*>(take(4 * P));
  r.plan.slot_of = static_cast<int32_t*>(take(4 * P));
  if (s) *s = r;
  return off;
}

int rows_per_pass(int64_t pairs, int num_experts) {
  // Expected rows per active expert: about pairs / experts once most experts are hit.
  if (pairs * 4 <= num_experts) return 1;
  if (pairs <= num_experts) return 2;
  const int64_t per = 2 * ((pairs + num_experts - 1) / num_experts);
  return static_cast<int>(per < skinny::kMaxRows ? per : skinny::kMaxRows);
}

template <int CW, int kCtas>
cudaError_t launch_gemms(const MoeRoutedArgs& a, const Scratch& s, cudaStream_t st) {
  using M = skinny::Mode<kCtas>;
  const int64_t pairs = a.tokens * a.topk;
  const int max_rpp = skinny::max_rows_per_pass(CW, true, M::kPairs, M::kBudget);
  int rpp = rows_per_pass(pairs, a.num_experts);
  rpp = rpp < max_rpp ? rpp : max_rpp;
  const unsigned max_active =
      static_cast<unsigned>(pairs < a.num_experts ? pairs : int64_t{a.num_experts});
  const skinny::Layout L = skinny::make_layout(CW, true, M::kPairs, rpp, M::kBudget);
  cudaError_t e = cudaFuncSetAttribute(moe_up_kernel<CW, kCtas>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, L.total);
  if (e == cudaSuccess) {
    e = cudaFuncSetAttribute(moe_down_kernel<CW, kCtas>,
                             cudaFuncAttributeMaxDynamicSharedMemorySize, L.total);
  }
  if (e != cudaSuccess) return e;
  const dim3 up_grid(static_cast<unsigned>((a.inter + CW - 1) / CW), max_active);
  moe_up_kernel<CW, kCtas><<<up_grid, kThreads, L.total, st>>>(
      s.plan, s.qx, s.sx, a.w1, a.w3, a.dim, a.inter, rpp, a.swiglu_limit, s.h);
  if ((e = cudaGetLastError()) != cudaSuccess) return e;
  if ((e = quantize_fp8(s.h, pairs, a.inter, s.qh, s.sh, st)) != cudaSuccess) return e;
  const dim3 down_grid(static_cast<unsigned>((a.dim + CW - 1) / CW), max_active);
  moe_down_kernel<CW, kCtas>
      <<<down_grid, kThreads, L.total, st>>>(s.plan, s.qh, s.sh, a.w2, a.dim, a.inter, rpp, s.y);
  return cudaGetLastError();
}

}  // namespace

bool moe_routed_supports(const MoeRoutedArgs& a) {
  return a.dim >= 128 && a.dim % 128 == 0 && a.inter >= 128 && a.inter % 128 == 0 && a.topk >= 1 &&
         a.topk <= kMaxTopk && a.num_experts >= 1 && a.num_experts <= kPrepThreads &&
         a.tokens * a.topk < (int64_t{1} << 30);
}

size_t moe_routed_scratch_bytes(
    int64_t tokens, int topk, int num_experts, int64_t dim, int64_t inter) {
  return carve(nullptr, tokens, topk, num_experts, dim, inter, nullptr);
}

cudaError_t moe_routed(const MoeRoutedArgs& a, void* scratch, cudaStream_t st) {
  if (a.tokens == 0) return cudaSuccess;
  if (!moe_routed_supports(a)) return cudaErrorInvalidValue;
  Scratch s{};
  carve(scratch, a.tokens, a.topk, a.num_experts, a.dim, a.inter, &s);
  cudaError_t e = quantize_fp8(a.x, a.tokens, a.dim, s.qx, s.sx, st);
  if (e != cudaSuccess) return e;
  const int pairs = static_cast<int>(a.tokens * a.topk);
  moe_plan_kernel<<<1, kPrepThreads, 0, st>>>(a.experts, a.weights, pairs, a.topk, a.num_experts,
                                              s.plan);
  if ((e = cudaGetLastError()) != cudaSuccess) return e;
  // Two CTAs per SM measured fastest at 1, 8, 64 and 256 tokens (docs/benchmarks.md): 16 columns
  // per CTA while there are at most as many (token, expert) pairs as experts, then 32.
  const int variant =
      a.tile_variant >= 0 ? a.tile_variant : (a.tokens * a.topk <= a.num_experts ? 4 : 5);
  switch (variant) {
    case 0:
      e = launch_gemms<8, 1>(a, s, st);
      break;
    case 1:
      e = launch_gemms<16, 1>(a, s, st);
      break;
    case 2:
      e = launch_gemms<32, 1>(a, s, st);
      break;
    case 3:
      e = launch_gemms<8, 2>(a, s, st);
      break;
    case 4:
      e = launch_gemms<16, 2>(a, s, st);
      break;
    case 5:
      e = launch_gemms<32, 2>(a, s, st);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  if (e != cudaSuccess) return e;
  const dim3 grid(static_cast<unsigned>((a.dim + 255) / 256), static_cast<unsigned>(a.tokens));
  moe_combine_kernel<<<grid, 256, 0, st>>>(a.experts, s.plan.slot_of, a.topk, a.dim, s.y, a.shared,
                                           a.out);
  return cudaGetLastError();
}

}  // namespace di::backend::cuda
