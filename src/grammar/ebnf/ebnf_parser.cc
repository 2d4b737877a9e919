// SPDX-License-Identifier: Apache-2.0
// Recursive descent; errors are thrown inside (with position) and turned into a Status at the
// parse_ebnf boundary.
#include "grammar/ebnf/ebnf_parser.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "grammar/ebnf/tag_dispatch_args.h"
#include "grammar/ebnf/token_ref.h"
#include "grammar/regex/regex_parser.h"
#include "grammar/utf8.h"

namespace di::grammar {

namespace {

struct ParseError : std::runtime_error {
  ParseError(StatusCode c, const std::string& m) : std::runtime_error(m), code(c) {}
  StatusCode code;
};

constexpr int kMaxDepth = 200;

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.';
}

class EbnfParser {
 public:
  EbnfParser(std::string_view s, const TokenTrie* vocab) : s_(s), vocab_(vocab) {}

  Grammar parse(std::string_view root) {
    skip_space();
    while (pos_ < s_.size()) {
      std::string name = parse_name();
      skip_space();
      if (peek() == '[') skip_options();
      skip_space();
      if (s_.substr(pos_, 3) != "::=") fail("expected '::='");
      pos_ += 3;
      RuleId r = rule_id(name);
      if (g_.rules()[r].body >= 0 || defined_.count(name))
        fail("rule '" + name + "' defined twice");
      defined_.insert(name);
      ExprId body = parse_alt(0);
      skip_space();
      if (s_.substr(pos_, 2) == "(=") {  // trailing lookahead: ignored
        pos_ += 2;
        parse_group_tail(0);
        skip_space();
      }
      g_.set_body(r, body);
    }
    RuleId root_id = g_.find_rule(root);
    if (root_id < 0)
      throw ParseError(StatusCode::kInvalidArgument, "no rule named '" + std::string(root) + "'");
    for (const Rule& r : g_.rules())
      if (r.body < 0)
        throw ParseError(StatusCode::kInvalidArgument,
                         "rule '" + r.name + "' is referenced but not defined");
    g_.set_root(root_id);
    return std::move(g_);
  }

 private:
  [[noreturn]] void fail(const std::string& msg, StatusCode code = StatusCode::kInvalidArgument) {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < pos_ && i < s_.size(); ++i) {
      if (s_[i] == '\n')
        line++, col = 1;
      else
        col++;
    }
    throw ParseError(code, "EBNF " + std::to_string(line) + ":" + std::to_string(col) + ": " + msg);
  }
  char peek(size_t k = 0) const { return pos_ + k < s_.size() ? s_[pos_ + k] : '\0'; }

  void skip_space() {
    while (pos_ < s_.size()) {
      char c = s_[pos_];
      if (c == '#') {
        while (pos_ < s_.size() && s_[pos_] != '\n') ++pos_;
      } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else {
        break;
      }
    }
  }

  std::string parse_name() {
    size_t b = pos_;
    while (pos_ < s_.size() && is_name_char(s_[pos_])) ++pos_;
    if (b == pos_) fail("expected a rule name");
    if (s_[b] >= '0' && s_[b] <= '9') fail("rule name starts with a digit");
    return std::string(s_.substr(b, pos_ - b));
  }

  void skip_options() {
    while (pos_ < s_.size() && s_[pos_] != ']') {
      if (s_[pos_] == '"')
        parse_string_raw();
      else
        ++pos_;
    }
    if (pos_ >= s_.size()) fail("unterminated rule options");
    ++pos_;
  }

  RuleId rule_id(const std::string& name) {
    RuleId r = g_.find_rule(name);
    return r >= 0 ? r : g_.add_rule(name);
  }

  // True when the text at pos_ starts a new rule definition: name [options] ::=
  bool at_rule_start() {
    size_t save = pos_;
    bool ok = false;
    if (is_name_char(peek())) {
      while (is_name_char(peek())) ++pos_;
      while (peek() == ' ' || peek() == '\t') ++pos_;
      if (peek() == '[') {
        while (pos_ < s_.size() && s_[pos_] != ']' && s_[pos_] != '\n') ++pos_;
        if (peek() == ']') ++pos_;
        while (peek() == ' ' || peek() == '\t') ++pos_;
      }
      ok = s_.substr(pos_, 3) == "::=";
    }
    pos_ = save;
    return ok;
  }

  ExprId parse_alt(int depth) {
    if (depth > kMaxDepth) fail("nesting too deep");
    std::vector<ExprId> alts{parse_seq(depth)};
    skip_space();
    while (peek() == '|') {
      ++pos_;
      alts.push_back(parse_seq(depth));
      skip_space();
    }
    return g_.alt(std::move(alts));
  }

