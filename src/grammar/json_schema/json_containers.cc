// SPDX-License-Identifier: Apache-2.0
// Objects and arrays for the JSON Schema front end. Objects: declared properties in any order up
// to a bound (any_order.cc), else in schema order (each optional one may be skipped), then
// additional properties whose keys differ from every declared one, so a duplicate key can never
// dodge its declared schema.
#include <algorithm>

#include "grammar/earley.h"
#include "grammar/json_char.h"
#include "grammar/json_schema/converter.h"
#include "grammar/nfa.h"
#include "grammar/regex/regex_parser.h"

namespace di::grammar {

namespace {

constexpr int64_t kMaxItems = 10000;
// min/maxProperties over optional members: one rule per (member, count), n * (n + 1) at most.
constexpr size_t kMaxCountedMembers = 64;

bool plain_ascii_key(const std::string& k) {
  for (unsigned char c : k)
    if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') return false;
  return true;
}

}  // namespace

// JSON string (with quotes) whose content differs from every key. Keys are plain ASCII (checked
// by the caller), so the trie can branch on single bytes.
ExprId SchemaConverter::key_not_in(const std::vector<std::string>& keys) {
  ExprId any_rest =
      g_.seq({g_.star(json_string_char(g_, CharClass().negated())), g_.literal("\"")});
  std::function<ExprId(const std::string&, std::vector<std::string>)> node =
      [&](const std::string& prefix, std::vector<std::string> group) -> ExprId {
    bool terminal = false;
    CharClass next;
    std::vector<ExprId> alts;
    for (size_t i = 0; i < group.size();) {
      if (group[i].size() == prefix.size()) {
        terminal = true;
        ++i;
        continue;
      }
      char c = group[i][prefix.size()];
      std::vector<std::string> sub;
      while (i < group.size() && group[i].size() > prefix.size() && group[i][prefix.size()] == c)
        sub.push_back(group[i++]);
      next.add(static_cast<uint8_t>(c), static_cast<uint8_t>(c));
      alts.push_back(g_.seq({g_.literal(std::string(1, c)), node(prefix + c, std::move(sub))}));
    }
    if (!terminal) alts.push_back(g_.literal("\""));
    alts.push_back(g_.seq({json_string_char(g_, next.negated()), any_rest}));
    return g_.alt(std::move(alts));
  };
  std::vector<std::string> sorted = keys;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  return g_.seq({g_.literal("\""), node("", sorted)});
}

// patternProperties: extra members are keys matching a pattern, with that pattern's schema. Only
// keys matching a pattern are generated (never additionalProperties ones: narrower, never wider).
// Sound when no declared name matches a pattern (it would need both schemas) and, with several
// patterns, all share one schema (a key matching two patterns needs both).
ExprId SchemaConverter::pattern_members(const json& pp,
                                        const std::vector<std::string>& names,
                                        const std::string& path,
                                        int depth) {
  const json* schema = nullptr;
  std::vector<ExprId> keys;
  for (auto& [pattern, sub] : pp.items()) {
    if (schema && *schema != sub) unsupported(path, "patternProperties with different schemas");
    schema = &sub;
    if (auto name = first_pattern_match(pattern, names, path))
      unsupported(path, "property '" + *name + "' also matching patternProperties");
    keys.push_back(g_.seq({g_.literal("\""), regex_expr(pattern, true, path), g_.literal("\"")}));
  }
  ExprId colon = g_.seq({ws(), g_.literal(":"), ws()});
  return as_rule(g_.seq(
      {g_.alt(std::move(keys)), colon, value(*schema, path + "/patternProperties", depth + 1)}));
}

ExprId SchemaConverter::object_expr(const json& s, const std::string& path, int depth) {
  std::vector<std::string> names;
  std::vector<ExprId> items;
  std::vector<bool> req;
  std::set<std::string> required;
  std::vector<std::string> required_order;  // undeclared required keys are written in this order
  if (s.contains("required") && s["required"].is_array())
    for (auto& r : s["required"])
      if (r.is_string() && required.insert(r.get<std::string>()).second)
        required_order.push_back(r.get<std::string>());
  ExprId colon = g_.seq({ws(), g_.literal(":"), ws()});
  if (s.contains("properties") && s["properties"].is_object()) {
    for (auto& [k, v] : s["properties"].items()) {
      names.push_back(k);
      ExprId val = as_rule(value(v, path + "/properties/" + k, depth + 1));
      items.push_back(g_.seq({g_.literal(json(k).dump()), colon, val}));
      req.push_back(required.count(k) > 0);
    }
  }
  // Required names without a properties entry take any value.
  for (const std::string& r : required_order) {
    if (std::find(names.begin(), names.end(), r) != names.end()) continue;
    json ap = s.contains("additionalProperties") ? s["additionalProperties"] : json(true);
    names.push_back(r);
    items.push_back(g_.seq(
        {g_.literal(json(r).dump()), colon, value(ap, path + "/additionalProperties", depth + 1)}));
    req.push_back(true);
  }
  // propertyNames: a declared name it rejects cannot appear (nothing, if required).
  const bool has_pn = s.contains("propertyNames") && s["propertyNames"] != json(true);
  const std::vector<std::string> declared = names;
  if (has_pn) {
    std::vector<bool> ok = names_match(s["propertyNames"], names, path + "/propertyNames");
    for (size_t i = names.size(); i-- > 0;) {
      if (ok[i]) continue;
      if (req[i]) return g_.nothing();
      names.erase(names.begin() + static_cast<std::ptrdiff_t>(i));
      items.erase(items.begin() + static_cast<std::ptrdiff_t>(i));
      req.erase(req.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
  // Additional properties.
  std::optional<ExprId> extra;
  json ap = s.contains("additionalProperties") ? s["additionalProperties"] : json(true);
  if (s.contains("patternProperties") && s["patternProperties"].is_object() &&
      !s["patternProperties"].empty()) {
    if (has_pn && !opts_.lenient)
      unsupported(path, "propertyNames together with patternProperties");
    extra = pattern_members(s["patternProperties"], declared, path, depth);
  } else if (!(ap.is_boolean() && ap == false)) {
    std::optional<ExprId> key;
    if (has_pn) key = property_name_key(s["propertyNames"], declared, path + "/propertyNames");
    if (!key && std::all_of(declared.begin(), declared.end(), plain_ascii_key))
      key = declared.empty() ? string_rule(json::object(), path) : key_not_in(declared);
    if (key)
      extra = as_rule(g_.seq({*key, colon, value(ap, path + "/additionalProperties", depth + 1)}));
  }
  size_t n = items.size();
  auto minp = s.contains("minProperties") && s["minProperties"].is_number()
                  ? s["minProperties"].get<double>()
                  : 0.0;
  auto maxp = s.contains("maxProperties") && s["maxProperties"].is_number()
                  ? s["maxProperties"].get<double>()
                  : -1.0;
  size_t nreq = static_cast<size_t>(std::count(req.begin(), req.end(), true));
  ExprId sep = g_.seq({ws(), g_.literal(","), ws()});
  if (minp > static_cast<double>(nreq) || (maxp >= 0 && (extra || maxp < static_cast<double>(n)))) {
    if (maxp >= 0 && maxp < static_cast<double>(nreq)) return g_.nothing();
    if (minp > static_cast<double>(n) && !extra) return g_.nothing();
    if (!extra && n <= kMaxCountedMembers) {
      const auto lo = static_cast<size_t>(std::max(0.0, std::ceil(minp)));
      const size_t hi = maxp < 0 ? n : std::min(n, static_cast<size_t>(std::floor(maxp)));
      if (auto e = any_order_members(items, req, std::nullopt, lo, hi, sep)) return braces(*e);
      return counted_members(items, req, lo, hi, sep);
    }
    if (!opts_.lenient) unsupported(path, "minProperties/maxProperties beyond the required set");
  } else if (auto e = any_order_members(items, req, extra, 0, n, sep)) {
    return braces(*e);
  }
  // rest[i]: members i.. after at least one was written; first[i]: none written yet.
  ExprId rest = extra ? g_.star(g_.seq({sep, *extra})) : g_.empty();
  ExprId first = extra ? g_.opt(g_.seq({*extra, g_.star(g_.seq({sep, *extra}))})) : g_.empty();
  for (size_t i = n; i-- > 0;) {
    ExprId with = g_.seq({items[i], rest});
    ExprId new_first = req[i] ? with : g_.alt({with, first});
    rest = req[i] ? g_.seq({sep, items[i], rest}) : g_.seq({g_.opt(g_.seq({sep, items[i]})), rest});
    first = new_first;
    // Rules keep the sharing of rest/first from turning into O(n^2) NFA states.
    if (i % 4 == 0) rest = as_rule(rest), first = as_rule(first);
  }
  // Rules keep the O(n) sharing of rest/first from turning into O(n^2) NFA states.
  return g_.seq({g_.literal("{"), ws(), first, ws(), g_.literal("}")});
}

// Declared members only (no additional ones), with lo..hi of them written: the members in order,
// each step knowing how many were written so far (c), so the count is exact. rest[c]: members
// i.. after c were written (a separator first); c = 0 is the first member's position.
ExprId SchemaConverter::counted_members(const std::vector<ExprId>& items,
                                        const std::vector<bool>& req,
                                        size_t lo,
                                        size_t hi,
                                        ExprId sep) {
  const size_t n = items.size();
  std::vector<ExprId> rest(hi + 1);
  for (size_t c = 0; c <= hi; ++c) rest[c] = c >= lo ? g_.empty() : g_.nothing();
  for (size_t i = n; i-- > 0;) {
    std::vector<ExprId> next(hi + 1);
    for (size_t c = 0; c <= hi; ++c) {
      ExprId lead = c == 0 ? items[i] : g_.seq({sep, items[i]});
      ExprId with = c + 1 <= hi ? g_.seq({lead, rest[c + 1]}) : g_.nothing();
      next[c] = as_rule(req[i] ? with : g_.alt({with, rest[c]}));
    }
    rest = std::move(next);
  }
  return g_.seq({g_.literal("{"), ws(), rest[0], ws(), g_.literal("}")});
}

ExprId SchemaConverter::array_expr(const json& s, const std::string& path, int depth) {
  std::vector<ExprId> tuple;
  json rest_schema = true;
  const char* tuple_key = s.contains("prefixItems") ? "prefixItems" : nullptr;
  if (!tuple_key && s.contains("items") && s["items"].is_array()) tuple_key = "items";
  if (tuple_key) {
    int i = 0;
    for (const json& t : s[tuple_key])
      tuple.push_back(
          as_rule(value(t, path + "/" + tuple_key + "/" + std::to_string(i++), depth + 1)));
    if (std::string(tuple_key) == "items") {
      if (s.contains("additionalItems")) rest_schema = s["additionalItems"];
    } else if (s.contains("items")) {
      rest_schema = s["items"];
    }
  } else if (s.contains("items")) {
    rest_schema = s["items"];
  }
  int64_t lo = s.contains("minItems") && s["minItems"].is_number()
                   ? static_cast<int64_t>(std::ceil(s["minItems"].get<double>()))
                   : 0;
  int64_t hi = s.contains("maxItems") && s["maxItems"].is_number()
                   ? static_cast<int64_t>(std::floor(s["maxItems"].get<double>()))
                   : -1;
  bool rest_allowed = !(rest_schema.is_boolean() && rest_schema == false);
  int64_t k = static_cast<int64_t>(tuple.size());
  if (!rest_allowed) hi = hi < 0 ? k : std::min(hi, k);
  if (lo > kMaxItems || hi > kMaxItems) unsupported(path, "minItems/maxItems above 10000");
  if (hi >= 0 && hi < lo) return g_.nothing();
  ExprId sep = g_.seq({ws(), g_.literal(","), ws()});
  if (s.contains("uniqueItems") && s["uniqueItems"] == true && (hi < 0 || hi > 1)) {
    if (auto u = unique_items_expr(s, rest_schema, tuple.empty(), lo, hi, sep, path)) return *u;
  }
  if (s.contains("contains")) {
    if (auto c = contains_expr(s, rest_schema, tuple.empty(), lo, hi, sep, path, depth)) return *c;
  }
  std::optional<ExprId> elem;
  if (rest_allowed) elem = as_rule(value(rest_schema, path + "/items", depth + 1));
  // tail(i): elements i.. given i already written.
  ExprId tail = g_.nothing();
  if (elem) {
    int32_t min_more = static_cast<int32_t>(std::max<int64_t>(lo - k, 0));
    int32_t max_more = hi < 0 ? -1 : static_cast<int32_t>(std::max<int64_t>(hi - k, 0));
    if (k == 0) {
      ExprId more = g_.repeat(g_.seq({sep, *elem}), std::max(min_more - 1, 0),
                              max_more < 0 ? -1 : std::max(max_more - 1, 0));
      ExprId some = max_more == 0 ? g_.nothing() : g_.seq({*elem, more});
      tail = min_more == 0 ? g_.alt({g_.empty(), some}) : some;
    } else {
      tail = g_.repeat(g_.seq({sep, *elem}), min_more, max_more);
    }
  } else if (lo <= k) {
    tail = g_.empty();
  }
  for (int64_t i = k; i-- > 0;) {
    ExprId step = g_.seq({i == 0 ? g_.empty() : sep, tuple[i], tail});
    bool may_stop = i >= lo;
    tail = may_stop ? g_.alt({g_.empty(), step}) : step;
  }
  return g_.seq({g_.literal("["), ws(), tail, ws(), g_.literal("]")});
}

}  // namespace di::grammar
