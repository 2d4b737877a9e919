// A bit-exact port of the parts of numpy.random that the Engram reference uses to draw its
// hash multipliers: `np.random.default_rng(seed).integers(low, high, size, dtype=np.int64)`.
// The multipliers are baked into the released checkpoint's behaviour (they are not stored
// in it), so anything short of numpy's exact stream would hash tokens to the wrong rows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "util/status.h"

namespace di::engram {

// Unsigned 128-bit arithmetic (GCC/Clang extension; __extension__ keeps -Wpedantic quiet).
__extension__ typedef unsigned __int128 uint128_t;

// numpy.random.SeedSequence(entropy).generate_state(n_words, np.uint32), for a
// non-negative integer entropy and no spawn key (pool size 4).
std::vector<uint32_t> seed_sequence_state_u32(uint64_t entropy, std::size_t n_words);
// The same with dtype=np.uint64: consecutive uint32 words paired little-endian.
std::vector<uint64_t> seed_sequence_state_u64(uint64_t entropy, std::size_t n_words);

// numpy's PCG64 bit generator (PCG XSL-RR 128/64, the "setseq" variant with a
// per-stream increment), including its one-word buffer for 32-bit draws.
class Pcg64 {
 public:
  // Equivalent of np.random.PCG64(seed) / the bit generator of np.random.default_rng(seed).
  static Pcg64 from_seed(uint64_t seed);
  // pcg_setseq_128_srandom_r(initstate, initseq).
  Pcg64(uint128_t initstate, uint128_t initseq);

  uint64_t next_uint64();
  // Low half of a fresh 64-bit draw first, then its high half on the next call.
  uint32_t next_uint32();

 private:
  void step();

  uint128_t state_ = 0;
  uint128_t inc_ = 0;
  bool has_uint32_ = false;
  uint32_t uinteger_ = 0;
};

// Generator.integers(low, high, size=n, dtype=np.int64) with endpoint=False, drawing from
// `rng`. Fails (like numpy's ValueError) when low >= high.
Expected<std::vector<int64_t>> integers_int64(Pcg64& rng, int64_t low, int64_t high, std::size_t n);

}  // namespace di::engram
