// The routed experts' grouped GEMMs on wgmma (sm_90a) for many rows per expert: moe_routed_tc's
// variants 6-8 (moe_grouped_tc.cu runs the plan with 128-row units and act_quant of x as e4m3
// bytes, and the combine, around them). Persistent CTAs of one producer and two consumer warpgroups
// over (unit, column tile) items; the K loop is moe_wgmma_pipe.cuh's. The outputs are the mma.sync
// kernels' bits: the same k16 steps per 32-block, the same promotion (folded or not, see the pipe),
// the same SwiGLU and act_quant epilogue per element; tested bitwise against them on every shape.
#include <cuda_fp16.h>

#include <algorithm>

#include "backend/cuda/moe_grouped_wgmma.h"
#include "backend/cuda/moe_plan.cuh"
#include "backend/cuda/moe_wgmma_pipe.cuh"

namespace di::backend::cuda {

namespace {

using moe_wg::Item;
using moe_wg::kCols;

struct WgArgs {
  moe::Plan p;
  const uint8_t* q;  // [rows, K] act_quant values (e4m3) in MMA order, and their scales
  const float* q_scale;
  ExpertMatrices m[2];  // w1, w3 (up) or w2 (down)
  int64_t K, N;
  int tiles;  // up: N / 64 (w1 and w3 columns together); down: N / 128
  float limit;
  uint8_t* out_q;  // up: act_quant(h) (e4m3, MMA order) and its scales
  float* out_scale;
  float* out;  // down: y
};

#if DI_WGMMA_ENABLED
// The up epilogue: columns 8j + 2 tig + c of the tile are w1 feature f0 + 8j + 2 tig + c for j < 8
// and w3's same feature at j + 8; h = swiglu (moe_tc_up_kernel's operations), then act_quant per
// 32-feature block (a token's 32 values sit in the 4 lanes of one quad: 8 each).
__device__ __forceinline__ void up_epilogue(const WgArgs& a,
                                            const Item& it,
                                            int tt0,
                                            const float (&acc)[64]) {
  const int tig = threadIdx.x % 4;
  const int64_t f0 = int64_t{it.tile} * 64;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int tt = tt0 + 8 * h;
    const int64_t slot = it.slot0 + min(tt, it.rows - 1);
    const float rw = __ldcg(a.p.weight_of + slot);
    float hv[2][8];
#pragma unroll
    for (int j = 0; j < 8; ++j) {
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        hv[j / 4][(j % 4) * 2 + c] =
            moe::swiglu_one(round_bf16(acc[4 * j + 2 * h + c]),
                            round_bf16(acc[4 * (j + 8) + 2 * h + c]), rw, a.limit);
      }
    }
#pragma unroll
    for (int qb = 0; qb < 2; ++qb) {
      float m = 0.0f;
#pragma unroll
      for (int i = 0; i < 8; ++i) m = fmaxf(m, fabsf(hv[qb][i]));
      m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
      m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
      if (tt >= it.rows) continue;
      const float s = moe::act_scale(m);
      const int64_t fb = f0 + 32 * qb;
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        a.out_q[slot * a.N + fb + moe::mma_pos(8 * (i / 2) + 2 * tig + i % 2)] =
            moe::e4m3_byte(moe::act_value(hv[qb][i], s));
      }
      if (tig == 0) a.out_scale[slot * (a.N / 32) + fb / 32] = s;
    }
  }
}

// The down epilogue: y[slot][f0 + column] = bf16(acc).
__device__ __forceinline__ void down_epilogue(const WgArgs& a,
                                              const Item& it,
                                              int tt0,
                                              const float (&acc)[64]) {
  const int tig = threadIdx.x % 4;
  const int64_t f0 = int64_t{it.tile} * kCols;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int tt = tt0 + 8 * h;
    if (tt >= it.rows) continue;
    float* y = a.out + (it.slot0 + tt) * a.N + f0 + 2 * tig;
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      *reinterpret_cast<float2*>(y + 8 * j) =
          make_float2(round_bf16(acc[4 * j + 2 * h]), round_bf16(acc[4 * j + 2 * h + 1]));
    }
  }
}
#endif