  ExprId parse_seq(int depth) {
    std::vector<ExprId> items;
    for (;;) {
      skip_space();
      char c = peek();
      if (c == '\0' || c == '|' || c == ')') break;
      if (c == '(' && peek(1) == '=') break;
      if (is_name_char(c) && at_rule_start()) break;
      items.push_back(parse_postfix(depth));
    }
    return g_.seq(std::move(items));
  }

  ExprId parse_postfix(int depth) {
    ExprId e = parse_primary(depth);
    char c = peek();
    if (c == '*') return ++pos_, check_stack(g_.star(e));
    if (c == '+') return ++pos_, check_stack(g_.plus(e));
    if (c == '?') return ++pos_, check_stack(g_.opt(e));
    if (c == '{') {
      ++pos_;
      skip_space();
      int lo = peek() == ',' ? 0 : parse_int();
      int hi = lo;
      skip_space();
      if (peek() == ',') {
        ++pos_;
        skip_space();
        hi = peek() == '}' ? -1 : parse_int();
        if (hi == -2) hi = -1;
      }
      skip_space();
      if (peek() != '}') fail("expected '}'");
      ++pos_;
      if (hi >= 0 && hi < lo) fail("repetition upper bound below lower bound");
      return check_stack(g_.repeat(e, lo, hi));
    }
    return e;
  }

  ExprId check_stack(ExprId e) {
    char c = peek();
    if (c == '*' || c == '+' || c == '?' || c == '{') fail("stacked repetition operators");
    return e;
  }

  int parse_int() {
    bool neg = peek() == '-';
    if (neg) ++pos_;
    if (!(peek() >= '0' && peek() <= '9')) fail("expected a number");
    long v = 0;
    while (peek() >= '0' && peek() <= '9') {
      v = v * 10 + (s_[pos_++] - '0');
      if (v > 100000) fail("repetition count too large");
    }
    if (neg) return v == 1 ? -2 : (fail("bad repetition bound"), 0);
    return static_cast<int>(v);
  }

  ExprId parse_primary(int depth) {
    char c = peek();
    if (c == '"') return g_.literal(parse_string_raw());
    if (c == '[') return parse_class();
    if (c == '.') return ++pos_, utf8_class(g_, CharClass().negated());
    if (c == '(') {
      ++pos_;
      return parse_group_tail(depth + 1);
    }
    if (c == '<' || c == '!') return parse_token_ref();
    if (is_name_char(c)) {
      std::string name = parse_name();
      // Only xgrammar's macro names start a call: `num ("," num)*` is a rule and then a group.
      if (peek() == '(' &&
          (name == "Regex" || name == "TagDispatch" || name == "Token" || name == "ExcludeToken"))
        return parse_macro(name);
      return g_.ref(rule_id(name));
    }
    fail(std::string("unexpected character '") + c + "'");
  }

  // `<[id]>`, `<text>` (up to the first '>'), or either after `!`.
  ExprId parse_token_ref() {
    const bool negated = peek() == '!';
    if (negated && peek(1) != '<') fail("expected '<' after '!'");
    pos_ += negated;
    const size_t end = s_.find('>', pos_);
    if (end == std::string_view::npos || s_.substr(pos_, end - pos_).find('\n') != s_.npos)
      fail("unterminated token reference");
    auto id = resolve_token_ref(s_.substr(pos_, end + 1 - pos_), vocab_);
    if (!id) fail(id.status().message());
    pos_ = end + 1;
    return g_.token(*id, negated);
  }

  void skip_inline_space() {
    while (peek() == ' ' || peek() == '\t') ++pos_;
  }

  ExprId parse_group_tail(int depth) {
    ExprId e = parse_alt(depth);
    skip_space();
    if (peek() != ')') fail("expected ')'");
    ++pos_;
    return e;
  }

  ExprId parse_macro(const std::string& name) {
    if (name == "TagDispatch") {
      ++pos_;
      EbnfCursor c{s_,
                   pos_,
                   [&] { skip_space(); },
                   [&] { return parse_string_raw(); },
                   [&] { return parse_name(); },
                   [&](const std::string& m, StatusCode k) { fail(m, k); }};
      TagDispatchArgs a = read_tag_dispatch_args(c);
      TagDispatchSpec spec{a.triggers, {}, a.loop, false, a.stops, a.excludes, a.stop_eos};
      for (const std::string& r : a.rules) spec.rules.push_back(rule_id(r));
      return g_.tag_dispatch(std::move(spec));
    }
    if (name == "Token" || name == "ExcludeToken") return parse_token_set(name);
    if (name != "Regex") fail("macro '" + name + "' is not supported", StatusCode::kUnimplemented);
    ++pos_;
    skip_space();
    std::string pattern = parse_string_raw();
    skip_space();
    while (peek() == ',') {  // named options (json_string=, flags=) are not supported
      fail("Regex options are not supported", StatusCode::kUnimplemented);
    }
    if (peek() != ')') fail("expected ')' after Regex pattern");
    ++pos_;
    auto e = regex_to_expr(g_, pattern, RegexOptions{});
    if (!e) throw ParseError(e.status().code(), "in Regex(...): " + e.status().message());
    return *e;
  }

