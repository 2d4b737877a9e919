// See numpy_rng.h. The constants and the order of operations follow numpy's
// SeedSequence (bit_generator.pyx), pcg64.h and distributions.c; every deviation,
// however small, changes the multipliers, so the golden test checks them exactly.
#include "model/engram/numpy_rng.h"

#include <array>
#include <limits>

namespace di::engram {
namespace {

constexpr uint32_t kInitA = 0x43b0d7e5u;
constexpr uint32_t kMultA = 0x931e8875u;
constexpr uint32_t kInitB = 0x8b51f9ddu;
constexpr uint32_t kMultB = 0x58f38dedu;
constexpr uint32_t kMixMultL = 0xca01f9ddu;
constexpr uint32_t kMixMultR = 0x4973f715u;
constexpr int kXShift = 16;  // half the bit width of a uint32 word
constexpr std::size_t kPoolSize = 4;

// Hashes one word with a running constant that advances on every call; all uint32 math.
uint32_t hashmix(uint32_t value, uint32_t& hash_const) {
  value ^= hash_const;
  hash_const *= kMultA;
  value *= hash_const;
  value ^= value >> kXShift;
  return value;
}

uint32_t mix(uint32_t x, uint32_t y) {
  uint32_t result = kMixMultL * x - kMixMultR * y;
  result ^= result >> kXShift;
  return result;
}

// numpy turns an integer seed into little-endian uint32 words; 0 becomes [0], not [].
std::vector<uint32_t> int_to_words(uint64_t n) {
  std::vector<uint32_t> words;
  if (n == 0) words.push_back(0);
  while (n > 0) {
    words.push_back(static_cast<uint32_t>(n & 0xFFFFFFFFu));
    n >>= 32;
  }
  return words;
}

// SeedSequence.mix_entropy: fills the pool, then mixes every pool word into every other
// one so that late entropy words influence early pool words.
std::array<uint32_t, kPoolSize> mix_entropy(const std::vector<uint32_t>& entropy) {
  std::array<uint32_t, kPoolSize> pool{};
  uint32_t hash_const = kInitA;
  for (std::size_t i = 0; i < kPoolSize; ++i) {
    pool[i] = hashmix(i < entropy.size() ? entropy[i] : 0u, hash_const);
  }
  for (std::size_t src = 0; src < kPoolSize; ++src) {
    for (std::size_t dst = 0; dst < kPoolSize; ++dst) {
      if (src != dst) pool[dst] = mix(pool[dst], hashmix(pool[src], hash_const));
    }
  }
  for (std::size_t src = kPoolSize; src < entropy.size(); ++src) {
    for (std::size_t dst = 0; dst < kPoolSize; ++dst) {
      pool[dst] = mix(pool[dst], hashmix(entropy[src], hash_const));
    }
  }
  return pool;
}

constexpr uint128_t kPcgMultiplier =
    (static_cast<uint128_t>(0x2360ED051FC65DA4ull) << 64) | 0x4385DF649FCCF645ull;

uint64_t rotr64(uint64_t value, unsigned rot) {
  rot &= 63u;
  return rot == 0 ? value : (value >> rot) | (value << (64u - rot));
}

// Lemire's multiply-shift with rejection on 32-bit draws (numpy's
// buffered_bounded_lemire_uint32); `rng` is the inclusive range, < 0xFFFFFFFF.
uint32_t bounded_lemire_uint32(Pcg64& gen, uint32_t rng) {
  const uint32_t rng_excl = rng + 1u;
  uint64_t m = static_cast<uint64_t>(gen.next_uint32()) * rng_excl;
  uint32_t leftover = static_cast<uint32_t>(m);
  if (leftover < rng_excl) {
    const uint32_t threshold = (std::numeric_limits<uint32_t>::max() - rng) % rng_excl;
    while (leftover < threshold) {
      m = static_cast<uint64_t>(gen.next_uint32()) * rng_excl;
      leftover = static_cast<uint32_t>(m);
    }
  }
  return static_cast<uint32_t>(m >> 32);
}

// The 64-bit version (numpy's bounded_lemire_uint64); `rng` < UINT64_MAX.
uint64_t bounded_lemire_uint64(Pcg64& gen, uint64_t rng) {
  const uint64_t rng_excl = rng + 1u;
  uint128_t m = static_cast<uint128_t>(gen.next_uint64()) * rng_excl;
  uint64_t leftover = static_cast<uint64_t>(m);
  if (leftover < rng_excl) {
    const uint64_t threshold = (std::numeric_limits<uint64_t>::max() - rng) % rng_excl;
    while (leftover < threshold) {
      m = static_cast<uint128_t>(gen.next_uint64()) * rng_excl;
      leftover = static_cast<uint64_t>(m);
    }
  }
  return static_cast<uint64_t>(m >> 64);
}

}  // namespace

std::vector<uint32_t> seed_sequence_state_u32(uint64_t entropy, std::size_t n_words) {
  const std::array<uint32_t, kPoolSize> pool = mix_entropy(int_to_words(entropy));
  std::vector<uint32_t> state(n_words);
  uint32_t hash_const = kInitB;
  for (std::size_t i = 0; i < n_words; ++i) {
    uint32_t value = pool[i % kPoolSize];  // the pool is cycled
    value ^= hash_const;
    hash_const *= kMultB;
    value *= hash_const;
    value ^= value >> kXShift;
    state[i] = value;
  }
  return state;
}

std::vector<uint64_t> seed_sequence_state_u64(uint64_t entropy, std::size_t n_words) {
  const std::vector<uint32_t> words = seed_sequence_state_u32(entropy, 2 * n_words);
  std::vector<uint64_t> state(n_words);
  for (std::size_t i = 0; i < n_words; ++i) {
    state[i] =
        static_cast<uint64_t>(words[2 * i]) | (static_cast<uint64_t>(words[2 * i + 1]) << 32);
  }
  return state;
}

Pcg64 Pcg64::from_seed(uint64_t seed) {
  // numpy's pcg64_set_seed puts the first uint64 of each pair in the HIGH half.
  const std::vector<uint64_t> v = seed_sequence_state_u64(seed, 4);
  const uint128_t initstate = (static_cast<uint128_t>(v[0]) << 64) | v[1];
  const uint128_t initseq = (static_cast<uint128_t>(v[2]) << 64) | v[3];
  return Pcg64(initstate, initseq);
}

Pcg64::Pcg64(uint128_t initstate, uint128_t initseq) {
  state_ = 0;
  inc_ = (initseq << 1) | 1u;
  step();
  state_ += initstate;
  step();
}

void Pcg64::step() {
  state_ = state_ * kPcgMultiplier + inc_;
}

uint64_t Pcg64::next_uint64() {
  step();
  const uint64_t hi = static_cast<uint64_t>(state_ >> 64);
  const uint64_t lo = static_cast<uint64_t>(state_);
  return rotr64(hi ^ lo, static_cast<unsigned>(state_ >> 122));
}

uint32_t Pcg64::next_uint32() {
  if (has_uint32_) {
    has_uint32_ = false;
    return uinteger_;
  }
  const uint64_t next = next_uint64();
  has_uint32_ = true;
  uinteger_ = static_cast<uint32_t>(next >> 32);
  return static_cast<uint32_t>(next & 0xFFFFFFFFu);
}

Expected<std::vector<int64_t>> integers_int64(Pcg64& rng,
                                              int64_t low,
                                              int64_t high,
                                              std::size_t n) {
  if (low >= high) return invalid_argument("integers: low >= high");
  // numpy works on the closed interval [low, high - 1] in unsigned arithmetic.
  const uint64_t range = static_cast<uint64_t>(high - 1) - static_cast<uint64_t>(low);
  const uint64_t off = static_cast<uint64_t>(low);
  std::vector<int64_t> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    uint64_t draw = 0;
    if (range == 0) {
      draw = 0;  // numpy draws nothing here
    } else if (range == 0xFFFFFFFFull) {
      draw = rng.next_uint32();
    } else if (range < 0xFFFFFFFFull) {
      draw = bounded_lemire_uint32(rng, static_cast<uint32_t>(range));
    } else if (range == std::numeric_limits<uint64_t>::max()) {
      draw = rng.next_uint64();
    } else {
      draw = bounded_lemire_uint64(rng, range);
    }
    out[i] = static_cast<int64_t>(off + draw);
  }
  return out;
}

}  // namespace di::engram
