// SPDX-License-Identifier: Apache-2.0
// Shared by the XML json_schema styles (xml_values.h).
#include "grammar/json_schema/xml_values.h"

#include <algorithm>

#include "grammar/json_schema/formats.h"
#include "grammar/nfa.h"
#include "grammar/regex/regex_parser.h"

namespace di::grammar {

bool schema_note(const std::string& k) {
  static const char* kNotes[] = {"title",       "description", "default",  "examples",
                                 "$comment",    "$schema",     "$id",      "$defs",
                                 "definitions", "deprecated",  "readOnly", "writeOnly"};
  return std::find(std::begin(kNotes), std::end(kNotes), k) != std::end(kNotes);
}

std::optional<ExprId> raw_constrained_string(Grammar& g, const json& s) {
  if (!s.is_object() || s.value("type", json()) != "string") return std::nullopt;
  std::string re;
  bool search = false;
  int64_t lo = -1, hi = -1;
  for (const auto& [k, v] : s.items()) {
    if (schema_note(k) || k == "type") continue;
    if (k == "pattern" && v.is_string() && re.empty() && lo < 0 && hi < 0) {
      re = v.get<std::string>();
      search = true;
    } else if (k == "format" && v.is_string() && re.empty() && lo < 0 && hi < 0) {
      re = format_regex(v.get<std::string>());
      if (re.empty()) return std::nullopt;
    } else if ((k == "minLength" || k == "maxLength") && re.empty() && v.is_number_integer() &&
               v.get<int64_t>() >= 0 && v.get<int64_t>() <= 10000) {
      (k == "minLength" ? lo : hi) = v.get<int64_t>();
    } else {
      return std::nullopt;
    }
  }
  if (lo >= 0 || hi >= 0) {
    if (hi >= 0 && hi < std::max<int64_t>(lo, 0)) return std::nullopt;
    CharClass lt;
    lt.add('<', '<');
    return g.repeat(utf8_class(g, lt.negated()), static_cast<int32_t>(std::max<int64_t>(lo, 0)),
                    static_cast<int32_t>(hi));
  }
  if (re.empty()) return std::nullopt;
  RegexOptions o;
  o.search = search;
  auto sub = regex_to_grammar(re, o);
  if (!sub) return std::nullopt;
  auto nfa = NfaGrammar::build(*sub);
  if (!nfa) return std::nullopt;
  for (const ByteEdge& e : (*nfa)->byte_edges())
    if (e.set.test('<')) return std::nullopt;
  return g.ref(g.import(*sub, "xml_re" + std::to_string(g.rules().size()) + "_"));
}

std::optional<ExprId> bounded_raw_text(Grammar& g,
                                       const json& s,
                                       const std::vector<std::string>& closes) {
  if (!s.is_object() || s.value("type", json()) != "string") return std::nullopt;
  int64_t hi = -1;
  for (const auto& [k, v] : s.items()) {
    if (schema_note(k) || k == "type") continue;
    if (k == "minLength" && v.is_number_integer() && v.get<int64_t>() == 0) continue;
    if (k != "maxLength" || !v.is_number_integer() || v.get<int64_t>() < 0 ||
        v.get<int64_t>() > 10000)
      return std::nullopt;
    hi = v.get<int64_t>();
  }
  if (hi < 0) return std::nullopt;
  TagDispatchSpec spec;
  spec.loop = false;
  spec.stops = closes;
  spec.stop_eos = false;
  spec.max_chars = hi;
  return g.tag_dispatch(std::move(spec));
}

std::optional<std::vector<uint32_t>> code_points(const std::string& s) {
  std::vector<uint32_t> out;
  for (size_t pos = 0; pos < s.size();) {
    uint32_t cp = 0;
    if (!decode_utf8(s, pos, cp)) return std::nullopt;
    out.push_back(cp);
  }
  return out;
}

ExprId name_not_in(Grammar& g,
                   std::vector<std::vector<uint32_t>> names,
                   const NameSpelling& spelling) {
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  // group: the names (sorted) sharing the first `depth` code points.
  std::function<ExprId(size_t, size_t, size_t)> node = [&](size_t begin, size_t end,
                                                           size_t depth) -> ExprId {
    std::vector<ExprId> alts;
    bool declared_here = false;
    CharClass children;
    for (size_t i = begin; i < end;) {
      if (names[i].size() == depth) {
        declared_here = true;
        ++i;
        continue;
      }
      const uint32_t cp = names[i][depth];
      size_t j = i;
      while (j < end && names[j].size() > depth && names[j][depth] == cp) ++j;
      children.add(cp, cp);
      alts.push_back(g.seq({g.literal(spelling.spell(cp)), node(i, j, depth + 1)}));
      i = j;
    }
    // A proper prefix of declared names is itself a free name (never the empty one).
    if (depth > 0 && !declared_here) alts.push_back(g.empty());
    alts.push_back(g.seq({spelling.other(children, depth == 0), spelling.tail}));
    return g.alt(std::move(alts));
  };
  return node(0, names.size(), 0);
}

}  // namespace di::grammar
