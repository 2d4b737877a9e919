// Routed experts on tensor cores: the `tensor` GEMM path's moe_routed (moe_grouped.h). The same
// four launches as the CUDA-core path (plan + act_quant of x, grouped w1/w3 + SwiGLU + act_quant
// of h, grouped w2, combine) and the same device-side plan, but the grouped GEMMs are f16
// mma.sync products over cp.async-staged tiles of 128 output features x 8-32 rows of one expert
// (4 warps of 32 features or 8 warps of 16: the variants differ in warps per SM only; at 1-8
// rows per expert the same tile through moe_tc_decode.cuh's leaner per-stage code).
//
// Numerics (docs/notes/cuda-kernels.md, "Session 7: the routed experts on tensor cores"): e2m1
// weights and e4m3 activations are both exact in f16, so per 32-block the two m16n8k16 f16 MMAs
// (fp32 accumulation, the second onto the first) give the block sum of q * w with fp32 rounding
// only; the block sum is then promoted in K order, acc = fma(sum, a_scale * w_scale, acc), the
// CPU's sequence with the tensor core's sum in place of the 8-lane one. The weights enter the MMA
// as their e2m1 bits shifted into f16 fields (value * 2^-14: three instructions per pair, no
// table), and the promotion scale carries the 2^14 back (a power of two: the product is the same
// bits). Batch invariance: an MMA output element depends on its row of A and column of B only, the
// K order is fixed, and the combine adds in expert order; the variants change only which warp holds
// a column, so every token count takes the same arithmetic (tested: variants bitwise equal, a token
// alone = in 300 tokens).
#include <cuda_fp16.h>

#include <algorithm>

#include "backend/cuda/device_numeric.cuh"
#include "backend/cuda/grid_dependency.cuh"
#include "backend/cuda/moe_combine.cuh"
#include "backend/cuda/moe_grouped.h"
#include "backend/cuda/moe_grouped_wgmma.h"
#include "backend/cuda/moe_plan.cuh"
#include "backend/cuda/moe_tc_decode.cuh"
#include "backend/cuda/moe_tc_tile.cuh"

