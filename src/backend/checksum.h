// The checksum of a run of bytes that op tracing records (TracingOps, `--trace-ops`): the sum,
// modulo 2^64, of a splitmix64 term per 8-byte little-endian word keyed by the word's index (the
// tail word zero-padded), plus a term for the length. A sum is independent of the order its terms
// are added in, so a device computes it with atomics in any thread order and still gets the
// host's value bit for bit; keying each term by its index makes moved or swapped words count.
// This is a debugging aid (two traces are compared line by line), not a cryptographic hash.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define DI_CHECKSUM_HD __host__ __device__
#else
#define DI_CHECKSUM_HD
#endif

namespace di::backend {

DI_CHECKSUM_HD inline uint64_t checksum_term(uint64_t index, uint64_t word) {
  uint64_t z = word + 0x9E3779B97F4A7C15ull * (index + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Word `index` of `bytes` bytes at p, little-endian, zero past the end.
DI_CHECKSUM_HD inline uint64_t checksum_word(const uint8_t* p, size_t bytes, uint64_t index) {
  uint64_t w = 0;
  const size_t base = static_cast<size_t>(index) * 8;
  for (int b = 7; b >= 0; --b) {
    const size_t at = base + static_cast<size_t>(b);
    w = (w << 8) | (at < bytes ? p[at] : 0u);
  }
  return w;
}

DI_CHECKSUM_HD inline uint64_t checksum_length_term(size_t bytes) {
  return checksum_term(~uint64_t{0}, static_cast<uint64_t>(bytes));
}

// The whole checksum on the host.
inline uint64_t checksum_bytes(const void* data, size_t bytes) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t sum = checksum_length_term(bytes);
  for (uint64_t i = 0; i * 8 < bytes; ++i) sum += checksum_term(i, checksum_word(p, bytes, i));
  return sum;
}

}  // namespace di::backend
