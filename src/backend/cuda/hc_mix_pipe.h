// The hyper-connection mix products of few rows as a pipeline (hc_mix_pipe.cu): raw[r, o] =
// dot_f32(x[r], fn[o]) for o < mix and sum_squares[r] = dot_f32(x[r], x[r]), in the CPU's lane
// order, bitwise equal to hc_mix_products_staged (hc_mixes.cu), which hc_mix_products picks
// where this one does not apply or does not win.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace di::backend::cuda {

// Rows up to which hc_mix_products takes the pipelined kernel: it beat the staged one at every
// count measured, 1-64 (the most CudaOps sends here; H200: docs/notes/cuda-kernels.md, mixpipe).
constexpr int64_t kHcMixPipeMaxRows = 64;
// Warps per block hc_mix_products uses: 8 was 3-4 % faster than 16 at 1-64 rows (same run).
constexpr int kHcMixPipeWarps = 8;

// Whether the pipelined kernel takes these operands: hc_dim a multiple of 4 and at most 32,768
// (64 chunks of 512), x and fn 16-byte aligned (16-byte loads and copies), rows <= 65535.
bool hc_mix_pipe_supports(const float* x, int64_t rows, int64_t hc_dim, const float* fn);

// One block of `warps` (8 or 16) per (output, row); first == mix gives the sums of squares
// alone (fn unused, may be null). Needs hc_mix_pipe_supports.
cudaError_t hc_mix_products_pipelined(const float* x,
                                      int64_t rows,
                                      int64_t hc_dim,
                                      const float* fn,
                                      int mix,
                                      int first,
                                      float* raw,
                                      float* sum_squares,
                                      int warps,
                                      cudaStream_t s);

// Bench probes (wrong outputs, to see where the time goes): the 16-warp kernel with 1: the
// products and barriers but no adds, 2: the adds over whatever shared memory holds, without
// products or barriers, 3: neither (launch, grid dependency and the store).
cudaError_t hc_mix_pipe_probe(const float* x,
                              int64_t rows,
                              int64_t hc_dim,
                              const float* fn,
                              int mix,
                              float* raw,
                              float* sum_squares,
                              int probe,
                              cudaStream_t s);

// The load-then-chain kernel of hc_mixes.cu (any hc_dim that hc_mix_products_fit takes), for the
// tests and the bench to compare with.
cudaError_t hc_mix_products_staged(const float* x,
                                   int64_t rows,
                                   int64_t hc_dim,
                                   const float* fn,
                                   int mix,
                                   int first,
                                   float* raw,
                                   float* sum_squares,
                                   cudaStream_t s);

}  // namespace di::backend::cuda