namespace di::backend::cuda {

namespace {

using moe::Plan;
using moe_tc::item_product;
using moe_tc::kFeat;
using moe_tc::kThreadsFor;
using moe_tc::Layout;

struct TcArgs {
  Plan p;
  const uint16_t* q;  // [rows, K] act_quant values of the GEMM input, f16 in MMA order
  const float* q_scale;
  ExpertMatrices m[2];  // w1, w3 (up) or w2 (down)
  int64_t K, N;
  int tiles;  // N / kFeat
  float limit;
  uint16_t* out_q;  // up: act_quant(h) (f16, MMA order) and its scales
  float* out_scale;
  float* out;  // down: y
};

using moe::Unit;
using moe::unit_of;

// Threads of a GEMM kernel: kMi's warps, times the decode product's warp groups.
template <int kMi, int kDecode>
inline constexpr int kKernelThreads = kThreadsFor<kMi>*(kDecode > 1 ? kDecode : 1);

// h[slot] = swiglu(bf16(x w1^T), bf16(x w3^T), weight) and act_quant(h) per 32-feature block:
// a token's 32 values sit in the 8 lanes of one tig of one warp (kMi = 2) or of two warps (kMi =
// 1: the halves' maxima meet in shared memory; max is order-free, so both give the same scale).
// With decode warp groups (kDecode 2) the first group's warps hold the products and store.
template <int NT, int kMi, int ST, int kDecode = 0>
__global__ void __launch_bounds__(kKernelThreads<kMi, kDecode>, 2 / (kDecode > 1 ? kDecode : 1))
    moe_tc_up_kernel(TcArgs a) {
  constexpr int kPerBlock = 2 / kMi;             // warps per act_quant block
  constexpr int kWarps = kThreadsFor<kMi> / 32;  // warps holding products
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ int rows[8 * NT];
  __shared__ float half_amax[kWarps][8 * NT];
  pdl::wait_for_previous_grid();  // the plan and act_quant(x) are the previous launch's
  pdl::release_next_grid();
  const int lane = threadIdx.x % 32, g = lane / 4, tig = lane % 4;
  const int warp = (threadIdx.x / 32) % kWarps;
  const bool holder = static_cast<int>(threadIdx.x) < kThreadsFor<kMi>;
  const int64_t items = int64_t{__ldcg(a.p.num_units)} * a.tiles;
  for (int64_t it = blockIdx.x; it < items; it += gridDim.x) {
    const int tile = static_cast<int>(it % a.tiles);
    const Unit un = unit_of(a.p, static_cast<int>(it / a.tiles), 8 * NT);
    if (threadIdx.x < 8 * NT) {
      rows[threadIdx.x] =
          __ldcg(a.p.row_of + un.slot0 + min(static_cast<int>(threadIdx.x), un.rows - 1));
    }
    __syncthreads();
    const uint8_t* const w[2] = {a.m[0].data[un.expert], a.m[1].data[un.expert]};
    const uint8_t* const ws[2] = {a.m[0].scale[un.expert], a.m[1].scale[un.expert]};
    float acc[2][kMi][NT][4];
    const int64_t f0 = int64_t{tile} * kFeat;
    item_product<kDecode, 2, NT, kMi, ST>(a.q, a.q_scale, a.K, smem, w, ws, f0, rows, un.rows, acc);
    // (every thread runs on to the barrier below; only holders write)
    const int64_t fb = f0 + (warp / kPerBlock) * 32;  // the act_quant block
    const int j0 = (warp % kPerBlock) * 16 * kMi;     // this warp's first feature in it
    float h[NT][2][2 * kMi], amax[NT][2];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
      for (int p = 0; p < 2; ++p) {
        const int t = nt * 8 + 2 * tig + p;
        const float rw = __ldcg(a.p.weight_of + un.slot0 + min(t, un.rows - 1));
        float m = 0.0f;
#pragma unroll
        for (int i = 0; i < 2 * kMi; ++i) {  // i = mi * 2 + half: feature j0 + i * 8 + g
          const int c = (i % 2) * 2 + p;
          h[nt][p][i] = moe::swiglu_one(round_bf16(acc[0][i / 2][nt][c]),
                                        round_bf16(acc[1][i / 2][nt][c]), rw, a.limit);
          m = fmaxf(m, fabsf(h[nt][p][i]));
        }
        for (int o = 4; o < 32; o *= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
        amax[nt][p] = m;
        if (kPerBlock > 1 && g == 0 && holder) half_amax[warp][t] = m;
      }
    }
    if constexpr (kPerBlock > 1) {
      __syncthreads();  // (the next item's writes follow tile_product's barriers)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
        for (int p = 0; p < 2; ++p) {
          amax[nt][p] = fmaxf(amax[nt][p], half_amax[warp ^ 1][nt * 8 + 2 * tig + p]);
        }
      }
    }
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
      for (int p = 0; p < 2; ++p) {
        const int t = nt * 8 + 2 * tig + p;
        if (t >= un.rows || !holder) continue;
        const int64_t slot = un.slot0 + t;
        const float s = moe::act_scale(amax[nt][p]);
#pragma unroll
        for (int i = 0; i < 2 * kMi; ++i) {
          a.out_q[slot * a.N + fb + moe::mma_pos(j0 + (i / 2) * 16 + (i % 2) * 8 + g)] =
              __half_as_ushort(__float2half_rn(moe::act_value(h[nt][p][i], s)));
        }
        if (j0 == 0 && g == 0) a.out_scale[slot * (a.N / 32) + fb / 32] = s;
      }
    }
  }
}

