// Ops::engram_hash_rows: one thread per position whose own token the previous step chose on the
// device. The arithmetic is kernels::engram::hash_position, the host hasher's, so the rows equal
// what the host would have hashed from the downloaded token.
#include "backend/cuda/grid_dependency.cuh"
#include "backend/cuda/kernels.h"
#include "kernels/ref/engram_hash.h"

namespace di::backend::cuda {

namespace {

constexpr int kThreads = 128;

__global__ void engram_hash_rows_kernel(const int32_t* tokens,
                                        const int32_t* rows,
                                        int64_t num_rows,
                                        const int32_t* look_back,
                                        const int32_t* token_map,
                                        int64_t map_size,
                                        int max_ngram,
                                        int heads,
                                        const int64_t* multipliers,
                                        const int64_t* primes,
                                        const int64_t* offsets,
                                        int32_t pad,
                                        int32_t* out) {
  pdl::enter_dependent_grid();
  const int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x;
  if (i >= num_rows) return;
  const int64_t r = rows[i];
  const int32_t t = tokens[r];
  const int32_t c = t >= 0 && t < map_size ? token_map[t] : -1;
  int64_t shifted[kEngramMaxNgram];
  shifted[0] = c < 0 ? pad : c;
  for (int s = 1; s < max_ngram; ++s) {
    shifted[s] = c < 0 ? pad : look_back[i * (max_ngram - 1) + s - 1];
  }
  const int64_t buckets = static_cast<int64_t>(max_ngram - 1) * heads;
  kernels::engram::hash_position(shifted, max_ngram, heads, multipliers, primes, offsets,
                                 out + r * buckets);
}

}  // namespace

cudaError_t engram_hash_rows(const int32_t* tokens,
                             const int32_t* rows,
                             int64_t num_rows,
                             const int32_t* look_back,
                             const int32_t* token_map,
                             int64_t map_size,
                             int max_ngram,
                             int heads,
                             const int64_t* multipliers,
                             const int64_t* primes,
                             const int64_t* offsets,
                             int32_t pad,
                             int32_t* out,
                             cudaStream_t s) {
  if (num_rows == 0) return cudaSuccess;
  if (num_rows < 0 || max_ngram < 2 || max_ngram > kEngramMaxNgram || heads < 1) {
    return cudaErrorInvalidValue;
  }
  const int64_t blocks = (num_rows + kThreads - 1) / kThreads;
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  pdl::launch_dependent(engram_hash_rows_kernel, dim3(static_cast<unsigned>(blocks)),
                        dim3(kThreads), 0, s, tokens, rows, num_rows, look_back, token_map,
                        map_size, max_ngram, heads, multipliers, primes, offsets, pad, out);
  return cudaGetLastError();
}

}  // namespace di::backend::cuda
