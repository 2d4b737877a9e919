// SPDX-License-Identifier: Apache-2.0
#include "grammar/utf8.h"

#include <algorithm>

namespace di::grammar {

void CharClass::add(uint32_t lo, uint32_t hi) {
  if (lo > hi) return;
  ranges_.emplace_back(lo, std::min(hi, kMaxCodePoint));
  sorted_ = false;
}

void CharClass::add(const CharClass& o) {
  for (auto [lo, hi] : o.ranges_) add(lo, hi);
}

void CharClass::normalize() {
  if (sorted_) return;
  std::sort(ranges_.begin(), ranges_.end());
  std::vector<std::pair<uint32_t, uint32_t>> out;
  for (auto r : ranges_) {
    if (!out.empty() && r.first <= out.back().second + 1)
      out.back().second = std::max(out.back().second, r.second);
    else
      out.push_back(r);
  }
  ranges_ = std::move(out);
  sorted_ = true;
}

CharClass CharClass::negated() const {
  CharClass c = *this;
  c.normalize();
  CharClass out;
  uint32_t next = 0;
  for (auto [lo, hi] : c.ranges_) {
    if (lo > next) out.add(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMaxCodePoint) out.add(next, kMaxCodePoint);
  out.normalize();
  return out;
}

bool CharClass::contains(uint32_t cp) const {
  for (auto [lo, hi] : ranges_)
    if (cp >= lo && cp <= hi) return true;
  return false;
}

void append_utf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

bool decode_utf8(std::string_view s, size_t& pos, uint32_t& cp) {
  auto b = [&](size_t i) { return static_cast<uint8_t>(s[i]); };
  if (pos >= s.size()) return false;
  uint8_t c = b(pos);
  int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  if (n == 0 || pos + n > s.size()) return false;
  cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
  for (int i = 1; i < n; ++i) {
    if ((b(pos + i) & 0xC0) != 0x80) return false;
    cp = (cp << 6) | (b(pos + i) & 0x3F);
  }
  static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
  pos += n;
  return true;
}

namespace {

int encoded_length(uint32_t cp) {
  return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
}

// Splits [lo, hi] (same encoded length) until every byte position is an independent range, so
// that the range is exactly a sequence of byte ranges.
void split(Grammar& g, uint32_t lo, uint32_t hi, std::vector<ExprId>& out) {
  int n = encoded_length(lo);
  for (int i = 1; i < n; ++i) {
    uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split(g, lo, lo | m, out);
        split(g, (lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        split(g, lo, (hi & ~m) - 1, out);
        split(g, hi & ~m, hi, out);
        return;
      }
    }
  }
  std::string a, b;
  append_utf8(lo, a);
  append_utf8(hi, b);
  std::vector<ExprId> steps;
  for (size_t i = 0; i < a.size(); ++i)
    steps.push_back(
        g.bytes(ByteSet::range(static_cast<uint8_t>(a[i]), static_cast<uint8_t>(b[i]))));
  out.push_back(g.seq(std::move(steps)));
}

}  // namespace

ExprId utf8_class(Grammar& g, CharClass cls) {
  cls.normalize();
  std::vector<ExprId> alts;
  ByteSet ascii;
  static constexpr uint32_t kBounds[][2] = {
      {0x80, 0x7FF}, {0x800, 0xD7FF}, {0xE000, 0xFFFF}, {0x10000, 0x10FFFF}};
  for (auto [lo, hi] : cls.ranges()) {
    if (lo < 0x80) ascii.set_range(static_cast<int>(lo), static_cast<int>(std::min(hi, 0x7Fu)));
    for (auto& bound : kBounds) {
      uint32_t a = std::max(lo, bound[0]), b = std::min(hi, bound[1]);
      if (a <= b) split(g, a, b, alts);
    }
  }
  if (!ascii.empty()) alts.insert(alts.begin(), g.bytes(ascii));
  return g.alt(std::move(alts));
}

int utf8_dfa_step(int u, uint8_t b) {
  const bool cont = b >= 0x80 && b <= 0xBF;
  switch (u) {
    case 0:
      if (b < 0x80) return 0;
      if (b >= 0xC2 && b <= 0xDF) return 1;
      if (b == 0xE0) return 2;
      if (b == 0xED) return 4;
      if (b >= 0xE1 && b <= 0xEF) return 3;
      if (b == 0xF0) return 5;
      if (b >= 0xF1 && b <= 0xF3) return 6;
      return b == 0xF4 ? 7 : -1;
    case 1:
      return cont ? 0 : -1;
    case 2:
      return b >= 0xA0 && b <= 0xBF ? 1 : -1;
    case 3:
      return cont ? 1 : -1;
    case 4:
      return b >= 0x80 && b <= 0x9F ? 1 : -1;
    case 5:
      return b >= 0x90 && b <= 0xBF ? 3 : -1;
    case 6:
      return cont ? 3 : -1;
    default:
      return b >= 0x80 && b <= 0x8F ? 3 : -1;
  }
}

}  // namespace di::grammar
