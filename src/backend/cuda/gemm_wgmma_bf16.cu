// Block-scaled FP8 GEMM on Hopper's bf16 wgmma (sm_90a): the `tensor` path's kernel on sm_90 for
// K % 128 == 0 (docs/notes/cuda-kernels.md, session 4). The FP8 wgmma (gemm_wgmma.cu) is faster
// but its block sums carry the FP8 tensor core's truncating accumulation (~30x the error of the
// mma.sync path; it fails check-golden). Here each k32 block sum comes from bf16 products, which
// are exact, accumulated in the tensor core's fp32 path like the mma.sync kernels' (sm_90 runs
// their e4m3 mma.sync as f16 HMMA).
//
// Exactness of the operands: activations are act_quant'ed and stored as bf16(q * a_scale), exact
// (q has 4 significant bits, the scale is a power of two, and the product stays in bf16's range),
// so a block sum is a_scale * sum(q * w) with the same rounding, and the promotion
// acc = fma(sum, w_scale, acc) is the contract's fma(sum(q * w), a_scale * w_scale, acc). Weights
// stay e4m3 in memory and become bf16 (exactly) in registers: the product is computed transposed,
// y^T = w . x^T, with the weight tile as wgmma's register operand A (64 output features per
// consumer warpgroup) and the token tile as B from shared memory (BT tokens: 8..128, which also
// suits few rows). The pipeline is gemm_wgmma.cu's: a TMA producer thread, full/empty mbarriers,
// two block-sum register sets alternating per k32 block. Every output depends only on its row of
// x and of w, whatever the tile: batch invariant (tested). The 128 x 128 tile loads each block's
// A fragments before promoting the block two back (kAhead; docs/notes/cuda-kernels.md "pgemm").
// The weights come in the lane-order layout of wgmma_bf16_layout.cu (pgemm2): a lane's A
// fragments of one k32 block are 16 contiguous bytes, one conflict-free 128-bit shared load
// instead of eight 16-bit ones and their swizzle addressing; the original (swizzled row-major)
// layout stays as a reference entry point with the same bits.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "backend/cuda/device_numeric.cuh"
#include "backend/cuda/e4m3_bf16.cuh"
#include "backend/cuda/grid_dependency.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/mma_e4m3.cuh"
#include "backend/cuda/tensor_map.h"
#include "backend/cuda/wgmma_ptx.cuh"

