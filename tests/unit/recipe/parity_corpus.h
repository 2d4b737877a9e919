// A seeded, deterministic corpus for tokenizer parity tests and benchmarks: multilingual prose,
// code, JSON, numbers, emoji, whitespace runs, every code point in context, special-token-looking
// text and invalid UTF-8. Generated (not checked in) so it can be large.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace di::recipe::testing {

// splitmix64: fixed output on every platform (unlike std:: distributions).
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  uint64_t below(uint64_t n) { return n == 0 ? 0 : next() % n; }
  template <class T>
  const T& pick(const std::vector<T>& v) {
    return v[below(v.size())];
  }

 private:
  uint64_t s_;
};

struct CorpusItem {
  std::string category;
  std::string text;  // raw bytes; valid UTF-8 except in category "invalid_utf8"
};

// The parity corpus (a few MB).
std::vector<CorpusItem> make_parity_corpus(uint64_t seed);

// Deterministic documents of about `bytes` bytes for benchmarks.
std::string make_english_prose(uint64_t seed, size_t bytes);
std::string make_cjk_prose(uint64_t seed, size_t bytes);
std::string make_code(uint64_t seed, size_t bytes);

}  // namespace di::recipe::testing
