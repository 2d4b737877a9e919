// Dense BF16 products at many rows on wgmma, warp-specialised (the head from 65 rows, wo_a and
// the compressor from 129): the bits of dense_bf16_wgmma.cu and dense_bf16_tc.cu's kernels, with
// 256 rows per CTA for the heads so that their weights are read once per call
// (docs/notes/cuda-kernels.md, "Session 25").
//
// dense_bf16_wgmma.cu's 128 x 128 tile re-reads x per 128 features and the weights per 128 rows
// (~5.3 GB from L2 for the head at 256 rows) and builds its B tile with 4-byte cp.async pieces
// (x in the mma.sync chain's logical K order). Here x arrives already in that order
// (k32_logical_order.cu writes it while converting to bf16), so a TMA producer warp loads whole
// tiles: x as [BT rows][64 k] with the 128-byte swizzle (wgmma's B), the weights as two
// [128 features][32 k] chunks without swizzle (the shared-tile kernels' layout, loaded into
// registers as wgmma's A exactly as there). Each k16 step therefore multiplies the products of
// the matching mma.sync step, position for position, in a fresh chain per K part.
//
// A CTA is a producer warpgroup and two consumer warpgroups of 64 features each. With BT = 256 a
// consumer's accumulators are 128 floats a thread, which leaves no room for a second (part-sum)
// set: the 256-row tile takes weights of one K part (the heads) only.
#include <cuda.h>

#include <cstdint>

#include "backend/cuda/dense_bf16_wgmma.h"
#include "backend/cuda/device_numeric.cuh"
#include "backend/cuda/grid_dependency.cuh"
#include "backend/cuda/tensor_map.h"
#include "backend/cuda/wgmma_ptx.cuh"

namespace di::backend::cuda {

namespace {

constexpr int kTileF = 128;  // features per CTA: two consumer warpgroups of 64
constexpr int kStageK = 64;
constexpr int kThreads = 384;

template <int BT, int ST>
struct WsShape {
  static constexpr int kWChunk = kTileF * 32 * 2;  // bytes: [128 features][32 k] bf16
  static constexpr int kW = 2 * kWChunk;
  static constexpr int kX = BT * 128;  // [BT rows][64 k] bf16, 128-byte swizzle
  static constexpr int kStage = kW + kX;
  static constexpr int kSmem = ST * kStage + 1024 + 1024;  // + alignment + barriers
  static_assert(kStage % 1024 == 0 && kSmem <= 227 * 1024, "shared memory per block");
};

#if DI_WGMMA_ENABLED
#define DI_WGMMA_D128                                                                            \
  DI_WGMMA_D64, "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]),    \
      "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), \
      "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), \
      "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), \
      "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), \
      "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),          \
      "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]),        \
      "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]),        \
      "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]),        \
      "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])

// D[64 x 256] += A[64 x 16] (registers) . B[256 x 16]^T (K-major, 128-byte swizzle), bf16.
__device__ __forceinline__ void wgmma_m64n256k16_bf16_rs(float (&d)[128],
                                                         const uint32_t (&a)[4],
                                                         uint64_t b) {
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, "
      "%111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, "
      "%126, %127}, {%128, %129, %130, %131}, %132, 1, 1, 1, 0;\n"
      : DI_WGMMA_D128
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}
#undef DI_WGMMA_D128

template <int BT>
__device__ __forceinline__ void wgmma_rows(float (&d)[BT / 2], const uint32_t (&a)[4], uint64_t b) {
  if constexpr (BT == 256) {
    wgmma_m64n256k16_bf16_rs(d, a, b);
  } else {
    static_assert(BT == 128, "BT is 128 or 256");
    wg::wgmma_m64n128k16_bf16_rs(d, a, b, 1);
  }
}
#endif