// kMats 2: the up GEMM (w1, w3 + SwiGLU + act_quant of h, tokens gathered through row_of);
// kMats 1: the down GEMM (w2, rows are the unit's slots).
// kSets: the consumers' block-sum sets (moe_wgmma_pipe.cuh); with 2 the consumers take 232
// registers and the producer 40, with 1 every thread has 168.
// kBSt: the converted B stages in the ring (moe_wgmma_pipe.cuh's Smem).
template <int kMats, bool kFold, int kSets, int kBSt>
__global__ void __launch_bounds__(moe_wg::kThreads, 1) moe_wg_kernel(WgArgs a) {
#if DI_WGMMA_ENABLED
  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw = mbar::smem_u32(smem_raw);
  const uint32_t sb = (raw + 1023) & ~1023u;
  unsigned char* const sm = smem_raw + (sb - raw);
  using Smem = moe_wg::Smem<kBSt>;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kBSt; ++s) {
      mbar::init(sb + Smem::kBarOff + 8 * s, 128);               // full: the producer's threads
      mbar::init(sb + Smem::kBarOff + 8 * (kBSt + s), 2 * 128);  // empty: both consumers' threads
    }
    mbar::init_fence();
  }
  __syncthreads();
  pdl::wait_for_previous_grid();  // the plan and the GEMM input are the previous launches'
  pdl::release_next_grid();
  const int64_t items = int64_t{__ldcg(a.p.num_units)} * a.tiles;
  const int nst = static_cast<int>(a.K / moe_wg::kStageK);
  const int wgi = threadIdx.x / 128;
  int gs = 0;
  auto item_of = [&](int64_t i) {
    const moe::Unit un = moe::unit_of(a.p, static_cast<int>(i / a.tiles), moe_wg::kRows);
    return Item{un.expert, un.slot0, un.rows, static_cast<int>(i % a.tiles)};
  };
  if (wgi == 0) {
    if constexpr (kSets == 2) wg::setmaxnreg_dec<40>();
    for (int64_t i = blockIdx.x; i < items; i += gridDim.x) {
      const Item it = item_of(i);
      const bool w3 = kMats == 2 && threadIdx.x >= 64;  // (a select: no local-memory index)
      const ExpertMatrices& mat = w3 ? a.m[1] : a.m[0];
      moe_wg::produce<kMats, kFold, kSets == 1, kBSt>(it, nst, a.K, mat.data[it.expert],
                                                      mat.scale[it.expert], sm, sb, gs);
    }
    return;
  }
  if constexpr (kSets == 2) wg::setmaxnreg_inc<232>();
  const int t = threadIdx.x % 128;
  const int tt0 = 64 * (wgi - 1) + 16 * (t / 32) + (t % 32) / 4;  // the accumulators' first token
  for (int64_t i = blockIdx.x; i < items; i += gridDim.x) {
    const Item it = item_of(i);
    const int tl = min(64 * (wgi - 1) + t / 2, it.rows - 1);  // the row this thread copies
    const int64_t src = kMats == 2 ? __ldcg(a.p.row_of + it.slot0 + tl) : it.slot0 + tl;
    float acc[64];
    moe_wg::consume<kSets, kBSt>(nst, a.K, a.q, a.q_scale, src, sm, sb, wgi - 1, gs, acc);
    if constexpr (kMats == 2) {
      up_epilogue(a, it, tt0, acc);
    } else {
      down_epilogue(a, it, tt0, acc);
    }
  }
#endif
}

template <int kMats, bool kFold, int kSets, int kBSt>
cudaError_t launch(const WgArgs& a, int64_t max_items, cudaStream_t st) {
  using Smem = moe_wg::Smem<kBSt>;
  auto* kernel = moe_wg_kernel<kMats, kFold, kSets, kBSt>;
  int device = 0, sms = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (e == cudaSuccess) {
    e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Smem::kBytes);
  }
  if (e != cudaSuccess) return e;
  const auto grid = static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(max_items, sms)));
  return pdl::launch_dependent(kernel, dim3(grid), dim3(moe_wg::kThreads), Smem::kBytes, st, a);
}

template <int kMats>
cudaError_t launch_mode(int mode, const WgArgs& a, int64_t max_items, cudaStream_t st) {
  // The pick (0) keeps four converted B stages in flight: 1 % faster than two at 1K-16K tokens
  // (docs/benchmarks.md, session 26); 3 is that two-stage ring, for comparison.
  switch (mode) {
    case 0:
      return launch<kMats, true, 1, 4>(a, max_items, st);
    case 1:
      return launch<kMats, false, 1, 2>(a, max_items, st);
    case 2:
      return launch<kMats, true, 2, 2>(a, max_items, st);
    case 3:
      return launch<kMats, true, 1, 2>(a, max_items, st);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace

bool moe_wgmma_available() {
  int device = 0, major = 0, minor = 0;
  return cudaGetDevice(&device) == cudaSuccess &&
         cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
         cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) == cudaSuccess &&
         major == 9 && minor == 0;
}

cudaError_t moe_wgmma_gemms(const MoeRoutedArgs& a,
                            const MoeWgmmaBuffers& b,
                            int mode,
                            cudaStream_t st) {
  const int64_t pairs = a.tokens * a.topk;
  const int64_t units = std::min(
      pairs, std::min<int64_t>(a.num_experts, pairs) + (pairs + moe_wg::kRows - 1) / moe_wg::kRows);
  WgArgs up{};
  up.p = b.plan;
  up.q = b.qx;
  up.q_scale = b.sx;
  up.m[0] = a.w1;
  up.m[1] = a.w3;
  up.K = a.dim;
  up.N = a.inter;
  up.tiles = static_cast<int>(a.inter / 64);
  up.limit = a.swiglu_limit;
  up.out_q = b.qh;
  up.out_scale = b.sh;
  cudaError_t e = launch_mode<2>(mode, up, units * up.tiles, st);
  if (e != cudaSuccess) return e;
  WgArgs down = up;
  down.q = b.qh;
  down.q_scale = b.sh;
  down.m[0] = a.w2;
  down.m[1] = {};
  down.K = a.inter;
  down.N = a.dim;
  down.tiles = static_cast<int>(a.dim / kCols);
  down.out = b.y;
  return launch_mode<1>(mode, down, units * down.tiles, st);
}

}  // namespace di::backend::cuda