namespace di::backend::cuda {

namespace {

constexpr int kStageK = 128;  // K per pipeline stage: 4 k32 blocks

constexpr int align1k(int b) {
  return (b + 1023) / 1024 * 1024;
}

// CONS consumer warpgroups (64 output features each) x BT tokens, ST stages.
template <int CONS, int BT, int ST>
struct Bf16Config {
  static constexpr int kBO = 64 * CONS;
  static constexpr int kThreads = 128 * (CONS + 1);
  static constexpr int kW = align1k(kBO * kStageK);  // e4m3 [kBO][128], 128-byte swizzle
  static constexpr int kX = align1k(BT * 128);       // bf16 [BT][64]: two per stage
  static constexpr int kStage = kW + 2 * kX;
  static constexpr uint32_t kTx = kBO * kStageK + 2 * BT * 128;
  static constexpr int kSmem = ST * kStage + 1024 + 1024;
  static_assert(kSmem <= 227 * 1024, "shared memory per block");
  static_assert(kTx % 16 == 0, "TMA transfers whole 16-byte units");
};

#if DI_WGMMA_ENABLED
template <int BT>
__device__ __forceinline__ void wgmma_bt(float (&d)[BT / 2],
                                         const uint32_t (&a)[4],
                                         uint64_t b,
                                         int scale_d) {
  if constexpr (BT == 128) {
    wg::wgmma_m64n128k16_bf16_rs(d, a, b, scale_d);
  } else if constexpr (BT == 64) {
    wg::wgmma_m64n64k16_bf16_rs(d, a, b, scale_d);
  } else if constexpr (BT == 32) {
    wg::wgmma_m64n32k16_bf16_rs(d, a, b, scale_d);
  } else {
    static_assert(BT == 8, "BT is 8, 32, 64 or 128");
    wg::wgmma_m64n8k16_bf16_rs(d, a, b, scale_d);
  }
}

// The four ue8m0 weight scales of a K stage (one 32-bit word) as floats, without branches.
__device__ __forceinline__ void decode_scales(uint32_t wv, float (&ws)[4]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint32_t b = (wv >> (8 * i)) & 0xffu;
    const uint32_t bits = b == 0 ? 0x00400000u : b == 255 ? 0x7fc00000u : b << 23;
    ws[i] = __uint_as_float(bits);  // e8m0_to_float
  }
}
#endif

// tw: e4m3 weights [N, K] (kPerm: wgmma_bf16_permute's layout, [N rounded up to 16, K]); tx: bf16
// activations (q * scale) [rows, K]; wscale: ue8m0 [ceil(N/32), K/32]; y: [rows, N] (bf16 values).
// K % 128 == 0. kAhead: per stage, both block-sum sets' first wgmmas issued, then per block: wait
// for the older one, load and convert the A fragments of the block after next, promote, issue it;
// otherwise the A fragments are loaded after the promotion. (The same operations; the early loads
// and conversions overlap the 64 FFMAs. Worth 6-9 % on the 128 x 128 tile with the row-major
// layout (the small tiles keep the order they were measured with); with the lane-order one the
// two orders measure the same (pgemm2).)
template <int CONS, int BT, int ST, bool kAhead, bool kPerm, bool kBatch>
__global__ void __launch_bounds__(128 * (CONS + 1), 1)
    wgmma_bf16_block_scaled(const __grid_constant__ CUtensorMap tw,
                            const __grid_constant__ CUtensorMap tx,
                            const uint8_t* wscale,
                            int rows,
                            int N,
                            int nblk,
                            float* y) {
  pdl::enter_dependent_grid();
#if DI_WGMMA_ENABLED
  using C = Bf16Config<CONS, BT, ST>;
  constexpr int R = BT / 2;  // accumulator floats per thread
  extern __shared__ uint8_t smem_raw[];
  const uint32_t raw = mbar::smem_u32(smem_raw);
  const uint32_t base = (raw + 1023) & ~1023u;  // the 128-byte swizzle needs 1024-byte alignment
  const uint8_t* const base_ptr = smem_raw + (base - raw);
  const uint32_t bars = base + ST * C::kStage;  // full[ST], then empty[ST]
  auto full = [&](int s) { return bars + 8 * s; };
  auto empty = [&](int s) { return bars + 8 * (ST + s); };
  auto w_at = [&](int s) { return base + s * C::kStage; };
  auto x_at = [&](int s) { return w_at(s) + C::kW; };
  const int num_stages = nblk / 4;
  const int n0 = blockIdx.x * C::kBO, m0 = blockIdx.y * BT;
  const int wgi = threadIdx.x / 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < ST; ++s) {
      mbar::init(full(s), 1);
      mbar::init(empty(s), CONS * 128);
    }
    mbar::init_fence();
  }
  __syncthreads();

  if (wgi == 0) {  // producer
    if constexpr (CONS == 2) wg::setmaxnreg_dec<40>();
    if (threadIdx.x == 0) {
      for (int st = 0; st < num_stages; ++st) {
        const int slot = st % ST;
        if (st >= ST) mbar::wait(empty(slot), ((st / ST) - 1) & 1);
        mbar::arrive_expect_tx(full(slot), C::kTx);
        wg::tma_load_2d(w_at(slot), &tw, st * kStageK, n0, full(slot));
        wg::tma_load_2d(x_at(slot), &tx, st * kStageK, m0, full(slot));
        wg::tma_load_2d(x_at(slot) + C::kX, &tx, st * kStageK + 64, m0, full(slot));
      }
    }
    return;
  }

  if constexpr (CONS == 2) wg::setmaxnreg_inc<232>();
  const int t = threadIdx.x % 128, warp = t / 32, lane = t % 32, q = lane % 4, g8 = lane / 4;
  const int orow = (wgi - 1) * 64 + warp * 16 + g8;  // tile row (feature) of d[4j+0/1]; +8
  // Rows orow and orow + 8 lie in one 32-row weight-scale block.
  // Warps past the last scale row (their features are >= N and never stored) read the last one,
  // so that the scale loads need no condition.
  const int og = min((n0 + (wgi - 1) * 64 + warp * 16) / 32, (N + 31) / 32 - 1);
  const uint32_t* wrow =
      reinterpret_cast<const uint32_t*>(wscale + static_cast<int64_t>(og) * nblk);
  float acc[R], s0[R], s1[R];
