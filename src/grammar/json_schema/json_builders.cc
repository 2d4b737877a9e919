// SPDX-License-Identifier: Apache-2.0
// Builders for each JSON type of the JSON Schema front end. Frequently used pieces (whitespace,
// unconstrained strings, numbers, any value) are shared rules, so the token-mask cache entries
// for their states are computed once per grammar instead of once per use.
#include <algorithm>
#include <cmath>
#include <limits>

#include "grammar/json_char.h"
#include "grammar/json_schema/converter.h"
#include "grammar/json_schema/formats.h"
#include "grammar/json_schema/int_range.h"
#include "grammar/regex/regex_parser.h"

namespace di::grammar {

namespace {

constexpr int64_t kMaxRepeat = 10000;

std::optional<int64_t> get_count(const json& s, const char* key, const std::string& path) {
  if (!s.contains(key)) return std::nullopt;
  const json& v = s[key];
  if (!v.is_number() || v.get<double>() < 0)
    throw SchemaError(StatusCode::kInvalidArgument,
                      "JSON Schema at '" + path + "': '" + key + "' must be a non-negative number");
  double d = v.get<double>();
  if (d > kMaxRepeat) return kMaxRepeat + 1;
  return static_cast<int64_t>(std::ceil(d));
}

}  // namespace

ExprId SchemaConverter::shared_rule(const std::string& key, const std::function<ExprId()>& body) {
  auto it = named_.find(key);
  if (it != named_.end()) return g_.ref(it->second);
  RuleId r = g_.add_rule(key);
  named_[key] = r;
  g_.set_body(r, body());
  return g_.ref(r);
}

ExprId SchemaConverter::as_rule(ExprId e) {
  return g_.as_rule(e);
}

ExprId SchemaConverter::ws() {
  return shared_rule("ws", [&] {
    ByteSet w;
    for (char c : std::string(" \t\n\r")) w.set(static_cast<uint8_t>(c));
    return g_.repeat(g_.bytes(w), 0, opts_.max_whitespace);
  });
}

ExprId SchemaConverter::any_value() {
  return shared_rule("value", [&] {
    ExprId string = string_rule(json::object(), "#");
    ExprId number = number_expr(json::object(), false, "#");
    ExprId member = g_.seq({string, ws(), g_.literal(":"), ws(), g_.ref(named_["value"])});
    ExprId sep = g_.seq({ws(), g_.literal(","), ws()});
    ExprId object =
        g_.seq({g_.literal("{"), ws(), g_.opt(g_.seq({member, g_.star(g_.seq({sep, member}))})),
                ws(), g_.literal("}")});
    ExprId elem = g_.ref(named_["value"]);
    ExprId array =
        g_.seq({g_.literal("["), ws(), g_.opt(g_.seq({elem, g_.star(g_.seq({sep, elem}))})), ws(),
                g_.literal("]")});
    return g_.alt({object, array, string, number, g_.literal("true"), g_.literal("false"),
                   g_.literal("null")});
  });
}

ExprId SchemaConverter::regex_expr(const std::string& pattern,
                                   bool search,
                                   const std::string& path) {
  RegexOptions o;
  o.json_string = true;
  o.search = search;
  auto e = regex_to_expr(g_, pattern, o);
  if (!e) {
    if (e.status().code() == StatusCode::kUnimplemented)
      unsupported(path, "pattern '" + pattern + "': " + e.status().message());
    throw SchemaError(StatusCode::kInvalidArgument,
                      "JSON Schema at '" + path + "': bad pattern: " + e.status().message());
  }
  return *e;
}

ExprId SchemaConverter::string_rule(const json& s, const std::string& path) {
  auto min_len = get_count(s, "minLength", path);
  auto max_len = get_count(s, "maxLength", path);
  std::string pattern =
      s.contains("pattern") && s["pattern"].is_string() ? s["pattern"].get<std::string>() : "";
  std::string format =
      s.contains("format") && s["format"].is_string() ? s["format"].get<std::string>() : "";
  std::string fmt_re = format.empty() ? "" : format_regex(format);
  if (!format.empty() && fmt_re.empty() && !opts_.lenient)
    unsupported(path, "format '" + format + "'");
  int constraints = (min_len || max_len) + !pattern.empty() + !fmt_re.empty();
  if (constraints > 1 && !opts_.lenient) {
    // Intersections of regular languages are not built yet.
    unsupported(path, "combination of pattern/format/length constraints on one string");
  }
  std::string key = "string";
  if (min_len || max_len)
    key +=
        "_len" + std::to_string(min_len.value_or(0)) + "_" + std::to_string(max_len.value_or(-1));
  else if (!pattern.empty())
    key += "_re:" + pattern;
  else if (!fmt_re.empty())
    key += "_fmt:" + format;
  return shared_rule(key, [&]() -> ExprId {
    ExprId q = g_.literal("\"");
    if (min_len || max_len) {
      int64_t lo = min_len.value_or(0), hi = max_len ? *max_len : -1;
      if (lo > kMaxRepeat || hi > kMaxRepeat) unsupported(path, "string length bound above 10000");
      if (hi >= 0 && hi < lo) return g_.nothing();
      ExprId ch = shared_rule("char", [&] { return json_string_char(g_, CharClass().negated()); });
      return g_.seq({q, g_.repeat(ch, static_cast<int32_t>(lo), static_cast<int32_t>(hi)), q});
    }
    if (!pattern.empty()) return g_.seq({q, regex_expr(pattern, true, path), q});
    if (!fmt_re.empty()) return g_.seq({q, regex_expr(fmt_re, false, path), q});
    return g_.seq({q, g_.star(json_string_char(g_, CharClass().negated())), q});
  });
}

ExprId SchemaConverter::number_expr(const json& s, bool integer, const std::string& path) {
  auto num = [&](const char* k) -> std::optional<double> {
    if (s.contains(k) && s[k].is_number()) return s[k].get<double>();
    return std::nullopt;
  };
  std::optional<double> lo = num("minimum"), hi = num("maximum");
  bool lo_ex = false, hi_ex = false;
  if (s.contains("exclusiveMinimum")) {
    if (s["exclusiveMinimum"].is_boolean())
      lo_ex = s["exclusiveMinimum"].get<bool>();
    else if (auto v = num("exclusiveMinimum"); v && (!lo || *v >= *lo))
      lo = v, lo_ex = true;
  }
  if (s.contains("exclusiveMaximum")) {
    if (s["exclusiveMaximum"].is_boolean())
      hi_ex = s["exclusiveMaximum"].get<bool>();
    else if (auto v = num("exclusiveMaximum"); v && (!hi || *v <= *hi))
      hi = v, hi_ex = true;
  }
  if (s.contains("multipleOf")) {
    auto m = num("multipleOf");
    bool trivial = m && integer && *m == 1;
    if (!trivial && !opts_.lenient) unsupported(path, "keyword 'multipleOf'");
  }
  const char* kInt = "-?(0|[1-9]\\d*)";
  if (!lo && !hi) {
    if (integer) return shared_rule("integer", [&] { return *regex_to_expr(g_, kInt, {}); });
    return shared_rule("number", [&] {
      return *regex_to_expr(g_, "-?(0|[1-9]\\d*)(\\.\\d+)?([eE][+-]?\\d+)?", {});
    });
  }
  constexpr double kLimit = 1e15;
  auto bad = [&](std::optional<double> v) { return v && (std::fabs(*v) > kLimit); };
  if (bad(lo) || bad(hi)) unsupported(path, "numeric bound beyond 1e15");
  if (integer) {
    std::optional<int64_t> ilo, ihi;
    if (lo) ilo = static_cast<int64_t>(lo_ex ? std::floor(*lo) + 1 : std::ceil(*lo));
    if (hi) ihi = static_cast<int64_t>(hi_ex ? std::ceil(*hi) - 1 : std::floor(*hi));
    std::string re = int_range_regex(ilo, ihi);
    if (re.empty()) return g_.nothing();
    return *regex_to_expr(g_, re, {});
  }
  // Non-integers: only non-negative integral bounds, by the integer part, without exponents.
  auto integral = [](std::optional<double> v) { return !v || (*v >= 0 && std::floor(*v) == *v); };
  if (!integral(lo) || !integral(hi))
    unsupported(path, "non-integral or negative bound on a number");
  const std::string frac = "(\\.\\d+)?";
  std::vector<std::string> alts;
  int64_t a = lo ? static_cast<int64_t>(*lo) : 0;
  if (!lo) {  // negatives are all below any non-negative upper bound
    alts.push_back("-(0|[1-9]\\d*)" + frac);
  }
  // Integer part strictly inside (a, hi) takes any fraction.
  std::optional<int64_t> inner_hi;
  if (hi) inner_hi = static_cast<int64_t>(*hi) - 1;
  int64_t inner_lo = lo ? a + 1 : 0;
  if (!lo) inner_lo = 0;
  std::string inner = int_range_regex(inner_lo, inner_hi);
  if (!inner.empty()) alts.push_back("(" + inner + ")" + frac);
  if (lo) {  // integer part == a: any fraction if inclusive, non-zero fraction if exclusive
    if (!hi || a < static_cast<int64_t>(*hi))
      alts.push_back(std::to_string(a) + (lo_ex ? "\\.\\d*[1-9]\\d*" : frac));
  }
  if (hi) {  // integer part == hi: zero fraction only, and only if inclusive
    int64_t b = static_cast<int64_t>(*hi);
    if (!hi_ex && (!lo || b > a || (b == a && !lo_ex)))
      alts.push_back(std::to_string(b) + "(\\.0+)?");
  }
  if (alts.empty()) return g_.nothing();
  std::string re;
  for (size_t i = 0; i < alts.size(); ++i) re += (i ? "|" : "") + ("(" + alts[i] + ")");
  return *regex_to_expr(g_, re, {});
}

ExprId SchemaConverter::literal_value(const json& v) {
  if (v.is_object()) {
    // Any key order (JSON equality ignores it), each key once; schema order past the bound.
    std::vector<ExprId> members;
    for (auto& [k, x] : v.items())
      members.push_back(
          g_.seq({g_.literal(json(k).dump()), ws(), g_.literal(":"), ws(), literal_value(x)}));
    if (auto e = any_order_members(members, std::vector<bool>(members.size(), true), std::nullopt,
                                   members.size(), members.size(),
                                   g_.seq({ws(), g_.literal(","), ws()})))
      return braces(*e);
    std::vector<ExprId> items{g_.literal("{"), ws()};
    for (size_t i = 0; i < members.size(); ++i) {
      if (i) items.insert(items.end(), {ws(), g_.literal(","), ws()});
      items.push_back(members[i]);
    }
    items.insert(items.end(), {ws(), g_.literal("}")});
    return g_.seq(std::move(items));
  }
  if (v.is_array()) {
    std::vector<ExprId> items{g_.literal("["), ws()};
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) items.insert(items.end(), {ws(), g_.literal(","), ws()});
      items.push_back(literal_value(v[i]));
    }
    items.insert(items.end(), {ws(), g_.literal("]")});
    return g_.seq(std::move(items));
  }
  return g_.literal(v.dump());
}

}  // namespace di::grammar