// y[slot] = bf16(h[slot] w2^T) for the rows of each item.
template <int NT, int kMi, int ST, int kDecode = 0>
__global__ void __launch_bounds__(kThreadsFor<kMi>, 2) moe_tc_down_kernel(TcArgs a) {
  static_assert(kDecode <= 1, "the down kernel's products are in every warp");
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ int rows[8 * NT];
  pdl::wait_for_previous_grid();  // act_quant(h) is the previous launch's (the plan, transitively)
  pdl::release_next_grid();
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, tig = lane % 4;
  const int64_t items = int64_t{__ldcg(a.p.num_units)} * a.tiles;
  for (int64_t it = blockIdx.x; it < items; it += gridDim.x) {
    const int tile = static_cast<int>(it % a.tiles);
    const Unit un = unit_of(a.p, static_cast<int>(it / a.tiles), 8 * NT);
    if (threadIdx.x < 8 * NT)
      rows[threadIdx.x] = un.slot0 + min(static_cast<int>(threadIdx.x), un.rows - 1);
    __syncthreads();
    const uint8_t* const w[1] = {a.m[0].data[un.expert]};
    const uint8_t* const ws[1] = {a.m[0].scale[un.expert]};
    float acc[1][kMi][NT][4];
    const int64_t f0 = int64_t{tile} * kFeat;
    item_product<kDecode, 1, NT, kMi, ST>(a.q, a.q_scale, a.K, smem, w, ws, f0, rows, un.rows, acc);
#pragma unroll
    for (int mi = 0; mi < kMi; ++mi) {
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const int t = nt * 8 + 2 * tig + c % 2;
          const int64_t f = f0 + warp * 16 * kMi + mi * 16 + (c / 2) * 8 + g;
          if (t < un.rows) a.out[(un.slot0 + t) * a.N + f] = round_bf16(acc[0][mi][nt][c]);
        }
      }
    }
  }
}

// Scratch pieces, 256-byte aligned, in one order for sizing and carving.
struct Scratch {
  uint16_t *qx, *qh;
  float *sx, *sh, *y;
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
  const size_t T = static_cast<size_t>(tokens), D = static_cast<size_t>(dim);
  const size_t I = static_cast<size_t>(inter);
  Scratch r{};
  r.qx = static_cast<uint16_t*>(take(2 * T * D));
  r.sx = static_cast<float*>(take(4 * T * D / 32));
  r.qh = static_cast<uint16_t*>(take(2 * P * I));
  r.sh = static_cast<float*>(take(4 * P * I / 32));
  r.y = static_cast<float*>(take(4 * P * D));
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

// A persistent grid for `kernel`: at most the resident CTAs, at most one per item of the most
// units the plan can make (host-known sizes only).
template <class Kernel>
cudaError_t grid_for(Kernel kernel, int threads, int smem, int64_t items, unsigned* grid) {
  int device = 0, sms = 0, per_sm = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (e == cudaSuccess) {
    e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  }
  if (e == cudaSuccess) {
    e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem);
  }
  if (e != cudaSuccess) return e;
  *grid = static_cast<unsigned>(
      std::max<int64_t>(1, std::min<int64_t>(items, int64_t{sms} * std::max(per_sm, 1))));
  return cudaSuccess;
}

// The plan (units of rpp rows) and act_quant of x: f16 in MMA order, or (fp8) e4m3 bytes in the
// same order for the wgmma GEMMs (in the same scratch piece).
cudaError_t launch_plan(
    const MoeRoutedArgs& a, const Scratch& s, int64_t rpp, bool fp8, cudaStream_t st) {
  const int64_t pairs = a.tokens * a.topk, x_blocks = a.tokens * a.dim / 32;
  moe::PlanArgs pa{a.experts, a.weights,     static_cast<int>(pairs),
                   a.topk,    a.num_experts, static_cast<int>(rpp),
                   a.x,       x_blocks,      nullptr,
                   s.sx,      s.qx};
  if (fp8) {
    pa.qx16 = nullptr;
    pa.qx8 = reinterpret_cast<uint8_t*>(s.qx);
  }
  const int64_t qctas = std::min<int64_t>((x_blocks + 31) / 32, 256);
  pdl::launch_dependent(moe::plan_kernel, dim3(static_cast<unsigned>(1 + qctas)),
                        dim3(moe::kPlanThreads), 0, st, pa, s.plan);
  return cudaGetLastError();
}

cudaError_t launch_combine(const MoeRoutedArgs& a, const Scratch& s, cudaStream_t st) {
  if (a.shared_ready) {
    if (const cudaError_t e = cudaStreamWaitEvent(st, a.shared_ready, 0); e != cudaSuccess)
      return e;
  }
  const dim3 cgrid(static_cast<unsigned>((a.dim + 255) / 256), static_cast<unsigned>(a.tokens));
  return pdl::launch_dependent(moe::combine_kernel, cgrid, dim3(256), 0, st, a.experts,
                               static_cast<const int32_t*>(s.plan.slot_of), a.topk, a.dim,
                               static_cast<const float*>(s.y), a.shared, a.out);
}

