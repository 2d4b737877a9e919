// SPDX-License-Identifier: Apache-2.0
#include "grammar/json_char.h"

#include <algorithm>
#include <cstdio>

namespace di::grammar {

ExprId json_string_char(Grammar& g, const CharClass& cls_in, bool allow_u_escapes) {
  CharClass cls = cls_in;
  cls.normalize();
  CharClass raw;
  for (const auto& range : cls.ranges()) {
    const uint32_t lo = range.first, hi = range.second;
    // Everything but controls, '"' and '\\' is written raw.
    auto add_clipped = [&](uint32_t a, uint32_t b) {
      a = std::max(a, lo);
      b = std::min(b, hi);
      if (a <= b) raw.add(a, b);
    };
    add_clipped(0x20, 0x21);
    add_clipped(0x23, 0x5B);
    add_clipped(0x5D, kMaxCodePoint);
  }
  std::vector<ExprId> alts;
  if (!raw.ranges().empty()) alts.push_back(utf8_class(g, raw));
  auto has = [&](uint32_t c) { return cls.contains(c); };
  if (has('"')) alts.push_back(g.literal("\\\""));
  if (has('\\')) alts.push_back(g.literal("\\\\"));
  if (has('/')) alts.push_back(g.literal("\\/"));
  bool all_controls = true;
  for (uint32_t c = 0; c < 0x20; ++c) all_controls &= has(c);
  if (all_controls) {
    // Compact form of the 32 control escapes: \b \f \n \r \t and \u0000-\u001f.
    ByteSet short_forms, hex;
    for (char c : std::string("bfnrt")) short_forms.set(static_cast<uint8_t>(c));
    hex.set_range('0', '9');
    hex.set_range('a', 'f');
    hex.set_range('A', 'F');
    alts.push_back(g.seq(
        {g.literal("\\"),
         g.alt({g.bytes(short_forms),
                g.seq({g.literal("u00"), g.bytes(ByteSet::range('0', '1')), g.bytes(hex)})})}));
  }
  for (uint32_t c = 0; c < 0x20 && !all_controls; ++c) {
    if (!has(c)) continue;
    const char* shortform = c == '\n'   ? "\\n"
                            : c == '\r' ? "\\r"
                            : c == '\t' ? "\\t"
                            : c == '\b' ? "\\b"
                            : c == '\f' ? "\\f"
                                        : nullptr;
    if (shortform) alts.push_back(g.literal(shortform));
    char buf[8];
    std::snprintf(buf, sizeof(buf), "\\u%04x", c);
    // Both hex cases: serializers differ.
    std::vector<ExprId> seq{g.literal("\\u00")};
    for (int i = 4; i < 6; ++i) {
      ByteSet b = ByteSet::single(static_cast<uint8_t>(buf[i]));
      if (buf[i] >= 'a') b.set(static_cast<uint8_t>(buf[i] - 32));
      seq.push_back(g.bytes(b));
    }
    alts.push_back(g.seq(std::move(seq)));
  }
  (void)allow_u_escapes;  // TODO(#7): \uXXXX for ordinary characters (needs per-range hex tries)
  return g.alt(std::move(alts));
}

}  // namespace di::grammar
