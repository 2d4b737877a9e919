// UTF-8 validation and lossy repair (maximal subpart replacement).
#include "recipe/tokenizer/utf8.h"

namespace di::recipe {
namespace {

// Valid range of the second byte for a lead byte (Unicode Table 3-7); {0, 0} if not a lead.
struct SecondRange {
  uint8_t lo, hi;
};

SecondRange second_range(uint8_t lead) {
  if (lead >= 0xC2 && lead <= 0xDF) return {0x80, 0xBF};
  if (lead == 0xE0) return {0xA0, 0xBF};
  if ((lead >= 0xE1 && lead <= 0xEC) || lead == 0xEE || lead == 0xEF) return {0x80, 0xBF};
  if (lead == 0xED) return {0x80, 0x9F};
  if (lead == 0xF0) return {0x90, 0xBF};
  if (lead >= 0xF1 && lead <= 0xF3) return {0x80, 0xBF};
  if (lead == 0xF4) return {0x80, 0x8F};
  return {0, 0};
}

}  // namespace

int utf8_well_formed_len(std::string_view s, size_t i, int* subpart) {
  const auto lead = static_cast<uint8_t>(s[i]);
  if (lead < 0x80) return 1;
  const SecondRange r = second_range(lead);
  *subpart = 1;
  if (r.hi == 0) return 0;
  const int need = lead < 0xE0 ? 2 : (lead < 0xF0 ? 3 : 4);
  for (int k = 1; k < need; ++k) {
    if (i + k >= s.size()) return 0;
    const auto b = static_cast<uint8_t>(s[i + k]);
    const bool ok = k == 1 ? (b >= r.lo && b <= r.hi) : (b >= 0x80 && b <= 0xBF);
    if (!ok) return 0;
    *subpart = k + 1;
  }
  return need;
}

bool is_valid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const uint8_t* const e = p + s.size();
  while (p < e) {
    // ASCII fast path, 8 bytes at a time.
    while (p + 8 <= e) {
      uint64_t w;
      __builtin_memcpy(&w, p, 8);
      if (w & 0x8080808080808080ull) break;
      p += 8;
    }
    if (p >= e) break;
    const uint8_t b0 = *p;
    if (b0 < 0x80) {
      ++p;
      continue;
    }
    // Common well-formed 2- and 3-byte forms inline; the rest via the table-driven check.
    if (b0 >= 0xC2 && b0 <= 0xDF && p + 1 < e && (p[1] & 0xC0) == 0x80) {
      p += 2;
      continue;
    }
    if (b0 >= 0xE1 && b0 <= 0xEC && p + 2 < e && (p[1] & 0xC0) == 0x80 && (p[2] & 0xC0) == 0x80) {
      p += 3;
      continue;
    }
    int subpart = 0;
    const size_t i = static_cast<size_t>(p - reinterpret_cast<const uint8_t*>(s.data()));
    const int len = utf8_well_formed_len(s, i, &subpart);
    if (len == 0) return false;
    p += len;
  }
  return true;
}

void append_utf8_lossy(std::string& out, std::string_view s) {
  size_t i = 0;
  size_t run = 0;  // start of the pending run of valid bytes
  while (i < s.size()) {
    if (static_cast<uint8_t>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    int subpart = 0;
    const int len = utf8_well_formed_len(s, i, &subpart);
    if (len > 0) {
      i += static_cast<size_t>(len);
      continue;
    }
    out.append(s.data() + run, i - run);
    append_utf8(out, kReplacementChar);
    i += static_cast<size_t>(subpart);
    run = i;
  }
  out.append(s.data() + run, s.size() - run);
}

size_t utf8_incomplete_suffix_len(std::string_view s) {
  const size_t n = s.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const auto b = static_cast<uint8_t>(s[n - back]);
    if (b >= 0x80 && b <= 0xBF) continue;  // continuation byte: keep looking for the lead
    if (b < 0xC2 || b > 0xF4) return 0;
    int subpart = 0;
    const int len = utf8_well_formed_len(s, n - back, &subpart);
    // A proper prefix: not complete, and every byte present so far is valid.
    if (len == 0 && static_cast<size_t>(subpart) == back) {
      const int need = b < 0xE0 ? 2 : (b < 0xF0 ? 3 : 4);
      if (static_cast<size_t>(need) > back) return back;
    }
    return 0;
  }
  return 0;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace di::recipe
