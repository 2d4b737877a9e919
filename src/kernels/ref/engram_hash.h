// One position's Engram bucket rows for one layer (the reference's NgramHashState.forward), as the
// host hasher (model/engram/ngram_hasher.h) and the backends' Ops::engram_hash_rows compute it:
// shared so that a token hashed on the device gives the rows the host would have given.
//
// `shifted[s]` is the compressed token at look-back s (s = 0: the position's own token), already
// replaced by the pad token from the first look-back that runs past the sequence start or hits a
// dead token. With x_s = shifted[s] * multipliers[s] (int64, wrapping) and rolling_n = x_0 ^ ... ^
// x_{n-1}, head h of n-gram size n reads row floor_mod(rolling_n, primes[k]) + offsets[k] with
// k = (n - 2) * heads + h.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define DI_ENGRAM_HD __host__ __device__ __forceinline__
#else
#define DI_ENGRAM_HD inline
#endif

namespace di::kernels::engram {

// int64 product with two's-complement wrap-around, as torch computes it, without UB.
DI_ENGRAM_HD int64_t wrapping_mul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}

// torch's `%` on int64 tensors is a floor modulo: the result takes the divisor's sign.
DI_ENGRAM_HD int64_t floor_mod(int64_t value, int64_t modulus) {
  const int64_t r = value % modulus;
  return r < 0 ? r + modulus : r;
}

// out[(n - 2) * heads + h] for n = 2 .. max_ngram and h < heads.
template <class Out>
DI_ENGRAM_HD void hash_position(const int64_t* shifted,
                                int max_ngram,
                                int heads,
                                const int64_t* multipliers,
                                const int64_t* primes,
                                const int64_t* offsets,
                                Out* out) {
  int64_t rolling = wrapping_mul(shifted[0], multipliers[0]);
  for (int i = 1; i < max_ngram; ++i) {
    rolling ^= wrapping_mul(shifted[i], multipliers[i]);
    for (int h = 0; h < heads; ++h) {
      const int k = (i - 1) * heads + h;
      out[k] = static_cast<Out>(floor_mod(rolling, primes[k]) + offsets[k]);
    }
  }
}

}  // namespace di::kernels::engram