#pragma unroll
  for (int i = 0; i < R; ++i) acc[i] = s0[i] = s1[i] = 0.0f;
  float ws[4];                     // the current stage's 4 block scales, decoded once per stage
  uint32_t wv_next = __ldg(wrow);  // 4 blocks' scales per 32-bit word

  // A fragments (mma.m16n8k16 layout) of block kk, both k16 halves. kPerm: this lane's 16 bytes,
  // (row g8: k 2q, 2q+1, 2q+8, 2q+9; the same + 16; row g8 + 8: likewise) at 512 kk + 16 lane of
  // the warp's 2048 bytes. Otherwise 16-bit loads from the swizzled e4m3 tile: 16-byte chunk j of
  // row r sits at chunk j ^ (r % 8), and r % 8 = g8 for both of our rows.
  const uint8_t* const wlane = base_ptr + 2048 * ((wgi - 1) * 4 + warp) + 16 * lane;
  auto frag = [&](int slot, int kk, uint32_t(&a0)[4], uint32_t(&a1)[4]) {
    if constexpr (kPerm) {
      const uint4 v = *reinterpret_cast<const uint4*>(wlane + slot * C::kStage + 512 * kk);
      lane_order_frags(v, a0, a1);
    } else {
      const uint8_t* r0 = base_ptr + (w_at(slot) - base) + orow * kStageK;
      auto ld = [&](int off) { return *reinterpret_cast<const uint16_t*>(r0 + off); };
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        uint32_t(&a)[4] = h ? a1 : a0;
        const int c = (((2 * kk + h) ^ g8) << 4) + 2 * q;
        a[0] = e4m3x2_to_bf16x2(ld(c));
        a[1] = e4m3x2_to_bf16x2(ld(8 * kStageK + c));
        a[2] = e4m3x2_to_bf16x2(ld(c + 8));
        a[3] = e4m3x2_to_bf16x2(ld(8 * kStageK + c + 8));
      }
    }
  };
  // Block g's A fragments (both k16 halves); without kAhead after waiting for its stage.
  auto load_a = [&](int g, uint32_t(&a0)[4], uint32_t(&a1)[4]) {
    const int st = g >> 2, kk = g & 3, slot = st % ST;
    if (kk == 0 && !kAhead) mbar::wait(full(slot), (st / ST) & 1);
    frag(slot, kk, a0, a1);
  };
  auto mma = [&](int g, float(&S)[R], const uint32_t(&a0)[4], const uint32_t(&a1)[4]) {
    const int st = g >> 2, kk = g & 3, slot = st % ST;
    const uint32_t xb = x_at(slot) + (kk >> 1) * C::kX + (kk & 1) * 64;
    wg::fence_regs(S);
    wg::wgmma_fence();
    wgmma_bt<BT>(S, a0, wg::desc_sw128(xb), 0);
    wgmma_bt<BT>(S, a1, wg::desc_sw128(xb + 32), 1);
    wg::wgmma_commit();
  };
  auto issue = [&](int g, float(&S)[R]) {
    uint32_t a0[4], a1[4];
    load_a(g, a0, a1);
    mma(g, S, a0, a1);
  };
  auto retire = [&](int g, float(&S)[R]) {
    wg::fence_regs(S);
    const int st = g >> 2, kk = g & 3, slot = st % ST;
    if (kk == 0) {
      decode_scales(wv_next, ws);
      wv_next = __ldg(wrow + min(st + 1, num_stages - 1));
    }
#pragma unroll
    for (int i = 0; i < R; ++i) acc[i] = __fmaf_rn(S[i], ws[kk], acc[i]);
    if (kk == 3) mbar::arrive(empty(slot));
  };

  // As gemm_wgmma.cu: per stage, even blocks in s0 and odd ones in s1, each promoted while the
  // next one's wgmma runs; the pipeline drains at stage ends: with a wgmma in flight across the
  // loop edge (or a barrier-wait loop) whose registers are read afterwards, ptxas serializes every
  // wgmma (C7514).
  if constexpr (kBatch) {
    // Per stage, the A fragments of all four blocks first (independent conversions), then the
    // four blocks' wgmmas, each into its own block-sum set and commit group, then the promotions
    // in K order as each completes: the same block sums and the same chain, four blocks in
    // flight instead of two (2-4 % faster for the 8-token tile at 1-8 rows, row14).
    static_assert(!kAhead, "one schedule");
    float s2[R], s3[R];
#pragma unroll
    for (int i = 0; i < R; ++i) s2[i] = s3[i] = 0.0f;
    for (int st = 0; st < num_stages; ++st) {
      mbar::wait(full(st % ST), (st / ST) & 1);
      const int g = 4 * st;
      uint32_t a[4][2][4];
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) frag(st % ST, kk, a[kk][0], a[kk][1]);
      mma(g, s0, a[0][0], a[0][1]);
      mma(g + 1, s1, a[1][0], a[1][1]);
      mma(g + 2, s2, a[2][0], a[2][1]);
      mma(g + 3, s3, a[3][0], a[3][1]);
      wg::wgmma_wait<3>();
      retire(g, s0);
      wg::wgmma_wait<2>();
      retire(g + 1, s1);
      wg::wgmma_wait<1>();
      retire(g + 2, s2);
      wg::wgmma_wait<0>();
      retire(g + 3, s3);
    }
  } else if constexpr (kAhead) {
    for (int st = 0; st < num_stages; ++st) {
      mbar::wait(full(st % ST), (st / ST) & 1);
      const int g = 4 * st;
      uint32_t a0[4], a1[4];
      auto step = [&](int b, float(&S)[R]) {
        wg::wgmma_wait<1>();
        load_a(g + b + 2, a0, a1);
        retire(g + b, S);
        mma(g + b + 2, S, a0, a1);
      };
      load_a(g, a0, a1);
      mma(g, s0, a0, a1);
      load_a(g + 1, a0, a1);
      mma(g + 1, s1, a0, a1);
      step(0, s0);
      step(1, s1);
      wg::wgmma_wait<1>();
      retire(g + 2, s0);
      wg::wgmma_wait<0>();
      retire(g + 3, s1);
    }
  } else {
    for (int g = 0; g < nblk; g += 4) {
      issue(g, s0);
      issue(g + 1, s1);
      wg::wgmma_wait<1>();
      retire(g, s0);
      issue(g + 2, s0);
      wg::wgmma_wait<1>();
      retire(g + 1, s1);
      issue(g + 3, s1);
      wg::wgmma_wait<1>();
      retire(g + 2, s0);
      wg::wgmma_wait<0>();
      retire(g + 3, s1);
    }
  }

  // d[4j + e]: feature orow + 8 (e / 2), token 8j + 2q + e % 2.
