// SPDX-License-Identifier: Apache-2.0
// Recursive descent over the pattern's code points. Errors are thrown inside and returned as
// Status at the two entry points.
#include "grammar/regex/regex_parser.h"

#include <stdexcept>
#include <string>

#include "grammar/json_char.h"
#include "grammar/utf8.h"

namespace di::grammar {

namespace {

struct RegexError : std::runtime_error {
  RegexError(StatusCode c, const std::string& m) : std::runtime_error(m), code(c) {}
  StatusCode code;
};

constexpr int kMaxDepth = 200;
constexpr int kMaxCount = 10000;

CharClass digit_class() {
  CharClass c;
  c.add('0', '9');
  return c;
}
CharClass word_class() {
  CharClass c;
  c.add('0', '9');
  c.add('A', 'Z');
  c.add('a', 'z');
  c.add('_', '_');
  return c;
}
CharClass space_class() {
  CharClass c;
  c.add('\t', '\r');
  c.add(' ', ' ');
  c.add(0xA0, 0xA0);
  c.add(0x1680, 0x1680);
  c.add(0x2000, 0x200A);
  c.add(0x2028, 0x2029);
  c.add(0x202F, 0x202F);
  c.add(0x205F, 0x205F);
  c.add(0x3000, 0x3000);
  c.add(0xFEFF, 0xFEFF);
  return c;
}
CharClass dot_class() {
  CharClass c;
  c.add('\n', '\n');
  c.add('\r', '\r');
  c.add(0x2028, 0x2029);
  return c.negated();
}

class RegexParser {
 public:
  RegexParser(Grammar& g, std::string_view p, const RegexOptions& o) : g_(g), opts_(o) {
    size_t pos = 0;
    while (pos < p.size()) {
      uint32_t cp;
      if (!decode_utf8(p, pos, cp))
        throw RegexError(StatusCode::kInvalidArgument, "regex: invalid UTF-8");
      cps_.push_back(cp);
    }
  }

  ExprId parse_top() {
    std::vector<ExprId> alts;
    for (;;) {
      bool start_anchor = eat('^');
      ExprId body = parse_seq(0, /*top=*/true);
      bool end_anchor = eat('$');
      if (opts_.search) {
        std::vector<ExprId> s;
        if (!start_anchor) s.push_back(g_.star(any_char()));
        s.push_back(body);
        if (!end_anchor) s.push_back(g_.star(any_char()));
        body = g_.seq(std::move(s));
      }
      alts.push_back(body);
      if (eat('|')) continue;
      if (pos_ < cps_.size()) fail("unexpected ')'");
      break;
    }
    return g_.alt(std::move(alts));
  }

 private:
  [[noreturn]] void fail(const std::string& m, StatusCode c = StatusCode::kInvalidArgument) {
    throw RegexError(c, "regex at " + std::to_string(pos_) + ": " + m);
  }
  bool more() const { return pos_ < cps_.size(); }
  uint32_t peek(size_t k = 0) const {
    return pos_ + k < cps_.size() ? cps_[pos_ + k] : 0xFFFFFFFFu;
  }
  bool eat(uint32_t c) {
    if (peek() == c) return ++pos_, true;
    return false;
  }

  ExprId any_char() { return char_expr(CharClass().negated()); }
  ExprId char_expr(const CharClass& c) {
    return opts_.json_string ? json_string_char(g_, c) : utf8_class(g_, c);
  }

  ExprId parse_alt(int depth) {
    if (depth > kMaxDepth) fail("nesting too deep");
    std::vector<ExprId> alts{parse_seq(depth, false)};
    while (eat('|')) alts.push_back(parse_seq(depth, false));
    return g_.alt(std::move(alts));
  }