// Launches one expert GEMM with the ring `ST` deep; on the grid of `items` work items (a grid
// never larger than one wave of resident CTAs; extra items loop).
template <class Kernel>
cudaError_t launch_gemm(
    Kernel kernel, int threads, int smem, int64_t items, const TcArgs& args, cudaStream_t st) {
  unsigned grid = 1;
  cudaError_t e = grid_for(kernel, threads, smem, items, &grid);
  if (e == cudaSuccess) {
    e = pdl::launch_dependent(kernel, dim3(grid), dim3(threads), smem, st, args);
  }
  return e;
}

// Whether `items` fit in one wave of `kernel` (resident CTAs on every SM at `smem`).
template <class Kernel>
bool one_wave(Kernel kernel, int threads, int smem, int64_t items) {
  unsigned grid = 1;
  return grid_for(kernel, threads, smem, items, &grid) == cudaSuccess && grid >= items;
}

// The up and down GEMMs of one variant. Single-row-group units (NT = 1, decode sizes) take the
// deeper ring when their whole grid fits in one wave with it (`deep`: -1 by that rule, 1 always):
// the same operations in the same order, only more weight bytes in flight per CTA. kUpDec /
// kDownDec: the decode product's warp groups (0: the tile product).
template <int NT, int kMi, int kUpDec = 0, int kDownDec = 0>
cudaError_t launch_tc(const MoeRoutedArgs& a, const Scratch& s, cudaStream_t st, int deep = -1) {
  const int64_t pairs = a.tokens * a.topk, rpp = 8 * NT;
  const int64_t units =
      std::min(pairs, std::min<int64_t>(a.num_experts, pairs) + (pairs + rpp - 1) / rpp);
  cudaError_t e = launch_plan(a, s, rpp, false, st);
  if (e != cudaSuccess) return e;

  TcArgs up{};
  up.p = s.plan;
  up.q = s.qx;
  up.q_scale = s.sx;
  up.m[0] = a.w1;
  up.m[1] = a.w3;
  up.K = a.dim;
  up.N = a.inter;
  up.tiles = static_cast<int>(a.inter / kFeat);
  up.limit = a.swiglu_limit;
  up.out_q = s.qh;
  up.out_scale = s.sh;
  TcArgs down = up;
  down.q = s.qh;
  down.q_scale = s.sh;
  down.m[0] = a.w2;
  down.m[1] = {};
  down.K = a.inter;
  down.N = a.dim;
  down.tiles = static_cast<int>(a.dim / kFeat);
  down.out = s.y;
  constexpr int kUpThreads = kKernelThreads<kMi, kUpDec>, kThreads = kThreadsFor<kMi>;
  constexpr int kSplit = moe_tc::kSplitBytes<2, (kUpDec > 1 ? kUpDec : 1)>;
  constexpr int kUp = Layout<2, NT>::kBytes + kSplit, kDown = Layout<1, NT>::kBytes;
  if constexpr (NT == 1) {
    constexpr int kUpDeep = Layout<2, NT, moe_tc::kStagesDeep>::kBytes + kSplit,
                  kDownDeep = Layout<1, NT, moe_tc::kStagesDeep>::kBytes;
    auto* up_deep = moe_tc_up_kernel<NT, kMi, moe_tc::kStagesDeep, kUpDec>;
    auto* down_deep = moe_tc_down_kernel<NT, kMi, moe_tc::kStagesDeep, kDownDec>;
    e = deep > 0 || (deep < 0 && one_wave(up_deep, kUpThreads, kUpDeep, units * up.tiles))
            ? launch_gemm(up_deep, kUpThreads, kUpDeep, units * up.tiles, up, st)
            : launch_gemm(moe_tc_up_kernel<NT, kMi, moe_tc::kStages, kUpDec>, kUpThreads, kUp,
                          units * up.tiles, up, st);
    if (e != cudaSuccess) return e;
    e = deep > 0 || (deep < 0 && one_wave(down_deep, kThreads, kDownDeep, units * down.tiles))
            ? launch_gemm(down_deep, kThreads, kDownDeep, units * down.tiles, down, st)
            : launch_gemm(moe_tc_down_kernel<NT, kMi, moe_tc::kStages, kDownDec>, kThreads, kDown,
                          units * down.tiles, down, st);
  } else {
    e = launch_gemm(moe_tc_up_kernel<NT, kMi, moe_tc::kStages>, kThreads, kUp, units * up.tiles, up,
                    st);
    if (e != cudaSuccess) return e;
    e = launch_gemm(moe_tc_down_kernel<NT, kMi, moe_tc::kStages>, kThreads, kDown,
                    units * down.tiles, down, st);
  }
  if (e != cudaSuccess) return e;
  return launch_combine(a, s, st);
}

