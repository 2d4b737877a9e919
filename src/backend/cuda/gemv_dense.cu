// Dense (BF16/F32 weight) GEMV for a few rows, bitwise equal to kernels::dot_f32 / CpuOps::linear:
// one thread owns one output column and runs all eight lanes of the dot_f32 order as eight
// independent accumulators (the order forbids splitting a column's K). The block's 128 weight
// rows stream through shared memory in 128-byte chunks per row, kStages deep, copied with
// cp.async so that each warp's copies cover whole 128-byte lines of four rows (a thread reading
// its own row straight from global memory would touch 32 rows per instruction). The bandwidth-
// bound decode needs this: the 129,280 x 5,120 BF16 head alone is 1.3 GB per step.

#include "backend/cuda/device_numeric.cuh"
#include "backend/cuda/grid_dependency.cuh"
#include "backend/cuda/kernels.h"

namespace di::backend::cuda {

namespace {

constexpr int kGemvThreads = 128;            // outputs per block
constexpr int kChunkBytes = 128;             // per row and stage
constexpr int kRowPitch = kChunkBytes + 16;  // padding: conflict-free 16-byte reads per thread
constexpr int kStages = 4;
constexpr int kStageBytes = kGemvThreads * kRowPitch;
constexpr int kSmemBytes = kStages * kStageBytes;

// Where a launch reads and writes: y[m, n] = x[m, (n / group_out) * K ...] . w[n] for m < rows;
// a plain product has one group (group_out = N).
struct GemvShape {
  int64_t K = 0, N = 0;
  int64_t x_stride = 0;   // floats between rows of x
  int64_t group_out = 0;  // outputs per group
};

__device__ __forceinline__ void cp_async_16(uint8_t* smem, const uint8_t* gmem) {
  const uint32_t d = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(gmem) : "memory");
}

// Copies chunk c of the block's rows into `stage`: 128 rows x 8 pieces of 16 B, eight per thread;
// rows past N repeat row N - 1 (their results are not stored).
__device__ __forceinline__ void issue_chunk(
    const uint8_t* w, int64_t row0, int64_t N, int64_t row_bytes, int64_t c, uint8_t* stage) {
#pragma unroll
  for (int i = 0; i < kChunkBytes / 16; ++i) {
    const int p = static_cast<int>(threadIdx.x) + i * kGemvThreads;
    const int r = p / (kChunkBytes / 16), seg = p % (kChunkBytes / 16);
    const int64_t row = (row0 + r < N ? row0 + r : N - 1);
    cp_async_16(stage + r * kRowPitch + seg * 16, w + row * row_bytes + c * kChunkBytes + seg * 16);
  }
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

template <bool kBf16>
__device__ __forceinline__ void unpack16(const uint4& v, float* out) {
  if constexpr (kBf16) {
    const uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      out[2 * i] = __uint_as_float(u[i] << 16);
      out[2 * i + 1] = __uint_as_float(u[i] & 0xffff0000u);
    }
  } else {
    out[0] = __uint_as_float(v.x);
    out[1] = __uint_as_float(v.y);
    out[2] = __uint_as_float(v.z);
    out[3] = __uint_as_float(v.w);
  }
}

// kRows rows of x at once; K * element size % kChunkBytes == 0 is the caller's guarantee (so the
// dot_f32 tail past K / 8 * 8 is empty).
template <bool kBf16, int kRows>
__global__ void __launch_bounds__(kGemvThreads) dense_gemv_kernel(const float* __restrict__ x,
                                                                  GemvShape shape,
                                                                  const uint8_t* __restrict__ w,
                                                                  float* __restrict__ y,
                                                                  bool round_out) {
  pdl::enter_dependent_grid();
  extern __shared__ uint4 smem4[];
  uint8_t* smem = reinterpret_cast<uint8_t*>(smem4);
  constexpr int kElemBytes = kBf16 ? 2 : 4;
  constexpr int kChunkElems = kChunkBytes / kElemBytes;
  const int64_t K = shape.K, N = shape.N;
  const int64_t row0 = blockIdx.x * int64_t{kGemvThreads};
  const int64_t n = row0 + threadIdx.x;
  const int64_t row_bytes = K * kElemBytes, chunks = row_bytes / kChunkBytes;
  const float* xg = x + ((n < N ? n : N - 1) / shape.group_out) * K;

  float acc[kRows][8];
#pragma unroll
  for (int m = 0; m < kRows; ++m) {
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[m][j] = 0.0f;
  }
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < chunks) {
      issue_chunk(w, row0, N, row_bytes, s, smem + s * kStageBytes);
    } else {
      asm volatile("cp.async.commit_group;\n" ::: "memory");
    }
  }
  for (int64_t c = 0; c < chunks; ++c) {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kStages - 2) : "memory");
    __syncthreads();  // chunk c landed for every thread; stage (c - 1) % kStages is free
    const int64_t next = c + kStages - 1;
    if (next < chunks) {
      issue_chunk(w, row0, N, row_bytes, next, smem + (next % kStages) * kStageBytes);
    } else {
      asm volatile("cp.async.commit_group;\n" ::: "memory");
    }
    const uint4* mine = reinterpret_cast<const uint4*>(smem + (c % kStages) * kStageBytes +
                                                       threadIdx.x * kRowPitch);
    float wv[kChunkElems];