  ExprId parse_seq(int depth, bool top) {
    std::vector<ExprId> items;
    while (more() && peek() != '|' && peek() != ')') {
      if (peek() == '$') {
        if (top && pos_ + 1 == cps_.size()) break;
        if (top && peek(1) == '|') break;
        fail("'$' only supported at the end of the pattern", StatusCode::kUnimplemented);
      }
      if (peek() == '^')
        fail("'^' only supported at the start of the pattern", StatusCode::kUnimplemented);
      items.push_back(parse_quantified(depth));
    }
    return g_.seq(std::move(items));
  }

  int parse_int() {
    if (!(peek() >= '0' && peek() <= '9')) fail("expected a number");
    long v = 0;
    while (peek() >= '0' && peek() <= '9') {
      v = v * 10 + (cps_[pos_++] - '0');
      if (v > kMaxCount) fail("repetition count too large", StatusCode::kUnimplemented);
    }
    return static_cast<int>(v);
  }

  ExprId parse_quantified(int depth) {
    ExprId e = parse_atom(depth);
    for (;;) {
      int lo, hi;
      uint32_t c = peek();
      if (c == '*')
        lo = 0, hi = -1, ++pos_;
      else if (c == '+')
        lo = 1, hi = -1, ++pos_;
      else if (c == '?')
        lo = 0, hi = 1, ++pos_;
      else if (c == '{' && peek(1) >= '0' && peek(1) <= '9') {
        ++pos_;
        lo = parse_int();
        hi = lo;
        if (eat(',')) hi = peek() == '}' ? -1 : parse_int();
        if (!eat('}')) fail("expected '}'");
        if (hi >= 0 && hi < lo) fail("bad repetition range");
      } else {
        return e;
      }
      eat('?');  // lazy quantifiers match the same language
      e = g_.repeat(e, lo, hi);
    }
  }

  ExprId parse_atom(int depth) {
    uint32_t c = peek();
    if (c == '(') {
      ++pos_;
      if (eat('?')) {
        if (eat(':')) {
        } else if (peek() == '<' && peek(1) != '=' && peek(1) != '!') {
          while (more() && peek() != '>') ++pos_;
          if (!eat('>')) fail("bad group name");
        } else if (peek() == 'P' && peek(1) == '<') {
          while (more() && peek() != '>') ++pos_;
          if (!eat('>')) fail("bad group name");
        } else {
          fail("lookaround and group flags are not supported", StatusCode::kUnimplemented);
        }
      }
      ExprId e = parse_alt(depth + 1);
      if (!eat(')')) fail("missing ')'");
      return e;
    }
    if (c == '[') return char_expr(parse_class());
    if (c == '.') return ++pos_, char_expr(dot_class());
    if (c == '\\') {
      CharClass cls;
      if (parse_escape(cls, false)) return char_expr(cls);
    }
    if (c == '*' || c == '+' || c == '?') fail("nothing to repeat");
    if (c == ')') fail("unmatched ')'");
    ++pos_;
    CharClass one;
    one.add(c, c);
    return char_expr(one);
  }

  uint32_t parse_hex(int n, bool exact) {
    uint32_t v = 0;
    int k = 0;
    while (k < n) {
      uint32_t c = peek();
      int d = c >= '0' && c <= '9'   ? int(c - '0')
              : c >= 'a' && c <= 'f' ? int(c - 'a' + 10)
              : c >= 'A' && c <= 'F' ? int(c - 'A' + 10)
                                     : -1;
      if (d < 0) break;
      v = v * 16 + static_cast<uint32_t>(d);
      ++pos_, ++k;
    }
    if (k == 0 || (exact && k != n) || v > kMaxCodePoint) fail("bad hex escape");
    return v;
  }

