// SPDX-License-Identifier: Apache-2.0
// Classic digit-range decomposition: split [a, b] into ranges of equal digit count, then peel the
// first digit off equal-length ranges.
#include "grammar/json_schema/int_range.h"

#include <algorithm>
#include <string>
#include <vector>

namespace di::grammar {

namespace {

std::string digit_range(char lo, char hi) {
  if (lo == hi) return std::string(1, lo);
  if (lo == '0' && hi == '9') return "\\d";
  return std::string("[") + lo + "-" + hi + "]";
}

// a, b: decimal strings of equal length, a <= b.
std::string same_len(const std::string& a, const std::string& b) {
  if (a.size() == 1) return digit_range(a[0], b[0]);
  std::string ra = a.substr(1), rb = b.substr(1);
  if (a[0] == b[0]) return std::string(1, a[0]) + "(" + same_len(ra, rb) + ")";
  std::vector<std::string> parts;
  std::string nines(ra.size(), '9'), zeros(ra.size(), '0');
  size_t n = ra.size();
  char first_lo = a[0], first_hi = b[0];
  if (ra != zeros) {
    parts.push_back(std::string(1, a[0]) + "(" + same_len(ra, nines) + ")");
    ++first_lo;
  }
  bool b_full = rb == nines;
  if (!b_full) --first_hi;
  if (first_lo <= first_hi)
    parts.push_back(digit_range(first_lo, first_hi) + "\\d{" + std::to_string(n) + "}");
  if (!b_full) parts.push_back(std::string(1, b[0]) + "(" + same_len(zeros, rb) + ")");
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? "|" : "") + parts[i];
  return out;
}

// Non-negative range; hi = nullopt means unbounded.
std::string nonneg(uint64_t lo, std::optional<uint64_t> hi) {
  std::vector<std::string> parts;
  std::string a = std::to_string(lo);
  for (;;) {
    std::string top(a.size(), '9');
    std::string b = hi && std::to_string(*hi).size() == a.size() ? std::to_string(*hi) : top;
    parts.push_back(same_len(a, b));
    if (hi && std::to_string(*hi).size() == a.size()) break;
    if (!hi) {  // everything longer
      parts.push_back("[1-9]\\d{" + std::to_string(a.size()) + ",}");
      break;
    }
    a = "1" + std::string(a.size(), '0');
  }
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? "|" : "") + parts[i];
  return out;
}

}  // namespace

std::string int_range_regex(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  if (lo && hi && *lo > *hi) return "";
  std::vector<std::string> parts;
  // Negative part: -(|n|) for n in [lo, min(hi, -1)].
  if (!lo || *lo < 0) {
    int64_t neg_hi = hi ? std::min<int64_t>(*hi, -1) : -1;
    if (!lo || *lo <= neg_hi) {
      uint64_t mag_lo = static_cast<uint64_t>(-(neg_hi + 1)) + 1;
      std::optional<uint64_t> mag_hi;
      if (lo) mag_hi = static_cast<uint64_t>(-(*lo + 1)) + 1;
      parts.push_back("-(" + nonneg(mag_lo, mag_hi) + ")");
    }
  }
  if (!hi || *hi >= 0) {
    uint64_t a = lo && *lo > 0 ? static_cast<uint64_t>(*lo) : 0;
    std::optional<uint64_t> b;
    if (hi) b = static_cast<uint64_t>(*hi);
    parts.push_back(nonneg(a, b));
  }
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? "|" : "") + ("(" + parts[i] + ")");
  return out;
}

}  // namespace di::grammar
