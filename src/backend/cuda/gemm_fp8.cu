// The `--cuda-gemm fp8` prefill GEMM (docs/notes/cuda-kernels.md, "pgemm3"): FP8 wgmma
// (e4m3 x e4m3, both operands from shared memory by TMA), one k32 instruction per 32-wide scale
// block started from zero, promoted in K order: acc = fma(block_sum, a_scale * w_scale, acc), bf16
// at the end. The numerics are gemm_wgmma.cu's (an output depends only on its row of A and column
// of B), so every configuration here gives that kernel's bits (tested); only the schedule differs:
// - a persistent grid: one CTA per SM walks the tiles (n fastest, so concurrent CTAs share A rows
//   and the weight stays in L2); its producer runs ahead across tile edges, so one tile's epilogue
//   overlaps the next one's loads;
// - SETS block-sum register sets per consumer warpgroup, rotated in a straight-line body of
//   4 * SPD blocks: SETS - 1 wgmmas are in flight while the oldest set is promoted; the body
//   drains at its end (carried across the loop, ptxas serializes every wgmma: C7514);
// - the weight scales of a stage are decoded to floats by the producer and written into shared
//   memory next to the TMA tiles, the activation scales come by TMA: per block a consumer thread
//   reads 3 words and multiplies 2 x BN / 32 scale products before its BN / 2 promotion FFMAs.
//   Each consumer warpgroup runs a serial chain (wait for block b, promote it, issue block b + 2
//   into the freed set), so every instruction of the promotion lengthens it: 64 extra LOPs per
//   block measured +40 % (docs/notes/cuda-kernels.md, pgemm3).
#include <algorithm>
#include <type_traits>

#include "backend/cuda/device_numeric.cuh"
#include "backend/cuda/gemm_fp8.h"
#include "backend/cuda/grid_dependency.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/tensor_map.h"
#include "backend/cuda/wgmma_ptx.cuh"
#include "backend/cuda/wgmma_store.cuh"

namespace di::backend::cuda {

namespace {

constexpr int kStageK = 128;  // K bytes per stage: 4 k32 blocks, one 128-byte swizzle row

constexpr int align1k(int b) {
  return (b + 1023) / 1024 * 1024;
}

template <int CONS, int BN, int ST>
struct Fp8Config {
  static constexpr int kBM = 64 * CONS;
  static constexpr int kThreads = 128 * (CONS + 1);
  static constexpr int kA = align1k(kBM * kStageK), kB = align1k(BN * kStageK);
  // activation scales [kBM][4] floats (TMA), then the weight scales [4 blocks][4 groups] floats
  // (producer; groups past BN / 32 unused)
  static constexpr int kS = align1k(kBM * 16 + 64);
  static constexpr int kStage = kA + kB + kS;
  static constexpr uint32_t kTx = kBM * kStageK + BN * kStageK + kBM * 16;
  static constexpr int kSmem = ST * kStage + 1024 + 1024;  // + barriers + 1024-byte alignment
  static_assert(kSmem <= 227 * 1024, "shared memory per block");
  // Registers per consumer thread after setmaxnreg (the producer keeps 40).
  static constexpr int kConsRegs = CONS == 2 ? 232 : 152;
  static_assert(BN <= 128, "four weight-scale groups per block");
  static_assert(kTx % 16 == 0, "TMA transfers whole 16-byte units");
  static_assert(kConsRegs * 128 * CONS + 40 * 128 <= 65536, "register file");
};

#if DI_WGMMA_ENABLED
template <int BN>
__device__ __forceinline__ void wgmma_k32(float (&d)[BN / 2], uint64_t a, uint64_t b) {
  if constexpr (BN == 128) {
    wg::wgmma_m64n128k32(d, a, b);
  } else if constexpr (BN == 96) {
    wg::wgmma_m64n96k32(d, a, b);
  } else {
    static_assert(BN == 64, "BN is 64, 96 or 128");
    wg::wgmma_m64n64k32(d, a, b);
  }
}

// wgmma.wait_group with a count known only after unrolling (the switch folds away).
__device__ __forceinline__ void wait_pending(int n) {
  switch (n) {
    case 0:
      wg::wgmma_wait<0>();
      break;
    case 1:
      wg::wgmma_wait<1>();
      break;
    case 2:
      wg::wgmma_wait<2>();
      break;
    default:
      wg::wgmma_wait<3>();
      break;
  }
}
#endif

// ta: e4m3 activations [rows, K]; tb: e4m3 weights [N, K]; ts: fp32 activation scales
// [rows, K/32]; wscale: ue8m0 weight scales [ceil(N/32), K/32]; y: [rows, N] (bf16 values).
// K % 128 == 0 (the launcher checks).
template <int CONS, int BN, int ST, int SETS, int SPD>
__global__ void __launch_bounds__(128 * (CONS + 1), 1)
    fp8_gemm_persistent(const __grid_constant__ CUtensorMap ta,
                        const __grid_constant__ CUtensorMap tb,
                        const __grid_constant__ CUtensorMap ts,
                        const uint8_t* wscale,
                        int rows,
                        int N,
                        int nblk,
                        float* y) {
  pdl::enter_dependent_grid();
#if DI_WGMMA_ENABLED
  using C = Fp8Config<CONS, BN, ST>;
  constexpr int R = BN / 2;   // accumulator floats per thread
  constexpr int G = BN / 32;  // 32-column weight-scale groups per tile
  extern __shared__ uint8_t smem_raw[];
  const uint32_t raw = mbar::smem_u32(smem_raw);
  const uint32_t base = (raw + 1023) & ~1023u;  // the 128-byte swizzle needs 1024-byte alignment
  uint8_t* const base_ptr = smem_raw + (base - raw);
  const uint32_t bars = base + ST * C::kStage;  // full[ST], then empty[ST]
  auto full = [&](int s) { return bars + 8 * s; };
  auto empty = [&](int s) { return bars + 8 * (ST + s); };
  auto a_at = [&](int s) { return base + s * C::kStage; };
  auto b_at = [&](int s) { return a_at(s) + C::kA; };
  auto s_at = [&](int s) { return b_at(s) + C::kB; };
  const int num_stages = nblk / 4;
  const int n_tiles = (N + BN - 1) / BN;
  const int tiles = n_tiles * ((rows + C::kBM - 1) / C::kBM);
  const int wrows = (N + 31) / 32;
  const int wgi = threadIdx.x / 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < ST; ++s) {
      mbar::init(full(s), 1);
      mbar::init(empty(s), CONS * 128);
    }
    mbar::init_fence();
  }
  __syncthreads();

