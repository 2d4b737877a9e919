// SPDX-License-Identifier: Apache-2.0
// A set of byte values (0..255): the terminal of the byte-level grammar IR. Every front end
// lowers characters to UTF-8 byte sequences whose steps are ByteSets.
#pragma once

#include <cstdint>

namespace di::grammar {

struct ByteSet {
  uint64_t words[4] = {0, 0, 0, 0};

  static ByteSet single(uint8_t b) {
    ByteSet s;
    s.set(b);
    return s;
  }
  static ByteSet range(uint8_t lo, uint8_t hi) {
    ByteSet s;
    s.set_range(lo, hi);
    return s;
  }
  void set(uint8_t b) { words[b >> 6] |= uint64_t{1} << (b & 63); }
  void set_range(int lo, int hi) {
    for (int b = lo; b <= hi; ++b) set(static_cast<uint8_t>(b));
  }
  bool test(uint8_t b) const { return (words[b >> 6] >> (b & 63)) & 1; }
  bool empty() const { return (words[0] | words[1] | words[2] | words[3]) == 0; }
  int count() const {
    return __builtin_popcountll(words[0]) + __builtin_popcountll(words[1]) +
           __builtin_popcountll(words[2]) + __builtin_popcountll(words[3]);
  }
  // The smallest member; only meaningful when !empty().
  int first() const {
    for (int w = 0; w < 4; ++w)
      if (words[w]) return w * 64 + __builtin_ctzll(words[w]);
    return -1;
  }
  ByteSet& operator|=(const ByteSet& o) {
    for (int i = 0; i < 4; ++i) words[i] |= o.words[i];
    return *this;
  }
  bool operator==(const ByteSet& o) const {
    return words[0] == o.words[0] && words[1] == o.words[1] && words[2] == o.words[2] &&
           words[3] == o.words[3];
  }
};

}  // namespace di::grammar
