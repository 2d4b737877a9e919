// Routed experts on the device (moe_grouped.h): the routing plan with act_quant of x
// (moe_plan.cuh), the grouped FP4 w1/w3 GEMM + SwiGLU (+ act_quant of h), the grouped w2 GEMM
// and the combine: four launches (five below 32 columns per CTA), the last three programmatic
// (each starts while the previous one drains). The GEMMs run the skinny weight-streaming core
// (skinny_gemm.cuh) in persistent CTAs: CTA b walks items b, b + G, ... of (plan unit, column
// tile), item i = (unit i / tiles, tile i % tiles), resolved once into a table in shared memory,
// so one pipeline streams every item of a CTA without draining between them. (Session 4
// launched one CTA per (active expert, tile): each refilled the pipeline after a chain of
// dependent loads of the counts.)
#include <algorithm>
#include <utility>

#include "backend/cuda/grid_dependency.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/moe_combine.cuh"
#include "backend/cuda/moe_grouped.h"
#include "backend/cuda/moe_plan.cuh"
#include "backend/cuda/skinny_gemm.cuh"

namespace di::backend::cuda {

namespace {

using moe::Plan;
using skinny::kThreads;

// Shared memory for a CTA's item table: at most this much (fewer stages otherwise); more items
// than fit take more CTAs than are resident.
constexpr int kMaxTableBytes = 16 * 1024;

// A variant's shape: CW columns per CTA, kCtas CTAs per SM, P (column, block) pairs per thread
// and chunk (skinny::Mode's by default; 4 at two CTAs per SM halves the per-chunk overhead per
// weight byte: barrier, copy issue, loop).
template <int CW, int kCtas, int P>
struct Shape {
  static constexpr int kPairs = P;
  static constexpr int kBudget = skinny::Mode<kCtas>::kBudget;
};

// One item of a CTA: its matrices' weight rows and scales (w1 and w3, or w2), first slot, rows
// and column tile.
template <int kMats>
struct Item {
  const uint8_t* w[kMats];
  const uint8_t* s[kMats];
  int32_t slot0, rows, tile, pad;
};

template <class T>
__host__ __device__ constexpr int table_bytes(int cap) {
  return (cap * static_cast<int>(sizeof(T)) + 15) & ~15;
}

struct GemmArgs {
  Plan p;
  const float* q;  // act_quant values [rows, K] of the GEMM's input and their scales
  const float* q_scale;
  ExpertMatrices m[2];  // w1, w3 (up) or w2 (down)
  int64_t K, N;
  int rows_per_unit, tiles, cap;
  float limit;   // up: swiglu clamp
  float* out;    // up: h when act_quant is a separate launch (CW != 32); down: y
  float* out_q;  // up with CW == 32: act_quant(h) values and scales
  float* out_scale;
};

// Resolves this CTA's items into `table` (the plan read through L2: the w2 GEMM does it before
// its dependency wait, on a plan written two launches earlier). Returns the item count.
template <int kMats>
__device__ int fill_table(const GemmArgs& a, Item<kMats>* table) {
  const int64_t items = int64_t{__ldcg(a.p.num_units)} * a.tiles;
  const int64_t b = blockIdx.x, G = gridDim.x;
  int64_t mine = b < items ? (items - b + G - 1) / G : 0;
  mine = mine < a.cap ? mine : a.cap;  // never more: the host sized cap and grid for the most units
  for (int j = threadIdx.x; j < mine; j += kThreads) {
    const int64_t it = b + j * G;
    const int u = static_cast<int>(it / a.tiles);
    const int e = __ldcg(a.p.unit_expert + u), r0 = __ldcg(a.p.unit_row0 + u);
    Item<kMats> x{};
#pragma unroll
    for (int k = 0; k < kMats; ++k) {
      x.w[k] = a.m[k].data[e];
      x.s[k] = a.m[k].scale[e];
    }
    x.slot0 = __ldcg(a.p.offsets + e) + r0;
    x.rows = min(a.rows_per_unit, __ldcg(a.p.counts + e) - r0);
    x.tile = static_cast<int>(it - int64_t{u} * a.tiles);
    table[j] = x;
  }
  __syncthreads();
  return static_cast<int>(mine);
}

// h[slot] = swiglu(bf16(x w1^T), bf16(x w3^T), weight) for the rows of each item; segments
// alternate w1 and w3. With 32 columns per CTA the owners of one row are one warp (lane =
// column), so the CTA also writes act_quant(h) for its 32-block (quantize_fp8's operations).
template <int CW, int kCtas, int P>
__global__ void __launch_bounds__(kThreads, kCtas) moe_up_kernel(GemmArgs a) {
  extern __shared__ __align__(16) unsigned char smem[];
  using M = Shape<CW, kCtas, P>;
  using I = Item<2>;
  const int tb = table_bytes<I>(a.cap);
  const skinny::Layout L =
      skinny::make_layout(CW, true, M::kPairs, a.rows_per_unit, M::kBudget - tb);
  I* table = reinterpret_cast<I*>(smem + L.total);
  pdl::wait_for_previous_grid();  // the plan and act_quant(x) are the previous launch's
  const int n = fill_table<2>(a, table);
  auto seg = [&](int s) {
    const I& it = table[s >> 1];
    return skinny::Segment{a.q,         a.q_scale, a.p.row_of,
                           it.slot0,    it.rows,   it.w[s & 1],
                           it.s[s & 1], a.N,       int64_t{it.tile} * CW};
  };
  float gate = 0.0f;
  auto done = [&](int s, int c, int m, float acc) {
    if ((s & 1) == 0) {
      gate = round_bf16(acc);
      return;
    }
    const I& it = table[s >> 1];
    const int64_t col = int64_t{it.tile} * CW + c, slot = it.slot0 + m;
    const float v = moe::swiglu_one(gate, round_bf16(acc), a.p.weight_of[slot], a.limit);
    if constexpr (CW == 32) {
      moe::quantize_lane(v, a.out_q + slot * a.N + col, a.out_scale + slot * (a.N / 32) + col / 32);
    } else {
      a.out[slot * a.N + col] = v;
    }
  };
  skinny::stream<CW, true, M::kPairs>(smem, L, a.K, 2 * n, seg, done);
}

// y[slot] = bf16(h[slot] w2^T) for the rows of each item. The table is filled before the
// dependency wait and skinny::stream requests the first weight stages before it too: only the
// activations (act_quant(h)) wait for the w1/w3 GEMM.
template <int CW, int kCtas, int P>
__global__ void __launch_bounds__(kThreads, kCtas) moe_down_kernel(GemmArgs a) {
  pdl::enter_dependent_grid();
  extern __shared__ __align__(16) unsigned char smem[];
  using M = Shape<CW, kCtas, P>;
  using I = Item<1>;
  const int tb = table_bytes<I>(a.cap);
  const skinny::Layout L =
      skinny::make_layout(CW, true, M::kPairs, a.rows_per_unit, M::kBudget - tb);
  I* table = reinterpret_cast<I*>(smem + L.total);
  const int n = fill_table<1>(a, table);
  auto seg = [&](int s) {
    const I& it = table[s];
    return skinny::Segment{
        a.q, a.q_scale, nullptr, it.slot0, it.rows, it.w[0], it.s[0], a.N, int64_t{it.tile} * CW};
  };
  auto done = [&](int s, int c, int m, float acc) {
    const I& it = table[s];
    a.out[(int64_t{it.slot0} + m) * a.N + int64_t{it.tile} * CW + c] = round_bf16(acc);
  };
  skinny::stream<CW, true, M::kPairs>(smem, L, a.K, n, seg, done);
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
  r.plan.unit_expert = static_cast<int32_t*>(take(4 * P));
  r.plan.unit_row0 = static_cast<int32_t*>(take(4 * P));
  r.plan.num_units = static_cast<int32_t*>(take(4));
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

// Launch shape of one grouped GEMM from host-known sizes: at most one unit per (token, k) and
// per expert plus one per rows_per_unit rows; one item per (unit, tile); a resident grid unless
// that leaves a table of more than kMaxTableBytes per CTA.
struct Sizing {
  int cap = 1, smem = 0;
  unsigned grid = 1;
};

template <int CW, int kCtas, int P, int kMats>
Sizing size_gemm(int64_t pairs, int num_experts, int64_t N, int rpp, int sms) {
  using M = Shape<CW, kCtas, P>;
  constexpr int kMaxTable = kMaxTableBytes / static_cast<int>(sizeof(Item<kMats>));
  const int64_t units =
      std::min(pairs, std::min<int64_t>(num_experts, pairs) + (pairs + rpp - 1) / rpp);
  const int64_t items = units * (N / CW);
  int64_t grid = std::min<int64_t>(items, int64_t{sms} * kCtas);
  int64_t cap = (items + grid - 1) / grid;
  if (cap > kMaxTable) {
    cap = kMaxTable;
    grid = (items + cap - 1) / cap;
  }
  Sizing z;
  z.cap = static_cast<int>(cap);
  z.grid = static_cast<unsigned>(grid);
  const int tb = table_bytes<Item<kMats>>(z.cap);
  z.smem = skinny::make_layout(CW, true, M::kPairs, rpp, M::kBudget - tb).total + tb;
  return z;
}

template <int CW, int kCtas, int P>
cudaError_t launch_all(const MoeRoutedArgs& a, const Scratch& s, cudaStream_t st) {
  using M = Shape<CW, kCtas, P>;
  const int64_t pairs = a.tokens * a.topk;
  int device = 0, sms = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (e != cudaSuccess) return e;
  // The most rows per unit (<= what pays, see rows_per_pass) whose layouts fit both GEMMs.
  int rpp = rows_per_pass(pairs, a.num_experts);
  Sizing up, down;
  for (;; --rpp) {
    up = size_gemm<CW, kCtas, P, 2>(pairs, a.num_experts, a.inter, rpp, sms);
    down = size_gemm<CW, kCtas, P, 1>(pairs, a.num_experts, a.dim, rpp, sms);
    if (rpp == 1 || (up.smem <= M::kBudget && down.smem <= M::kBudget)) break;
  }
  const int64_t x_blocks = a.tokens * a.dim / 32;
  const moe::PlanArgs pa{a.experts, a.weights,     static_cast<int>(pairs),
                         a.topk,    a.num_experts, rpp,
                         a.x,       x_blocks,      s.qx,
                         s.sx,      nullptr};
  const int64_t qctas = std::min<int64_t>((x_blocks + 31) / 32, 256);
  pdl::launch_dependent(moe::plan_kernel, dim3(static_cast<unsigned>(1 + qctas)),
                        dim3(moe::kPlanThreads), 0, st, pa, s.plan);
  if ((e = cudaGetLastError()) != cudaSuccess) return e;

  GemmArgs g{};
  g.p = s.plan;
  g.q = s.qx;
  g.q_scale = s.sx;
  g.m[0] = a.w1;
  g.m[1] = a.w3;
  g.K = a.dim;
  g.N = a.inter;
  g.rows_per_unit = rpp;
  g.tiles = static_cast<int>(a.inter / CW);
  g.cap = up.cap;
  g.limit = a.swiglu_limit;
  g.out = s.h;
  g.out_q = s.qh;
  g.out_scale = s.sh;
  e = cudaFuncSetAttribute(moe_up_kernel<CW, kCtas, P>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           up.smem);
  if (e == cudaSuccess) {
    e = pdl::launch_dependent(moe_up_kernel<CW, kCtas, P>, dim3(up.grid), dim3(kThreads), up.smem,
                              st, g);
  }
  if (e != cudaSuccess) return e;
  if (CW != 32 && (e = quantize_fp8(s.h, pairs, a.inter, s.qh, s.sh, st)) != cudaSuccess) return e;

  GemmArgs d = g;
  d.q = s.qh;
  d.q_scale = s.sh;
  d.m[0] = a.w2;
  d.m[1] = {};
  d.K = a.inter;
  d.N = a.dim;
  d.tiles = static_cast<int>(a.dim / CW);
  d.cap = down.cap;
  d.out = s.y;
  e = cudaFuncSetAttribute(moe_down_kernel<CW, kCtas, P>,
                           cudaFuncAttributeMaxDynamicSharedMemorySize, down.smem);
  if (e == cudaSuccess) {
    e = pdl::launch_dependent(moe_down_kernel<CW, kCtas, P>, dim3(down.grid), dim3(kThreads),
                              down.smem, st, d);
  }
  if (e != cudaSuccess) return e;
  if (a.shared_ready && (e = cudaStreamWaitEvent(st, a.shared_ready, 0)) != cudaSuccess) return e;
  const dim3 grid(static_cast<unsigned>((a.dim + 255) / 256), static_cast<unsigned>(a.tokens));
  return pdl::launch_dependent(moe::combine_kernel, grid, dim3(256), 0, st, a.experts,
                               static_cast<const int32_t*>(s.plan.slot_of), a.topk, a.dim,
                               static_cast<const float*>(s.y), a.shared, a.out);
}

}  // namespace

bool moe_routed_supports(const MoeRoutedArgs& a) {
  return a.dim >= 128 && a.dim % 128 == 0 && a.inter >= 128 && a.inter % 128 == 0 && a.topk >= 1 &&
         a.topk <= moe::kMaxTopk && a.num_experts >= 1 && a.num_experts <= moe::kPlanThreads &&
         a.tokens * a.topk < (int64_t{1} << 30);
}

size_t moe_routed_scratch_bytes(
    int64_t tokens, int topk, int num_experts, int64_t dim, int64_t inter) {
  return std::max(carve(nullptr, tokens, topk, num_experts, dim, inter, nullptr),
                  moe_routed_tc_scratch_bytes(tokens, topk, num_experts, dim, inter));
}

int moe_routed_pick(int64_t tokens, int topk, int num_experts) {
  // From the H200 sweep (docs/benchmarks.md, "persistent grouped GEMMs"), all at two CTAs per SM
  // and 32 columns per CTA (act_quant of h fused): four pairs per thread and chunk while most
  // experts get one or two rows (1, 8, 64 tokens of 384 experts: 0.69-0.75x session 5's time),
  // two for more rows per expert (256 tokens: the most rows per pass fit; still 1.02x slower).
  return tokens * topk <= 2 * int64_t{num_experts} ? 7 : 5;
}

cudaError_t moe_routed(const MoeRoutedArgs& a, void* scratch, cudaStream_t st) {
  if (a.tokens == 0) return cudaSuccess;
  if (!moe_routed_supports(a)) return cudaErrorInvalidValue;
  if (a.tensor_cores) return moe_routed_tc(a, scratch, st);
  Scratch s{};
  carve(scratch, a.tokens, a.topk, a.num_experts, a.dim, a.inter, &s);
  switch (a.tile_variant >= 0 ? a.tile_variant : moe_routed_pick(a.tokens, a.topk, a.num_experts)) {
    case 0:
      return launch_all<8, 1, 4>(a, s, st);
    case 1:
      return launch_all<16, 1, 4>(a, s, st);
    case 2:
      return launch_all<32, 1, 4>(a, s, st);
    case 3:
      return launch_all<8, 2, 2>(a, s, st);
    case 4:
      return launch_all<16, 2, 2>(a, s, st);
    case 5:
      return launch_all<32, 2, 2>(a, s, st);
    case 6:
      return launch_all<16, 2, 4>(a, s, st);
    case 7:
      return launch_all<32, 2, 4>(a, s, st);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace di::backend::cuda
