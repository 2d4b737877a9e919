// See primes.h.
#include "model/engram/primes.h"

#include <limits>

#include "model/engram/numpy_rng.h"  // uint128_t

namespace di::engram {
namespace {

uint64_t mul_mod(uint64_t a, uint64_t b, uint64_t m) {
  return static_cast<uint64_t>(static_cast<uint128_t>(a) * b % m);
}

uint64_t pow_mod(uint64_t base, uint64_t exp, uint64_t m) {
  uint64_t result = 1 % m;
  base %= m;
  while (exp > 0) {
    if (exp & 1u) result = mul_mod(result, base, m);
    base = mul_mod(base, base, m);
    exp >>= 1;
  }
  return result;
}

}  // namespace

bool is_prime_u64(uint64_t n) {
  // These 12 bases make Miller-Rabin exact below 3.3e24, which covers all of uint64.
  constexpr uint64_t kBases[] = {2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37};
  if (n < 2) return false;
  for (uint64_t p : kBases) {
    if (n % p == 0) return n == p;
  }
  uint64_t d = n - 1;
  int s = 0;
  while ((d & 1u) == 0) {
    d >>= 1;
    ++s;
  }
  for (uint64_t a : kBases) {
    uint64_t x = pow_mod(a, d, n);
    if (x == 1 || x == n - 1) continue;
    bool composite = true;
    for (int r = 1; r < s; ++r) {
      x = mul_mod(x, x, n);
      if (x == n - 1) {
        composite = false;
        break;
      }
    }
    if (composite) return false;
  }
  return true;
}

Expected<int64_t> find_next_prime(int64_t start, const std::unordered_set<int64_t>& seen) {
  int64_t candidate = start < 1 ? 1 : start;
  while (candidate < std::numeric_limits<int64_t>::max()) {
    ++candidate;
    if (is_prime_u64(static_cast<uint64_t>(candidate)) && !seen.contains(candidate)) {
      return candidate;
    }
  }
  return out_of_range("find_next_prime: no unused prime above " + std::to_string(start) +
                      " fits in int64");
}

}  // namespace di::engram