// tx: x in the k32-logical order, bf16 [rows, x_stride] (the group of output n reads columns
// (n / group_out) k .. + k); tw: w bf16 [n_out, k]; y [rows, n_out]. k % 64 == 0, k_part % 32 ==
// 0, group_out % 128 == 0. kParts: more than one K part (a fresh chain per part, the parts added
// in part order with __fadd_rn, as dense_bf16_wgmma.cu), which takes a second register set: the
// 128-row tile only.
// No setmaxnreg: with the producer at 40 registers and the consumers at 232, the 256-row tile
// gave wrong sums for a few CTAs per call whenever a stage's wgmmas stayed in flight across the
// loop edge (up to ~2 % of the outputs at 200-300 rows; none with the group drained per stage,
// none without setmaxnreg; docs/notes/cuda-kernels.md, "Session 25"). The consumers' 128
// accumulators fit the 168 registers of an even split.
template <int BT, int ST, bool kParts>
__global__ void __launch_bounds__(kThreads, 1)
    dense_bf16_ws_kernel(const __grid_constant__ CUtensorMap tx,
                         const __grid_constant__ CUtensorMap tw,
                         int64_t rows,
                         int64_t n_out,
                         int64_t k,
                         int64_t k_part,
                         int64_t group_out,
                         float* __restrict__ y,
                         bool round) {
  pdl::enter_dependent_grid();
#if DI_WGMMA_ENABLED
  using S = WsShape<BT, ST>;
  static_assert(!kParts || BT == 128, "part sums need a second accumulator set");
  constexpr int R = BT / 2;  // accumulator floats per thread
  constexpr int kConsumerWarps = 8;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const uint32_t raw = mbar::smem_u32(smem_raw);
  const uint32_t base = (raw + 1023) & ~1023u;  // the 128-byte swizzle needs 1024-byte alignment
  const unsigned char* const base_ptr = smem_raw + (base - raw);
  const uint32_t bars = base + ST * S::kStage;  // full[ST], then empty[ST]
  auto full = [&](int s) { return bars + 8 * s; };
  auto empty = [&](int s) { return bars + 8 * (ST + s); };
  auto w_at = [&](int s) { return base + s * S::kStage; };
  auto x_at = [&](int s) { return w_at(s) + S::kW; };
  const int stages = static_cast<int>(k / kStageK);
  // Row tiles vary fastest, so the CTAs sharing a weight tile (more than BT rows) run together.
  const int m0 = static_cast<int>(blockIdx.x) * BT, n0 = static_cast<int>(blockIdx.y) * kTileF;
  const int wgi = threadIdx.x / 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < ST; ++s) {
      mbar::init(full(s), 1);
      mbar::init(empty(s), kConsumerWarps);
    }
    mbar::init_fence();
  }
  __syncthreads();

  if (wgi == 0) {  // producer: one thread issues every stage's three tile loads
    if (threadIdx.x == 0) {
      const int xk = static_cast<int>((n0 / group_out) * k);  // the group's first x column
      for (int st = 0; st < stages; ++st) {
        const int slot = st % ST;
        if (st >= ST) mbar::wait(empty(slot), ((st / ST) - 1) & 1);
        mbar::arrive_expect_tx(full(slot), S::kStage);
        wg::tma_load_2d(x_at(slot), &tx, xk + st * kStageK, m0, full(slot));
        wg::tma_load_2d(w_at(slot), &tw, st * kStageK, n0, full(slot));
        wg::tma_load_2d(w_at(slot) + S::kWChunk, &tw, st * kStageK + 32, n0, full(slot));
      }
    }
    return;
  }

  const int t = threadIdx.x % 128, lane = t % 32, g = lane / 4, q = lane % 4;
  const int wrow = (wgi - 1) * 64 + (t / 32) * 16 + g;  // feature row of d[4j + 0/1]; + 8
  // This lane's A fragment bytes in a weight chunk: rows wrow and wrow + 8, k 8q .. 8q + 7.
  const unsigned char* const wlane = base_ptr + wrow * 64 + 16 * q;
  float acc[R], sum[kParts ? R : 1];
#pragma unroll
  for (int i = 0; i < R; ++i) acc[i] = 0.0f;
  bool first_part = true;
  int64_t part_end = k_part;

  // Each stage's wgmma group stays in flight over the next stage's barrier wait and A loads; its
  // slot is released (one arrival per warp) once the group after it has been issued and it has
  // completed. A part's end drains the groups and folds its chain into the sum.
#pragma unroll 1
  for (int st = 0; st < stages; ++st) {
    const int slot = st % ST;
    mbar::wait(full(slot), (st / ST) & 1);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const unsigned char* wb = wlane + slot * S::kStage + h * S::kWChunk;
      const uint4 a = *reinterpret_cast<const uint4*>(wb);
      const uint4 b = *reinterpret_cast<const uint4*>(wb + 8 * 64);
      const uint32_t a0[4] = {a.x, b.x, a.y, b.y}, a1[4] = {a.z, b.z, a.w, b.w};
      const uint32_t xb = x_at(slot) + 64 * h;
      wg::wgmma_fence();
      wgmma_rows<BT>(acc, a0, wg::desc_sw128(xb));
      wgmma_rows<BT>(acc, a1, wg::desc_sw128(xb + 32));
      if constexpr (kParts) {
        if (static_cast<int64_t>(st) * kStageK + 32 * h + 32 == part_end) {
          wg::wgmma_commit();
          wg::wgmma_wait<0>();
          wg::fence_regs(acc);
#pragma unroll
          for (int i = 0; i < R; ++i) {
            sum[i] = first_part ? acc[i] : __fadd_rn(sum[i], acc[i]);
            acc[i] = 0.0f;
          }
          first_part = false;
          part_end += k_part;
        }
      }
    }
    wg::wgmma_commit();
    wg::wgmma_wait<1>();
    if (st > 0 && lane == 0) mbar::arrive(empty((st - 1) % ST));
  }
  wg::wgmma_wait<0>();
  wg::fence_regs(acc);

  // v[4j + e]: feature wrow + 8 (e / 2), row 8j + 2q + e % 2.
  auto store = [&](const float(&v)[R]) {
#pragma unroll
    for (int j = 0; j < BT / 8; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t f = n0 + wrow + 8 * (e >> 1), r = m0 + 8 * j + 2 * q + (e & 1);
        if (f < n_out && r < rows) {
          y[r * n_out + f] = round ? round_bf16(v[4 * j + e]) : v[4 * j + e];
        }
      }
    }
  };
  if constexpr (kParts) {
    store(sum);
  } else {
    store(acc);
  }