  if (wgi == 0) {  // producer: one thread, running ahead across tile edges
    wg::setmaxnreg_dec<40>();
    if (threadIdx.x == 0) {
      int it = 0;
      for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        const int m0 = tile / n_tiles * C::kBM, n0 = tile % n_tiles * BN;
        for (int st = 0; st < num_stages; ++st, ++it) {
          const int slot = it % ST;
          if (it >= ST) mbar::wait(empty(slot), ((it / ST) - 1) & 1);
          // The stage's weight scales as floats [block][group], before the arrive that publishes
          // them (one word of 4 ue8m0 blocks per group).
          float* wsm = reinterpret_cast<float*>(base_ptr + (s_at(slot) - base) + C::kBM * 16);
#pragma unroll
          for (int c = 0; c < G; ++c) {
            const int r = min(n0 / 32 + c, wrows - 1);  // past N: any valid row (outputs unused)
            const uint32_t v = __ldg(
                reinterpret_cast<const uint32_t*>(wscale + static_cast<int64_t>(r) * nblk) + st);
#pragma unroll
            for (int kk = 0; kk < 4; ++kk) {
              wsm[4 * kk + c] = e8m0_to_float(static_cast<uint8_t>(v >> (8 * kk)));
            }
          }
          mbar::arrive_expect_tx(full(slot), C::kTx);
          wg::tma_load_2d(a_at(slot), &ta, st * kStageK, m0, full(slot));
          wg::tma_load_2d(b_at(slot), &tb, st * kStageK, n0, full(slot));
          wg::tma_load_2d(s_at(slot), &ts, st * 4, m0, full(slot));
        }
      }
    }
    return;
  }

  wg::setmaxnreg_inc<C::kConsRegs>();
  const int t = threadIdx.x % 128;
  const int row = (wgi - 1) * 64 + (t / 32) * 16 + (t % 32) / 4;  // tile row of S[4j+0/1]; +8
  float acc[R], S[SETS][R];
  float lo[G], hi[G];
  // Block b of the tile's current body: issue its wgmma into set b % SETS.
  auto issue = [&](int it0, int b) {
    const int it = it0 + b / 4, kk = b % 4, slot = it % ST;
    if (kk == 0) mbar::wait(full(slot), (it / ST) & 1);
    const uint64_t da = wg::desc_sw128(a_at(slot) + (wgi - 1) * 64 * kStageK + kk * 32);
    const uint64_t db = wg::desc_sw128(b_at(slot) + kk * 32);
    wg::fence_regs(S[b % SETS]);
    wg::wgmma_fence();
    wgmma_k32<BN>(S[b % SETS], da, db);
    wg::wgmma_commit();
  };
  // Block b's wgmma has completed: fold its sums into acc; release the stage after its last block.
  auto retire = [&](int it0, int b) {
    float(&s)[R] = S[b % SETS];
    wg::fence_regs(s);
    const int it = it0 + b / 4, kk = b % 4, slot = it % ST;
    const uint8_t* sp = base_ptr + (s_at(slot) - base);
    const float* sa = reinterpret_cast<const float*>(sp);
    const float4 ws = *reinterpret_cast<const float4*>(sp + C::kBM * 16 + 16 * kk);
    const float a_lo = sa[row * 4 + kk], a_hi = sa[(row + 8) * 4 + kk];
    const float wsv[4] = {ws.x, ws.y, ws.z, ws.w};
#pragma unroll
    for (int c = 0; c < G; ++c) {
      // activation scale x weight scale: powers of two, exact (as gemm_tc.cu)
      lo[c] = __fmul_rn(a_lo, wsv[c]);
      hi[c] = __fmul_rn(a_hi, wsv[c]);
    }
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
      acc[4 * j + 0] = __fmaf_rn(s[4 * j + 0], lo[j / 4], acc[4 * j + 0]);
      acc[4 * j + 1] = __fmaf_rn(s[4 * j + 1], lo[j / 4], acc[4 * j + 1]);
      acc[4 * j + 2] = __fmaf_rn(s[4 * j + 2], hi[j / 4], acc[4 * j + 2]);
      acc[4 * j + 3] = __fmaf_rn(s[4 * j + 3], hi[j / 4], acc[4 * j + 3]);
    }
    if (kk == 3) mbar::arrive(empty(slot));
  };
  // NB blocks in straight line: block i issued at step i, block i - (SETS - 1) retired after it.
  auto body = [&](int it0, auto nb) {
    constexpr int NB = decltype(nb)::value;
#pragma unroll
    for (int i = 0; i < NB + SETS - 1; ++i) {
      if (i < NB) issue(it0, i);
      const int r = i - (SETS - 1);
      if (r >= 0) {
        wait_pending((i < NB ? i : NB - 1) - r);
        retire(it0, r);
      }
    }
  };

  int it = 0;
  for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int m0 = tile / n_tiles * C::kBM, n0 = tile % n_tiles * BN;