#pragma unroll
  for (int j = 0; j < BT / 8; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int o = n0 + orow + 8 * (e >> 1), m = m0 + 8 * j + 2 * q + (e & 1);
      if (o < N && m < rows) y[static_cast<int64_t>(m) * N + o] = round_bf16(acc[4 * j + e]);
    }
  }
#endif
}

template <int CONS, int BT, int ST, bool kAhead, bool kPerm = true, bool kBatch = false>
cudaError_t launch(
    const uint16_t* xb, int64_t rows, const DeviceWeight& w, float* y, cudaStream_t s) {
  using C = Bf16Config<CONS, BT, ST>;
  const uint64_t K = static_cast<uint64_t>(w.in_features),
                 N = static_cast<uint64_t>(w.out_features);
  const uint64_t M = static_cast<uint64_t>(rows);
  CUtensorMap tw{}, tx{};
  // The lane-order layout is padded to whole 16-row groups and read without a swizzle.
  cudaError_t e = make_tensor_map_2d(
      &tw, CU_TENSOR_MAP_DATA_TYPE_UINT8, w.data, K, kPerm ? (N + 15) / 16 * 16 : N, K, kStageK,
      C::kBO, kPerm ? CU_TENSOR_MAP_SWIZZLE_NONE : CU_TENSOR_MAP_SWIZZLE_128B);
  if (e == cudaSuccess) {
    e = make_tensor_map_2d(&tx, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, xb, K, M, 2 * K, 64, BT,
                           CU_TENSOR_MAP_SWIZZLE_128B);
  }
  if (e != cudaSuccess) return e;
  auto* k = wgmma_bf16_block_scaled<CONS, BT, ST, kAhead, kPerm, kBatch>;
  e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmem);
  if (e != cudaSuccess) return e;
  const uint64_t token_tiles = (M + BT - 1) / BT;
  if (token_tiles > 65535) return cudaErrorInvalidValue;  // gridDim.y's limit
  const dim3 grid(static_cast<unsigned>((N + C::kBO - 1) / C::kBO),
                  static_cast<unsigned>(token_tiles));
  pdl::launch_dependent(k, dim3(grid), dim3(C::kThreads), C::kSmem, s, tw, tx, w.scale,
                        static_cast<int>(rows), static_cast<int>(N), static_cast<int>(K / 32), y);
  return cudaGetLastError();
}

