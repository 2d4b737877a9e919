// Block-scaled FP8 GEMM on Hopper's FP8 wgmma (sm_90a): the opt-in `--cuda-gemm fp8` path for few
// rows, and the reference of gemm_fp8.cu's faster schedule above them (docs/notes/cuda-kernels.md,
// session 4 and pgemm3: its block sums carry the FP8 tensor core's truncating accumulation). The
// numerics are gemm_tc.cu's: per output, per 32-wide K block, the block sum is one k32 tensor-core
// product started from zero (wgmma with scale-d = 0), then acc = fma(sum, a_scale * w_scale, acc)
// in ascending K order, bf16 at the end. An output depends only on its row of A and column of B,
// whatever the tile, so every configuration below gives the same bits (tested).
//
// Structure: one producer warpgroup (one thread issues TMA loads of A, B and the activation scales
// for 128-wide K stages into a ring of shared-memory slots, mbarrier full/empty handshake) and one
// or two consumer warpgroups of 64 rows each. A consumer keeps two block-sum register sets and
// alternates them: it issues block g's wgmma into one set and, while the tensor core runs it,
// promotes block g-1's set into the accumulator with FFMAs (wgmma.wait_group 1). The promotion
// costs one FFMA per output per k32, the same issue budget as the FP8 tensor rate, so this overlap
// is what the kernel's speed rests on.
#include "backend/cuda/device_numeric.cuh"
#include "backend/cuda/gemm_fp8.h"
#include "backend/cuda/grid_dependency.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/tensor_map.h"
#include "backend/cuda/wgmma_ptx.cuh"
#include "backend/cuda/wgmma_store.cuh"

namespace di::backend::cuda {

namespace {

constexpr int kStageK =
    128;  // K elements (bytes) per pipeline stage: 4 k32 blocks, one swizzle row

constexpr int align1k(int b) {
  return (b + 1023) / 1024 * 1024;
}

// CONS consumer warpgroups (64 rows each) x BN columns, ST stages in the ring.
template <int CONS, int BN, int ST>
struct WgConfig {
  static constexpr int kBM = 64 * CONS;
  static constexpr int kThreads = 128 * (CONS + 1);
  static constexpr int kA = align1k(kBM * kStageK), kB = align1k(BN * kStageK);
  static constexpr int kS = align1k(kBM * 16);  // activation scales [kBM][4] floats
  static constexpr int kStage = kA + kB + kS;
  static constexpr uint32_t kTx = kBM * kStageK + BN * kStageK + kBM * 16;
  static constexpr int kSmem = ST * kStage + 1024 + 1024;  // + barriers + 1024-byte alignment
  static_assert(kSmem <= 227 * 1024, "shared memory per block");
  static_assert(kTx % 16 == 0, "TMA transfers whole 16-byte units");
};

#if DI_WGMMA_ENABLED
template <int BN>
__device__ __forceinline__ void wgmma_tile(float (&d)[BN / 2], uint64_t a, uint64_t b) {
  if constexpr (BN == 128) {
    wg::wgmma_m64n128k32(d, a, b);
  } else if constexpr (BN == 64) {
    wg::wgmma_m64n64k32(d, a, b);
  } else {
    static_assert(BN == 32, "BN is 32, 64 or 128");
    wg::wgmma_m64n32k32(d, a, b);
  }
}
#endif

// ta: e4m3 activations [rows, K]; tb: e4m3 weights [N, K]; ts: fp32 activation scales
// [rows, K/32]; wscale: ue8m0 weight scales [ceil(N/32), K/32]; y: [rows, N] (bf16 values).
// K % 128 == 0 (the launcher checks).
// PING: two block-sum sets (promote block g-1 while block g's wgmma runs); else one set, each
// wgmma waited for before its promotion (overlap only across the consumer warpgroups).
template <int CONS, int BN, int ST, bool PING>
__global__ void __launch_bounds__(128 * (CONS + 1), 1)
    wgmma_block_scaled(const __grid_constant__ CUtensorMap ta,
                       const __grid_constant__ CUtensorMap tb,
                       const __grid_constant__ CUtensorMap ts,
                       const uint8_t* wscale,
                       int rows,
                       int N,
                       int nblk,
                       float* y) {
  pdl::enter_dependent_grid();
#if DI_WGMMA_ENABLED
  using C = WgConfig<CONS, BN, ST>;
  constexpr int R = BN / 2;   // accumulator floats per thread
  constexpr int G = BN / 32;  // 32-column weight-scale groups per tile
  extern __shared__ uint8_t smem_raw[];
  const uint32_t raw = mbar::smem_u32(smem_raw);
  const uint32_t base = (raw + 1023) & ~1023u;  // the 128-byte swizzle needs 1024-byte alignment
  const uint8_t* const base_ptr = smem_raw + (base - raw);
  const uint32_t bars = base + ST * C::kStage;  // full[ST], then empty[ST]
  auto full = [&](int s) { return bars + 8 * s; };
  auto empty = [&](int s) { return bars + 8 * (ST + s); };
  auto a_at = [&](int s) { return base + s * C::kStage; };
  auto b_at = [&](int s) { return a_at(s) + C::kA; };
  auto s_at = [&](int s) { return b_at(s) + C::kB; };
  const int num_stages = nblk / 4;
  const int m0 = blockIdx.y * C::kBM, n0 = blockIdx.x * BN;
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
        wg::tma_load_2d(a_at(slot), &ta, st * kStageK, m0, full(slot));
        wg::tma_load_2d(b_at(slot), &tb, st * kStageK, n0, full(slot));
        wg::tma_load_2d(s_at(slot), &ts, st * 4, m0, full(slot));
      }
    }
    return;
  }

  // consumers
  if constexpr (CONS == 2) wg::setmaxnreg_inc<232>();
  const int t = threadIdx.x % 128;
  const int row = (wgi - 1) * 64 + (t / 32) * 16 + (t % 32) / 4;  // tile row of d[4j+0/1]; +8
  const int wrows = (N + 31) / 32;
  float acc[R], s0[R], s1[R];  // s1 unused (and dropped by the compiler) without PING