  // Parses an escape at '\\'. Fills `cls` and returns true.
  bool parse_escape(CharClass& cls, bool in_class) {
    ++pos_;
    if (!more()) fail("trailing backslash");
    uint32_t c = cps_[pos_++];
    switch (c) {
      case 'd':
        cls.add(digit_class());
        return true;
      case 'D':
        cls.add(digit_class().negated());
        return true;
      case 'w':
        cls.add(word_class());
        return true;
      case 'W':
        cls.add(word_class().negated());
        return true;
      case 's':
        cls.add(space_class());
        return true;
      case 'S':
        cls.add(space_class().negated());
        return true;
      case 'n':
        cls.add('\n', '\n');
        return true;
      case 'r':
        cls.add('\r', '\r');
        return true;
      case 't':
        cls.add('\t', '\t');
        return true;
      case 'f':
        cls.add('\f', '\f');
        return true;
      case 'v':
        cls.add('\v', '\v');
        return true;
      case '0':
        cls.add(0, 0);
        return true;
      case 'x': {
        uint32_t v = parse_hex(2, true);
        cls.add(v, v);
        return true;
      }
      case 'u': {
        uint32_t v;
        if (eat('{')) {
          v = parse_hex(6, false);
          if (!eat('}')) fail("bad \\u{...} escape");
        } else {
          v = parse_hex(4, true);
        }
        if (v >= 0xD800 && v <= 0xDFFF)
          fail("surrogate escapes are not supported", StatusCode::kUnimplemented);
        cls.add(v, v);
        return true;
      }
      case 'b':
        if (in_class) {
          cls.add('\b', '\b');
          return true;
        }
        [[fallthrough]];
      case 'B':
      case 'p':
      case 'P':
      case 'k':
        fail(std::string("\\") + static_cast<char>(c) + " is not supported",
             StatusCode::kUnimplemented);
      default:
        break;
    }
    if (c >= '1' && c <= '9') fail("backreferences are not supported", StatusCode::kUnimplemented);
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) fail("unknown escape");
    cls.add(c, c);
    return true;
  }

  CharClass parse_class() {
    ++pos_;
    bool neg = eat('^');
    CharClass cls;
    bool first = true;
    while (!(peek() == ']' && !first)) {
      if (!more()) fail("unterminated class");
      if (peek() == ']' && first) {  // JS: "[]" is an empty class
        break;
      }
      first = false;
      CharClass item;
      uint32_t lo;
      bool single = true;
      if (peek() == '\\') {
        parse_escape(item, true);
        single = item.ranges().size() == 1 && item.ranges()[0].first == item.ranges()[0].second;
        lo = single ? item.ranges()[0].first : 0;
      } else {
        lo = cps_[pos_++];
        item.add(lo, lo);
      }
      if (single && peek() == '-' && peek(1) != ']' && peek(1) != 0xFFFFFFFFu) {
        ++pos_;
        uint32_t hi;
        if (peek() == '\\') {
          CharClass h;
          parse_escape(h, true);
          if (h.ranges().size() != 1 || h.ranges()[0].first != h.ranges()[0].second)
            fail("bad class range");
          hi = h.ranges()[0].first;
        } else {
          hi = cps_[pos_++];
        }
        if (hi < lo) fail("reversed class range");
        item = CharClass();
        item.add(lo, hi);
      }
      cls.add(item);
    }
    ++pos_;
    return neg ? cls.negated() : cls;
  }

  Grammar& g_;
  RegexOptions opts_;
  std::vector<uint32_t> cps_;
  size_t pos_ = 0;
};

}  // namespace

Expected<ExprId> regex_to_expr(Grammar& g, std::string_view pattern, const RegexOptions& opts) {
  try {
    return RegexParser(g, pattern, opts).parse_top();
  } catch (const RegexError& e) {
    return Status(e.code, e.what());
  }
}

Expected<Grammar> regex_to_grammar(std::string_view pattern, const RegexOptions& opts) {
  Grammar g;
  RuleId root = g.add_rule("root");
  auto e = regex_to_expr(g, pattern, opts);
  if (!e) return e.status();
  g.set_body(root, *e);
  g.set_root(root);
  return g;
}

}  // namespace di::grammar