#pragma unroll
    for (int i = 0; i < R; ++i) acc[i] = 0.0f;
    int st = 0;
    for (; st + SPD <= num_stages; st += SPD) {
      body(it + st, std::integral_constant<int, 4 * SPD>{});
    }
    for (; st < num_stages; ++st) body(it + st, std::integral_constant<int, 4>{});
    it += num_stages;

    const int m_lo = m0 + row;
    const int ncol = n0 + 2 * (t % 4);
    wg::store_rows_bf16<BN>(acc, m_lo, ncol, rows, N, y);
  }
#endif
}

template <int CONS, int BN, int ST, int SETS, int SPD>
cudaError_t launch(const uint8_t* qa,
                   const float* sc,
                   int64_t rows,
                   const DeviceWeight& w,
                   float* y,
                   cudaStream_t s) {
  using C = Fp8Config<CONS, BN, ST>;
  const uint64_t K = static_cast<uint64_t>(w.in_features),
                 N = static_cast<uint64_t>(w.out_features);
  const uint64_t M = static_cast<uint64_t>(rows), nblk = K / 32;
  static_assert(kStageK == 128, "fp8_gemm_tensor_maps' boxes are 128 K wide");
  CUtensorMap ta{}, tb{}, ts{};
  cudaError_t e = fp8_gemm_tensor_maps(qa, sc, M, w.data, N, K, C::kBM, BN, &ta, &tb, &ts);
  if (e != cudaSuccess) return e;
  auto* k = fp8_gemm_persistent<CONS, BN, ST, SETS, SPD>;
  e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmem);
  if (e != cudaSuccess) return e;
  int device = 0, sms = 0;
  e = cudaGetDevice(&device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (e != cudaSuccess) return e;
  const uint64_t tiles = (N + BN - 1) / BN * ((M + C::kBM - 1) / C::kBM);
  if (tiles > (uint64_t{1} << 31) - 1) return cudaErrorInvalidValue;
  const unsigned grid =
      static_cast<unsigned>(std::min<uint64_t>(tiles, static_cast<uint64_t>(sms)));
  pdl::launch_dependent(k, dim3(grid), dim3(C::kThreads), C::kSmem, s, ta, tb, ts, w.scale,
                        static_cast<int>(rows), static_cast<int>(N), static_cast<int>(nblk), y);
  return cudaGetLastError();
}

}  // namespace

cudaError_t block_scaled_gemm_fp8(int variant,
                                  const uint8_t* qa,
                                  const float* scales,
                                  int64_t rows,
                                  const DeviceWeight& w,
                                  float* y,
                                  cudaStream_t s) {
  if (rows == 0 || w.out_features == 0) return cudaSuccess;
  if (rows > (int64_t{1} << 30)) return cudaErrorInvalidValue;
  if (!wgmma_gemm_applies(qa, scales, w)) return cudaErrorNotSupported;
  // <consumer warpgroups (64 rows each), columns, stages, block-sum sets, stages per body>
  switch (variant) {
    case 0:
      return launch<2, 128, 5, 2, 1>(qa, scales, rows, w, y, s);
    case 1:
      return launch<2, 128, 5, 2, 2>(qa, scales, rows, w, y, s);
    case 2:
      return launch<2, 128, 4, 2, 2>(qa, scales, rows, w, y, s);
    case 3:
      return launch<2, 128, 4, 2, 4>(qa, scales, rows, w, y, s);
    case 4:
      return launch<3, 64, 6, 2, 2>(qa, scales, rows, w, y, s);
    case 5:
      return launch<2, 96, 6, 3, 2>(qa, scales, rows, w, y, s);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace di::backend::cuda
