// SPDX-License-Identifier: Apache-2.0
// Code-point classes lowered to UTF-8 byte automata. EBNF and regex classes are written over code
// points, the matcher runs over bytes; this file is the one bridge between the two.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "grammar/ir.h"

namespace di::grammar {

inline constexpr uint32_t kMaxCodePoint = 0x10FFFF;

// A sorted, non-overlapping list of inclusive code-point ranges.
class CharClass {
 public:
  void add(uint32_t lo, uint32_t hi);
  void add(const CharClass& o);
  CharClass negated() const;  // complement within [0, kMaxCodePoint] minus surrogates
  void normalize();
  bool contains(uint32_t c) const;
  const std::vector<std::pair<uint32_t, uint32_t>>& ranges() const { return ranges_; }

 private:
  std::vector<std::pair<uint32_t, uint32_t>> ranges_;
  bool sorted_ = true;
};

// Lowers the class to an expression matching exactly the UTF-8 encodings of its members
// (surrogates are never matched: they are not valid UTF-8).
ExprId utf8_class(Grammar& g, CharClass cls);

// Well-formed UTF-8 as a byte DFA: 0 between characters; 1 one continuation byte left; 2
// (after E0: A0-BF), 3 (two left), 4 (after ED: 80-9F), 5 (after F0: 90-BF), 6 (three left), 7
// (after F4: 80-8F). Returns the next state, -1 for a byte UTF-8 refuses there.
inline constexpr int kUtf8DfaStates = 8;
int utf8_dfa_step(int state, uint8_t b);

// Appends the UTF-8 encoding of `cp` to `out`.
void append_utf8(uint32_t cp, std::string& out);

// Decodes one code point from `s` at `pos`, advancing pos; returns false on invalid UTF-8.
bool decode_utf8(std::string_view s, size_t& pos, uint32_t& cp);

}  // namespace di::grammar
