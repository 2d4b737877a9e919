// The lane-order weight layout of the bf16 wgmma GEMM (gemm_wgmma_bf16.cu, pgemm2). Its consumer
// lanes read each k32 block's A fragments (mma.m16n8k16 layout: row g = lane / 4 and g + 8,
// k pairs 2q, 2q + 8 with q = lane % 4, two k16 halves) from a tile in shared memory; in the
// original row-major layout that is eight 16-bit loads per lane and block, each needing its own
// swizzled address. Here every 16 rows x 128 K of the weight (one warp's share of a pipeline
// stage, 2048 bytes, the bytes of rows 16 G.. 16 G + 15 and columns 128 s.. 128 s + 127) are
// reordered so that lane L's 16 bytes of block kk sit at 512 kk + 16 L: one 128-bit load, the
// 32 lanes reading 512 contiguous bytes (no bank conflict, no swizzle needed). Byte b of them is
// row g + 8 (b / 8), k = 32 kk + 16 (b / 4 % 2) + 8 (b / 2 % 2) + 2 q + b % 2. Only the order of
// bytes inside such a 2048-byte block changes, so TMA boxes of 16-row multiples stay valid.
#include "backend/cuda/grid_dependency.cuh"
#include "backend/cuda/kernels.h"

namespace di::backend::cuda {

namespace {

// One output word (4 bytes) per thread; rows past `rows` (the padding to 16) become zeros.
__global__ void permute_kernel(
    const uint8_t* w, int64_t rows, int64_t K, int64_t words, uint32_t* out) {
  pdl::enter_dependent_grid();
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= words) return;
  const int64_t byte = 4 * i, R = byte / K, col = byte % K;  // K % 128 == 0: one block per word
  const int64_t group_row = R / 16 * 16, stage_col = col / 128 * 128;
  const int P0 = static_cast<int>((R % 16) * 128 + col % 128);
  uint32_t v = 0;
  for (int j = 0; j < 4; ++j) {
    const int P = P0 + j, kk = P / 512, lane = P / 16 % 32, b = P % 16;
    const int r = lane / 4 + 8 * (b / 8);
    const int k = 32 * kk + 16 * (b / 4 % 2) + 8 * (b / 2 % 2) + 2 * (lane % 4) + b % 2;
    const int64_t src_row = group_row + r;
    const uint32_t x = src_row < rows ? w[src_row * K + stage_col + k] : 0u;
    v |= x << (8 * j);
  }
  out[i] = v;
}

}  // namespace

int64_t wgmma_bf16_layout_bytes(int64_t rows, int64_t K) {
  return (rows + 15) / 16 * 16 * K;
}

cudaError_t wgmma_bf16_permute(
    const uint8_t* w, int64_t rows, int64_t K, uint8_t* out, cudaStream_t s) {
  if (K % 128 != 0 || reinterpret_cast<uintptr_t>(out) % 4 != 0) return cudaErrorInvalidValue;
  const int64_t words = wgmma_bf16_layout_bytes(rows, K) / 4;
  if (words == 0) return cudaSuccess;
  pdl::launch_dependent(permute_kernel, dim3(static_cast<unsigned>((words + 255) / 256)), dim3(256),
                        0, s, w, rows, K, words, reinterpret_cast<uint32_t*>(out));
  return cudaGetLastError();
}

}  // namespace di::backend::cuda
