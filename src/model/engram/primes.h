// Prime search for the Engram bucket sizes (the reference's `find_next_prime`).
// Each hash head of each n-gram size of each Engram layer gets its own prime modulus;
// distinct primes keep the heads' collisions independent of each other.
#pragma once

#include <cstdint>
#include <unordered_set>

#include "util/status.h"

namespace di::engram {

// Deterministic Miller-Rabin, exact for every 64-bit n.
bool is_prime_u64(uint64_t n);

// Smallest prime p > start with p not in `seen`. Fails if no such prime fits in int64
// (table offsets are int64 in the reference).
Expected<int64_t> find_next_prime(int64_t start, const std::unordered_set<int64_t>& seen);

}  // namespace di::engram