#endif
}

template <int BT, int ST, bool kParts>
cudaError_t launch(const uint16_t* x_logical,
                   int64_t rows,
                   const DeviceWeight& w,
                   int groups,
                   float* y,
                   bool round_bf16,
                   cudaStream_t s) {
  using S = WsShape<BT, ST>;
  const uint64_t K = static_cast<uint64_t>(w.in_features), XK = K * static_cast<uint64_t>(groups);
  const uint64_t N = static_cast<uint64_t>(w.out_features), M = static_cast<uint64_t>(rows);
  CUtensorMap tx{}, tw{};
  cudaError_t e = make_tensor_map_2d(&tx, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, x_logical, XK, M,
                                     2 * XK, kStageK, BT, CU_TENSOR_MAP_SWIZZLE_128B);
  if (e == cudaSuccess) {
    e = make_tensor_map_2d(&tw, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, w.data, K, N, 2 * K, 32, kTileF,
                           CU_TENSOR_MAP_SWIZZLE_NONE);
  }
  if (e != cudaSuccess) return e;
  auto* kernel = dense_bf16_ws_kernel<BT, ST, kParts>;
  e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, S::kSmem);
  if (e != cudaSuccess) return e;
  const uint64_t feature_tiles = (N + kTileF - 1) / kTileF;
  if (feature_tiles > 65535) return cudaErrorInvalidValue;  // gridDim.y's limit
  const dim3 grid(static_cast<unsigned>((M + BT - 1) / BT), static_cast<unsigned>(feature_tiles));
  pdl::launch_dependent(kernel, grid, dim3(kThreads), static_cast<size_t>(S::kSmem), s, tx, tw,
                        rows, w.out_features, w.in_features,
                        w.in_features / dense_bf16_tc_k_parts(w), w.out_features / groups, y,
                        round_bf16);
  return cudaGetLastError();
}

}  // namespace

bool dense_bf16_ws_supports(const DeviceWeight& w, int groups) {
  return w.format == WeightFormat::kBF16 && dense_bf16_tc_tiled_supports(w, groups) &&
         w.in_features % kStageK == 0 && w.in_features * groups <= (int64_t{1} << 30) &&
         dense_bf16_wgmma_available() && tensor_maps_available();
}

bool dense_bf16_ws_applies(int64_t rows, const DeviceWeight& w, int groups) {
  const int64_t min_rows =
      dense_bf16_tc_k_parts(w) == 1 ? kDenseBf16WsMinRows : kDenseBf16WsMinRowsParts;
  return rows >= min_rows && dense_bf16_ws_supports(w, groups);
}

cudaError_t dense_bf16_wgmma_ws(const uint16_t* x_logical,
                                int64_t rows,
                                const DeviceWeight& w,
                                int groups,
                                float* y,
                                bool round_bf16,
                                cudaStream_t s,
                                int tile_rows) {
  if (rows <= 0) return rows == 0 ? cudaSuccess : cudaErrorInvalidValue;
  if (!dense_bf16_ws_supports(w, groups) || reinterpret_cast<uintptr_t>(x_logical) % 16 != 0 ||
      rows > (int64_t{1} << 31)) {
    return cudaErrorNotSupported;
  }
  if (dense_bf16_tc_k_parts(w) > 1) {
    if (tile_rows != 0 && tile_rows != 128) return cudaErrorInvalidValue;
    return launch<128, 6, true>(x_logical, rows, w, groups, y, round_bf16, s);
  }
  if (tile_rows == 0) tile_rows = rows > kDenseBf16WsMaxRows128 ? 256 : 128;
  if (tile_rows == 256) return launch<256, 4, false>(x_logical, rows, w, groups, y, round_bf16, s);
  if (tile_rows == 128) return launch<128, 6, false>(x_logical, rows, w, groups, y, round_bf16, s);
  return cudaErrorInvalidValue;
}

}  // namespace di::backend::cuda