#pragma unroll
    for (int i = 0; i < kChunkBytes / 16; ++i) unpack16<kBf16>(mine[i], wv + i * (16 / kElemBytes));
    const int64_t k0 = c * kChunkElems;
#pragma unroll
    for (int m = 0; m < kRows; ++m) {
      const float4* xp = reinterpret_cast<const float4*>(xg + m * shape.x_stride + k0);
#pragma unroll
      for (int i = 0; i < kChunkElems / 4; ++i) {
        const float4 v = __ldg(xp + i);
        const float xv[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int k = 4 * i + e;  // element k of the chunk goes to lane k % 8 (k0 % 8 == 0)
          acc[m][k & 7] = __fadd_rn(acc[m][k & 7], __fmul_rn(xv[e], wv[k]));
        }
      }
    }
  }
  if (n >= N) return;
#pragma unroll
  for (int m = 0; m < kRows; ++m) {
    const float* l = acc[m];
    const float s = __fadd_rn(__fadd_rn(__fadd_rn(l[0], l[1]), __fadd_rn(l[2], l[3])),
                              __fadd_rn(__fadd_rn(l[4], l[5]), __fadd_rn(l[6], l[7])));
    y[m * N + n] = round_out ? round_bf16(s) : s;
  }
}

template <bool kBf16, int kRows>
cudaError_t launch(const float* x,
                   const GemvShape& shape,
                   const uint8_t* w,
                   float* y,
                   bool round,
                   cudaStream_t s) {
  cudaError_t e = cudaFuncSetAttribute(dense_gemv_kernel<kBf16, kRows>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
  if (e != cudaSuccess) return e;
  const unsigned blocks = static_cast<unsigned>((shape.N + kGemvThreads - 1) / kGemvThreads);
  pdl::launch_dependent(dense_gemv_kernel<kBf16, kRows>, dim3(blocks), dim3(kGemvThreads),
                        kSmemBytes, s, x, shape, w, y, round);
  return cudaGetLastError();
}

template <bool kBf16>
cudaError_t launch_rows(const float* x,
                        int64_t rows,
                        const GemvShape& shape,
                        const uint8_t* w,
                        float* y,
                        bool round,
                        cudaStream_t s) {
  switch (rows) {
    case 1:
      return launch<kBf16, 1>(x, shape, w, y, round, s);
    case 2:
      return launch<kBf16, 2>(x, shape, w, y, round, s);
    case 3:
      return launch<kBf16, 3>(x, shape, w, y, round, s);
    case 4:
      return launch<kBf16, 4>(x, shape, w, y, round, s);
    case 5:
      return launch<kBf16, 5>(x, shape, w, y, round, s);
    case 6:
      return launch<kBf16, 6>(x, shape, w, y, round, s);
    case 7:
      return launch<kBf16, 7>(x, shape, w, y, round, s);
    case 8:
      return launch<kBf16, 8>(x, shape, w, y, round, s);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace

bool dense_gemv_applies(int64_t rows, const DeviceWeight& w) {
  const bool dense = w.format == WeightFormat::kBF16 || w.format == WeightFormat::kF32;
  const int64_t elem = w.format == WeightFormat::kBF16 ? 2 : 4;
  return dense && rows >= 1 && rows <= kDenseGemvMaxRows && w.in_features > 0 &&
         (w.in_features * elem) % kChunkBytes == 0 && reinterpret_cast<uintptr_t>(w.data) % 16 == 0;
}

cudaError_t dense_gemv(const float* x,
                       int64_t rows,
                       const DeviceWeight& w,
                       int groups,
                       float* y,
                       bool round_bf16,
                       cudaStream_t s) {
  if (!dense_gemv_applies(rows, w) || reinterpret_cast<uintptr_t>(x) % 16 != 0 || groups < 1 ||
      w.out_features % groups != 0) {
    return cudaErrorInvalidValue;
  }
  if (w.out_features == 0) return cudaSuccess;
  const GemvShape shape{w.in_features, w.out_features, w.in_features * groups,
                        w.out_features / groups};
  return w.format == WeightFormat::kBF16
             ? launch_rows<true>(x, rows, shape, w.data, y, round_bf16, s)
             : launch_rows<false>(x, rows, shape, w.data, y, round_bf16, s);
}

}  // namespace di::backend::cuda