#pragma unroll
  for (int i = 0; i < R; ++i) acc[i] = s0[i] = s1[i] = 0.0f;
  // The tile's weight scales for one stage: one 32-bit word (4 k32 blocks) per column group,
  // loaded a stage ahead of use (K/32 % 4 == 0 keeps the words aligned).
  uint32_t wv[G], wv_next[G];
  auto load_wv = [&](int st, uint32_t(&v)[G]) {
#pragma unroll
    for (int c = 0; c < G; ++c) {
      const int r = n0 / 32 + c;
      v[c] =
          (r < wrows && st < num_stages)
              ? __ldg(reinterpret_cast<const uint32_t*>(wscale + static_cast<int64_t>(r) * nblk) +
                      st)
              : 0u;
    }
  };
  load_wv(0, wv_next);

  auto issue = [&](int g, float(&S)[R]) {
    const int st = g >> 2, kk = g & 3, slot = st % ST;
    if (kk == 0) mbar::wait(full(slot), (st / ST) & 1);
    const uint64_t da = wg::desc_sw128(a_at(slot) + (wgi - 1) * 64 * kStageK + kk * 32);
    const uint64_t db = wg::desc_sw128(b_at(slot) + kk * 32);
    wg::fence_regs(S);
    wg::wgmma_fence();
    wgmma_tile<BN>(S, da, db);
    wg::wgmma_commit();
  };
  // Block g's wgmma has completed: fold its sums into acc, release the stage after its last block.
  auto retire = [&](int g, float(&S)[R]) {
    wg::fence_regs(S);
    const int st = g >> 2, kk = g & 3, slot = st % ST;
    if (kk == 0) {
#pragma unroll
      for (int c = 0; c < G; ++c) wv[c] = wv_next[c];
      load_wv(st + 1, wv_next);
    }
    const float* sa = reinterpret_cast<const float*>(base_ptr + (s_at(slot) - base));
    const float a_lo = sa[row * 4 + kk], a_hi = sa[(row + 8) * 4 + kk];
    float lo[G], hi[G];
#pragma unroll
    for (int c = 0; c < G; ++c) {
      // activation scale x weight scale: powers of two, exact (as gemm_tc.cu).
      const float ws = e8m0_to_float(static_cast<uint8_t>(wv[c] >> (8 * kk)));
      lo[c] = __fmul_rn(a_lo, ws);
      hi[c] = __fmul_rn(a_hi, ws);
    }
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
      acc[4 * j + 0] = __fmaf_rn(S[4 * j + 0], lo[j / 4], acc[4 * j + 0]);
      acc[4 * j + 1] = __fmaf_rn(S[4 * j + 1], lo[j / 4], acc[4 * j + 1]);
      acc[4 * j + 2] = __fmaf_rn(S[4 * j + 2], hi[j / 4], acc[4 * j + 2]);
      acc[4 * j + 3] = __fmaf_rn(S[4 * j + 3], hi[j / 4], acc[4 * j + 3]);
    }
    if (kk == 3) mbar::arrive(empty(slot));
  };

  // Per stage (4 blocks, nblk % 4 == 0): even blocks in s0, odd ones in s1, each promoted while
  // the next one's wgmma runs. The pipeline drains at the end of each stage: carried across the
  // loop, ptxas cannot prove the in-flight set untouched and serializes every wgmma (C7514).
  for (int g = 0; g < nblk; g += 4) {
    if constexpr (!PING) {
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        issue(g + kk, s0);
        wg::wgmma_wait<0>();
        retire(g + kk, s0);
      }
      continue;
    }
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

  const int m_lo = m0 + row;
  const int ncol = n0 + 2 * (t % 4);
  wg::store_rows_bf16<BN>(acc, m_lo, ncol, rows, N, y);