// act_quant (the operations of quantize_fp8) with the scale folded in: bf16(q * scale), exact.
__global__ void quantize_bf16_kernel(const float* x, int64_t num_blocks, uint16_t* xb) {
  pdl::enter_dependent_grid();
  const int64_t b = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (b >= num_blocks) return;  // whole warps leave together (blockDim is a multiple of 32)
  float q, sc;
  act_quant_lane(x[b * 32 + lane], q, sc);
  xb[b * 32 + lane] = __bfloat16_as_ushort(__float2bfloat16_rn(__fmul_rn(q, sc)));
}

}  // namespace

cudaError_t quantize_fp8_bf16(
    const float* x, int64_t rows, int64_t cols, uint16_t* xb, cudaStream_t s) {
  const int64_t n = rows * (cols / 32);
  if (n == 0) return cudaSuccess;
  pdl::launch_dependent(quantize_bf16_kernel, dim3(static_cast<unsigned>((n + 7) / 8)), dim3(256),
                        0, s, x, n, xb);
  return cudaGetLastError();
}

bool wgmma_bf16_applies(const DeviceWeight& w) {
  if (w.format != WeightFormat::kFP8 || w.in_features % kStageK != 0 || w.in_features == 0 ||
      w.in_features > (int64_t{1} << 30) || w.out_features > (int64_t{1} << 30) ||
      reinterpret_cast<uintptr_t>(w.data) % 16 != 0 || reinterpret_cast<uintptr_t>(w.scale) % 4) {
    return false;
  }
  int device = 0, major = 0, minor = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
    return false;
  }
  return major == 9 && minor == 0 && tensor_maps_available();
}