// The wgmma GEMMs (moe_grouped_wgmma.cu) over 128-row units; on devices without wgmma the
// 32-row mma.sync variant, which gives the same bits.
cudaError_t launch_wg(const MoeRoutedArgs& a, const Scratch& s, int mode, cudaStream_t st) {
  if (!moe_wgmma_available()) return launch_tc<4, 2>(a, s, st);
  cudaError_t e = launch_plan(a, s, kMoeWgmmaUnitRows, true, st);
  if (e != cudaSuccess) return e;
  const MoeWgmmaBuffers b{reinterpret_cast<const uint8_t*>(s.qx),
                          s.sx,
                          reinterpret_cast<uint8_t*>(s.qh),
                          s.sh,
                          s.y,
                          s.plan};
  e = moe_wgmma_gemms(a, b, mode, st);
  if (e != cudaSuccess) return e;
  return launch_combine(a, s, st);
}

}  // namespace

int moe_routed_tc_pick(int64_t tokens, int topk, int num_experts) {
  // Rows per unit from the expected rows per expert (host-known): all variants give the same
  // bits, so this only trades weight re-reads against idle MMA columns. Single-group units take
  // the decode product (10: faster than the tile product 3 at 1-8 tokens and than its K-split
  // form 11 everywhere; docs/benchmarks.md, moe14).
  const int64_t per = (tokens * topk + num_experts - 1) / num_experts;
  if (per >= kMoeWgmmaMinRows && moe_wgmma_available()) return 6;
  return per <= 8 ? 10 : per <= 16 ? 4 : 2;
}

size_t moe_routed_tc_scratch_bytes(
    int64_t tokens, int topk, int num_experts, int64_t dim, int64_t inter) {
  return carve(nullptr, tokens, topk, num_experts, dim, inter, nullptr);
}

cudaError_t moe_routed_tc(const MoeRoutedArgs& a, void* scratch, cudaStream_t st) {
  if (a.tokens == 0) return cudaSuccess;
  if (!moe_routed_supports(a)) return cudaErrorInvalidValue;
  Scratch s{};
  carve(scratch, a.tokens, a.topk, a.num_experts, a.dim, a.inter, &s);
  const int v =
      a.tile_variant >= 0 ? a.tile_variant : moe_routed_tc_pick(a.tokens, a.topk, a.num_experts);
  switch (v) {
    case 0:
      return launch_tc<1, 2>(a, s, st);
    case 1:
      return launch_tc<2, 2>(a, s, st);
    case 2:
      return launch_tc<4, 2>(a, s, st);
    case 3:
      return launch_tc<1, 1>(a, s, st);
    case 4:
      return launch_tc<2, 1>(a, s, st);
    case 5:
      return launch_tc<4, 1>(a, s, st);
    case 6:
    case 7:
    case 8:
      return launch_wg(a, s, v - 6, st);
    case 9:  // 3 with the deep ring whatever the grid (tests compare it bitwise)
      return launch_tc<1, 1>(a, s, st, /*deep=*/1);
    case 10:  // 3 with the decode product (moe_tc_decode.cuh)
      return launch_tc<1, 1, 1, 1>(a, s, st);
    case 11:  // 10 with the up product's K split over two warp groups
      return launch_tc<1, 1, 2, 1>(a, s, st);
    case 12:  // 6 with two converted B stages in its ring (6 before session 26)
      return launch_wg(a, s, 3, st);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace di::backend::cuda