#endif
}

template <int CONS, int BN, int ST, bool PING = true>
cudaError_t launch(const uint8_t* qa,
                   const float* sc,
                   int64_t rows,
                   const DeviceWeight& w,
                   float* y,
                   cudaStream_t s) {
  using C = WgConfig<CONS, BN, ST>;
  const uint64_t K = static_cast<uint64_t>(w.in_features),
                 N = static_cast<uint64_t>(w.out_features);
  const uint64_t M = static_cast<uint64_t>(rows), nblk = K / 32;
  static_assert(kStageK == 128, "fp8_gemm_tensor_maps' boxes are 128 K wide");
  CUtensorMap ta{}, tb{}, ts{};
  cudaError_t e = fp8_gemm_tensor_maps(qa, sc, M, w.data, N, K, C::kBM, BN, &ta, &tb, &ts);
  if (e != cudaSuccess) return e;
  auto* k = wgmma_block_scaled<CONS, BN, ST, PING>;
  e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmem);
  if (e != cudaSuccess) return e;
  const uint64_t row_tiles = (M + C::kBM - 1) / C::kBM;
  if (row_tiles > 65535) return cudaErrorInvalidValue;  // gridDim.y's limit
  const dim3 grid(static_cast<unsigned>((N + BN - 1) / BN), static_cast<unsigned>(row_tiles));
  pdl::launch_dependent(k, dim3(grid), dim3(C::kThreads), C::kSmem, s, ta, tb, ts, w.scale,
                        static_cast<int>(rows), static_cast<int>(N), static_cast<int>(nblk), y);
  return cudaGetLastError();
}

bool aligned(const void* p, uintptr_t a) {
  return reinterpret_cast<uintptr_t>(p) % a == 0;
}

}  // namespace

bool wgmma_gemm_applies(const uint8_t* qa, const float* scales, const DeviceWeight& w) {
  if (w.format != WeightFormat::kFP8 || w.in_features % kStageK != 0 || w.in_features == 0 ||
      w.in_features > (int64_t{1} << 30) || w.out_features > (int64_t{1} << 30)) {
    return false;
  }
  // TMA: 16-byte aligned bases (row strides are multiples of 16 once K % 128 == 0).
  if (!aligned(qa, 16) || !aligned(scales, 16) || !aligned(w.data, 16) || !aligned(w.scale, 4)) {
    return false;
  }
  int device = 0, major = 0, minor = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
    return false;
  }
  // wgmma is sm_90a only (the kernel body is empty in other targets' code).
  return major == 9 && minor == 0 && tensor_maps_available();
}

cudaError_t block_scaled_gemm_wgmma(int variant,
                                    const uint8_t* qa,
                                    const float* scales,
                                    int64_t rows,
                                    const DeviceWeight& w,
                                    float* y,
                                    cudaStream_t s) {
  if (rows == 0 || w.out_features == 0) return cudaSuccess;
  if (rows > (int64_t{1} << 30)) return cudaErrorInvalidValue;
  if (!wgmma_gemm_applies(qa, scales, w)) return cudaErrorNotSupported;
  // <consumer warpgroups (64 rows each), columns, stages>
  switch (variant) {
    case 0:
      return launch<2, 128, 5>(qa, scales, rows, w, y, s);  // 128 x 128
    case 1:
      return launch<1, 128, 6>(qa, scales, rows, w, y, s);  // 64 x 128
    case 2:
      return launch<1, 64, 8>(qa, scales, rows, w, y, s);  // 64 x 64
    case 3:
      return launch<1, 32, 8>(qa, scales, rows, w, y, s);  // 64 x 32: most CTAs for few rows
    case 4:
      return launch<2, 128, 5, false>(qa, scales, rows, w, y, s);  // 128 x 128, one sum set
    default:
      return cudaErrorInvalidValue;
  }
}

cudaError_t block_scaled_gemm_wg(const uint8_t* qa,
                                 const float* scales,
                                 int64_t rows,
                                 const DeviceWeight& w,
                                 float* y,
                                 cudaStream_t s) {
  // Every M on this kernel family (the same bits whatever the tile: batch invariant); weights it
  // cannot take go to the mma.sync kernels, for every M too. Tiles by M: fastest on the H200 at
  // N = K = 5120 (docs/benchmarks.md).
  // Above 64 rows the persistent kernel of gemm_fp8.cu (the same bits, tested).
  if (!wgmma_gemm_applies(qa, scales, w)) return block_scaled_gemm_tc(qa, scales, rows, w, y, s);
  if (rows > 64) {
    return block_scaled_gemm_fp8(fp8_mode_variant(w.in_features), qa, scales, rows, w, y, s);
  }
  return block_scaled_gemm_wgmma(rows <= 16 ? 2 : 3, qa, scales, rows, w, y, s);
}

}  // namespace di::backend::cuda