cudaError_t block_scaled_gemm_wgmma_bf16(int variant,
                                         const uint16_t* xb,
                                         int64_t rows,
                                         const DeviceWeight& w,
                                         float* y,
                                         cudaStream_t s) {
  if (rows == 0 || w.out_features == 0) return cudaSuccess;
  if (rows > (int64_t{1} << 30) || reinterpret_cast<uintptr_t>(xb) % 16 != 0) {
    return cudaErrorInvalidValue;
  }
  if (!wgmma_bf16_applies(w)) return cudaErrorNotSupported;
  // <consumer warpgroups (64 features each), tokens, stages>
  switch (variant) {
    case 0:
      return launch<2, 128, 4, true>(xb, rows, w, y, s);  // 128 features x 128 tokens
    case 1:
      return launch<2, 64, 6, false>(xb, rows, w, y, s);
    case 2:
      return launch<1, 32, 8, false>(xb, rows, w, y, s);
    case 3:
      return launch<1, 8, 8, false>(xb, rows, w, y, s);  // decode: 64 features x 8 tokens
    case 4:  // 0 with the A fragments loaded after the promotion (without kAhead)
      return launch<2, 128, 4, false>(xb, rows, w, y, s);
    case 5:  // 3 with twice the weight bytes in flight per CTA (one CTA per SM)
      return launch<1, 8, 16, false>(xb, rows, w, y, s);
    case 6:
      return launch<1, 8, 12, false>(xb, rows, w, y, s);
    case 7:  // 3 with 6 stages (3 CTAs per SM)
      return launch<1, 8, 6, false>(xb, rows, w, y, s);
    case 8:  // 3 with 5 stages (4 CTAs per SM: the 54 registers allow no more)
      return launch<1, 8, 5, false>(xb, rows, w, y, s);
    case 9:  // 3 with four blocks in flight per stage (kBatch; 89 registers, 2 CTAs per SM)
      return launch<1, 8, 8, false, true, true>(xb, rows, w, y, s);
    case 10:  // 5 with kBatch
      return launch<1, 8, 16, false, true, true>(xb, rows, w, y, s);
    default:
      return cudaErrorInvalidValue;
  }
}

cudaError_t block_scaled_gemm_wgmma_bf16_rowmajor(
    const uint16_t* xb, int64_t rows, const DeviceWeight& w, float* y, cudaStream_t s) {
  if (rows == 0 || w.out_features == 0) return cudaSuccess;
  if (rows > (int64_t{1} << 30) || reinterpret_cast<uintptr_t>(xb) % 16 != 0) {
    return cudaErrorInvalidValue;
  }
  if (!wgmma_bf16_applies(w)) return cudaErrorNotSupported;
  return launch<2, 128, 4, true, false>(xb, rows, w, y, s);  // variant 0, row-major weights
}

cudaError_t block_scaled_gemm_wgmma_bf16(
    const uint16_t* xb, int64_t rows, const DeviceWeight& w, float* y, cudaStream_t s) {
  // The fastest variant per M at N = K = 5120 on the H200 (docs/benchmarks.md). At 2-8 rows the
  // 16-stage decode tile (one CTA per SM) beats the 8-stage one by up to a third while its CTAs
  // fit in one wave (wo_b 33.8 -> 25.5 us at 8 rows); at one row the two are within 2 %. Past
  // two 8-stage CTAs per SM, shallower rings keep the grid in one wave (3 CTAs per SM at 6
  // stages, 4 at 5): wq_b's 512 CTAs 18.0 -> 16.2 us and the Engram product's 400 52.2 -> 48.2
  // at one row (docs/benchmarks.md, "FP8 products at one row toward the byte floor"). Where one
  // or two CTAs per SM fit the grid, the tile with four blocks in flight (kBatch) is 2-4 %
  // faster.
  if (rows > 8) {
    const int v = rows <= 32 ? 2 : rows <= 128 ? 1 : 0;
    return block_scaled_gemm_wgmma_bf16(v, xb, rows, w, y, s);
  }
  // Only the few-row tiles depend on how many CTAs the SMs hold.
  const int64_t ctas = (w.out_features + 63) / 64;
  int sms = 0, device = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    return cudaErrorUnknown;
  }
  const int v = rows >= 2 && ctas <= sms ? 10
                : ctas <= 2 * sms        ? 9
                : ctas <= 3 * sms        ? 7
                : ctas <= 4 * sms        ? 8
                                         : 3;
  return block_scaled_gemm_wgmma_bf16(v, xb, rows, w, y, s);
}

}  // namespace di::backend::cuda