  // xgrammar's `Token(id, ...)` (one token among the ids) and `ExcludeToken(id, ...)` (one text
  // token outside them, as `!<[id]>` for a set): at least one non-negative id, a trailing comma
  // allowed. Each id resolves as `<[id]>` does (a vocabulary is needed, ids inside it).
  ExprId parse_token_set(const std::string& name) {
    ++pos_;  // '('
    std::vector<int32_t> ids;
    while (true) {
      skip_space();
      if (peek() == ')' && !ids.empty()) break;
      if (peek() < '0' || peek() > '9')
        fail(name + "() arguments must be non-negative integer token ids");
      const size_t start = pos_;
      while (peek() >= '0' && peek() <= '9' && pos_ - start < 11) ++pos_;
      auto id =
          resolve_token_ref("<[" + std::string(s_.substr(start, pos_ - start)) + "]>", vocab_);
      if (!id) fail("in " + name + "(...): " + id.status().message());
      ids.push_back(*id);
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() != ')') fail("expected ',' or ')' in " + name + "(...)");
      break;
    }
    ++pos_;  // ')'
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    if (name == "ExcludeToken") return g_.token_except(std::move(ids));
    std::vector<ExprId> alts;
    for (int32_t id : ids) alts.push_back(g_.token(id));
    return alts.size() == 1 ? alts[0] : g_.alt(std::move(alts));
  }

  uint32_t parse_hex(int max_digits) {
    uint32_t v = 0;
    int n = 0;
    while (n < max_digits && std::isxdigit(static_cast<unsigned char>(peek()))) {
      char c = s_[pos_++];
      v = v * 16 + static_cast<uint32_t>(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
      if (v > kMaxCodePoint) fail("escape out of range");
      ++n;
    }
    if (n == 0) fail("expected hex digits");
    return v;
  }

  // One (possibly escaped) code point; raw UTF-8 is decoded.
  uint32_t parse_char(bool in_class) {
    if (peek() == '\n' || peek() == '\r') fail("newline in literal");
    if (peek() != '\\') {
      uint32_t cp;
      if (!decode_utf8(s_, pos_, cp)) fail("invalid UTF-8");
      return cp;
    }
    ++pos_;
    char c = peek();
    ++pos_;
    switch (c) {
      case 'n':
        return '\n';
      case 'r':
        return '\r';
      case 't':
        return '\t';
      case 'b':
        return '\b';
      case 'f':
        return '\f';
      case 'a':
        return '\a';
      case 'v':
        return '\v';
      case '0':
        return 0;
      case 'e':
        return 0x1b;
      case 'x':
        return parse_hex(8);
      case 'u':
        return parse_hex(4);
      case 'U':
        return parse_hex(8);
      case '"':
      case '\\':
      case '/':
      case '\'':
      case '?':
        return static_cast<uint8_t>(c);
      default:
        break;
    }
    if (in_class && std::string_view("^$.*+?()[]{}|-").find(c) != std::string_view::npos && c)
      return static_cast<uint8_t>(c);
    --pos_;
    fail(std::string("unknown escape '\\") + c + "'");
  }

  std::string parse_string_raw() {
    if (peek() != '"') fail("expected a string literal");
    ++pos_;
    std::string out;
    while (peek() != '"') {
      if (pos_ >= s_.size()) fail("unterminated string");
      append_utf8(parse_char(false), out);
    }
    ++pos_;
    return out;
  }

  ExprId parse_class() {
    ++pos_;
    bool neg = peek() == '^';
    if (neg) ++pos_;
    CharClass cls;
    while (peek() != ']') {
      if (pos_ >= s_.size()) fail("unterminated character class");
      uint32_t lo = parse_char(true), hi = lo;
      if (peek() == '-' && peek(1) != ']') {
        ++pos_;
        hi = parse_char(true);
        if (hi < lo) fail("reversed range in character class");
      }
      cls.add(lo, hi);
    }
    ++pos_;
    return utf8_class(g_, neg ? cls.negated() : cls);
  }

  std::string_view s_;
  const TokenTrie* vocab_;
  size_t pos_ = 0;
  Grammar g_;
  std::set<std::string> defined_;
};

}  // namespace

Expected<Grammar> parse_ebnf(std::string_view text, std::string_view root, const TokenTrie* vocab) {
  try {
    return EbnfParser(text, vocab).parse(root);
  } catch (const ParseError& e) {
    return Status(e.code, e.what());
  }
}

}  // namespace di::grammar
