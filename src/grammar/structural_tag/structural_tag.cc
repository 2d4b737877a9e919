// SPDX-License-Identifier: Apache-2.0
#include "grammar/structural_tag/structural_tag.h"

#include <algorithm>
#include <stdexcept>

#include "grammar/aho_corasick.h"
#include "grammar/structural_tag/leaf_formats.h"
#include "grammar/structural_tag/tag_fields.h"
#include "grammar/structural_tag/token_formats.h"

namespace di::grammar {
namespace {

// The JSON field readers (fail, str, flag, strings, token_id, ...): tag_fields.h.
using namespace tag_fields;  // NOLINT(google-build-using-namespace)

// The end strings of the innermost enclosing tag, which an unlimited format consumes itself
// (xgrammar's "detected end strings"); empty: none, such a format runs to the end of the text.
using Ends = std::vector<std::string>;

// A format lowered. `unlimited`: free text or a repetition that only the enclosing tag's end
// can close (any_text, triggered_tags, tags_with_separator, a sequence ending in one, an or of
// them); its expression already reads that end.
struct Lowered {
  ExprId expr = -1;
  bool unlimited = false;
};

// A tag, before it is attached to a trigger. `ends` is empty when the content reads the end.
// A token begin/end (xgrammar's TokenFormat) is `begin_token` / `end_token` (else -1).
struct TagParts {
  std::string begin;
  Ends ends;
  ExprId content = -1;
  ExprId begin_token = -1, end_token = -1;
};

class Builder {
 public:
  Builder(const JsonSchemaOptions& opts, const TokenTrie* vocab) : opts_(opts), vocab_(vocab) {}

  Grammar build(const OJson& root) {
    if (!root.is_object()) fail("structural_tag", "must be a JSON object");
    if (auto t = root.find("type"); t != root.end() && *t != "structural_tag")
      fail("structural_tag.type", "must be \"structural_tag\"");
    const RuleId r = g_.add_rule("root");
    ExprId body;
    if (root.contains("format")) {
      body = format(root["format"], "format", {}).expr;
    } else if (root.contains("structures") || root.contains("triggers")) {
      body = legacy(root);
    } else {
      fail("structural_tag", "needs 'format' or 'structures' and 'triggers'");
    }
    g_.set_body(r, body);
    g_.set_root(r);
    return std::move(g_);
  }

 private:
  static Ends non_empty(const Ends& ends) {
    Ends out;
    for (const std::string& e : ends)
      if (!e.empty()) out.push_back(e);
    return out;
  }

  ExprId literals(const Ends& ends) {
    std::vector<ExprId> alts;
    for (const std::string& e : ends) alts.push_back(g_.literal(e));
    return alts.size() == 1 ? alts[0] : g_.alt(std::move(alts));
  }

  // `xml`: one of the XML parameter styles (json_schema/xml_parameters.cc); none: JSON.
  ExprId schema(const OJson& s, const std::string& path, std::optional<XmlStyle> xml = {}) {
    if (!s.is_object() && !s.is_boolean()) fail(path, "must be a JSON Schema (object)");
    auto sub = xml ? json_schema_to_xml_parameters_grammar(s, *xml, opts_)
                   : json_schema_to_grammar(s, opts_);
    if (!sub) fail(path, sub.status().message());
    return g_.ref(g_.import(*sub, "s" + std::to_string(imports_++) + "_"));
  }

  Lowered format(const OJson& f, const std::string& path, const Ends& ends) {
    if (!f.is_object()) fail(path, "must be an object");
    // Request input: bound the recursion (sequence/or/tag nest formats).
    if (++depth_ > kMaxDepth) fail(path, "formats nested deeper than 64");
    struct Leave {
      int& d;
      ~Leave() { --d; }
    } leave{depth_};
    const std::string& type = str(f, "type", path);
    if (type == "const_string") return {g_.literal(str(f, "value", path)), false};
    if (type == "json_schema" || type == "qwen_xml_parameter") {
      if (!f.contains("json_schema")) fail(path + ".json_schema", "is missing");
      const std::string style = type == "qwen_xml_parameter" ? "qwen_xml"
                                : f.contains("style")        ? str(f, "style", path)
                                                             : "json";
      return {schema(f["json_schema"], path + ".json_schema", xml_style(style, path)), false};
    }
    if (type == "any_text") {
      auto e = any_text_leaf(g_, ends, strings(f, "excludes", path), bound(f, "max_chars", path),
                             bound(f, "max_tokens", path), path);
      if (!e) throw TagError(e.status().message());
      return {*e, true};
    }
    if (type == "regex" || type == "grammar") {
      const std::string prefix = "x" + std::to_string(imports_++) + "_";
      auto e = type == "regex" ? regex_leaf(g_, str(f, "pattern", path), prefix)
                               : ebnf_leaf(g_, str(f, "grammar", path), vocab_, prefix);
      if (!e) fail(path + (type == "regex" ? ".pattern" : ".grammar"), e.status().message());
      if (type == "regex" && !strings(f, "excludes", path).empty())
        fail(path + ".excludes", "is not supported on a regex format");
      return {*e, false};
    }
    if (type == "token") return {g_.token(token_id(f, "token", path, vocab_)), false};
    if (type == "exclude_token" || type == "any_tokens") {
      const ExprId one = g_.token_except(token_list(f, "exclude_tokens", path, false, vocab_));
      if (type == "exclude_token") return {one, false};
      const int64_t n = bound(f, "max_tokens", path);
      if (n > kMaxUnrolled)
        fail(path + ".max_tokens", "above " + std::to_string(kMaxUnrolled) +
                                       " cannot be enforced (the grammar unrolls the count)");
      return {g_.repeat(one, 0, static_cast<int32_t>(n)), false};
    }
    if (type == "dispatch" || type == "token_dispatch") return dispatch_rules(f, path, ends);
    if (type == "token_triggered_tags") {
      const std::vector<int32_t> triggers = token_list(f, "trigger_tokens", path, true, vocab_);
      std::vector<ExprId> alts;
      std::vector<int32_t> begins;
      for (const TagParts& t : tags(f, path)) {
        begins.push_back(t.begin_token < 0 ? -1 : g_.expr(t.begin_token).token);
        alts.push_back(whole(t));
      }
      tag_fields::check_token_triggers(triggers, begins, path);
      return {token_triggered_expr(
                  g_, triggers, alts, token_list(f, "exclude_tokens", path, false, vocab_),
                  flag(f, "at_least_one", path), flag(f, "stop_after_first", path)),
              false};
    }
    if (type == "optional" || type == "plus" || type == "star" || type == "repeat") {
      auto c = f.find("content");
      if (c == f.end()) fail(path + ".content", "is missing");
      const Lowered l = format(*c, path + ".content", ends);
      if (l.unlimited) fail(path + ".content", "must not be unlimited in '" + type + "'");
      if (type == "optional") return {g_.opt(l.expr), false};
      if (type == "plus") return {g_.plus(l.expr), false};
      if (type == "star") return {g_.star(l.expr), false};
      auto lo = f.find("min"), hi = f.find("max");
      if (lo == f.end() || !lo->is_number_integer() || *lo < 0 || *lo > 10000)
        fail(path + ".min", "must be an integer in [0, 10000]");
      if (hi == f.end() || !hi->is_number_integer() || *hi < -1 || *hi > 10000 ||
          (*hi >= 0 && *hi < *lo))
        fail(path + ".max", "must be -1 (unbounded) or an integer in [min, 10000]");
      return {g_.repeat(l.expr, lo->get<int32_t>(), hi->get<int32_t>()), false};
    }
    if (type == "sequence" || type == "or") {
      const OJson& elems = array(f, "elements", path);
      std::vector<ExprId> items;
      size_t unlimited = 0;
      for (size_t i = 0; i < elems.size(); ++i) {
        const std::string p = path + ".elements[" + std::to_string(i) + "]";
        const Lowered l = format(elems[i], p, ends);
        if (l.unlimited && type == "sequence" && i + 1 < elems.size())
          fail(p,
               "an unlimited format (any_text, triggered_tags, tags_with_separator) must "
               "be the last element of a sequence");
        unlimited += l.unlimited;
        items.push_back(l.expr);
      }
      if (type == "sequence") return {g_.seq(std::move(items)), unlimited > 0};
      if (unlimited != 0 && unlimited != elems.size())
        fail(path,
             "mixes unlimited (any_text, triggered_tags, tags_with_separator) and "
             "limited elements");
      return {g_.alt(std::move(items)), unlimited > 0};
    }
    if (type == "tag") return {whole(tag(f, path)), false};
    if (type == "triggered_tags") {
      const std::vector<std::string> triggers = strings(f, "triggers", path, true);
      TagDispatchSpec spec;
      spec.loop = !flag(f, "stop_after_first", path);
      spec.at_least_one = flag(f, "at_least_one", path);
      spec.stops = ends;
      spec.stop_eos = ends.empty();
      spec.excludes = strings(f, "excludes", path);
      return {dispatch(triggers, tags(f, path), path, "tags", std::move(spec)), true};
    }
    if (type == "tags_with_separator") {
      std::vector<ExprId> alts;
      for (TagParts& t : tags(f, path)) alts.push_back(whole(t));
      const RuleId any = g_.add_rule("tags" + std::to_string(imports_++));
      g_.set_body(any, g_.alt(std::move(alts)));
      const std::string& sep = str(f, "separator", path);
      // One tag only when asked, or when the separator is the closing string (as xgrammar).
      const bool once = flag(f, "stop_after_first", path) ||
                        std::find(ends.begin(), ends.end(), sep) != ends.end();
      ExprId body = once ? g_.ref(any)
                         : g_.seq({g_.ref(any), g_.star(g_.seq({g_.literal(sep), g_.ref(any)}))});
      if (!flag(f, "at_least_one", path)) body = g_.opt(body);
      if (!ends.empty()) body = g_.seq({body, literals(ends)});
      return {body, true};
    }
    fail(path + ".type", "'" + type +
                             "' is not supported (const_string, json_schema, "
                             "qwen_xml_parameter, any_text, regex, grammar, token, "
                             "exclude_token, any_tokens, sequence, or, tag, triggered_tags, "
                             "tags_with_separator, dispatch, token_dispatch, "
                             "token_triggered_tags, optional, plus, star, repeat)");
  }

  // dispatch: [[pattern, format], ...] over free text (a TagDispatch; unlimited like
  // triggered_tags); token_dispatch: [[token, format], ...] over free tokens (token_formats.h).
  Lowered dispatch_rules(const OJson& f, const std::string& path, const Ends& ends) {
    const bool tokens = str(f, "type", path) == "token_dispatch";
    const OJson& rules = array(f, "rules", path);
    const bool loop = flag_or(f, "loop", path, true);
    TagDispatchSpec spec;
    std::vector<int32_t> ids;
    std::vector<ExprId> bodies;
    for (size_t i = 0; i < rules.size(); ++i) {
      const std::string p = path + ".rules[" + std::to_string(i) + "]";
      if (!rules[i].is_array() || rules[i].size() != 2)
        fail(p, tokens ? "must be a [token, format] pair" : "must be a [pattern, format] pair");
      const Lowered l = format(rules[i][1], p + "[1]", {});
      if (l.unlimited) fail(p + "[1]", "must not be unlimited (any_text, triggered_tags, ...)");
      if (tokens) {
        const int32_t id = token_id(rules[i], size_t{0}, p, vocab_);
        if (std::find(ids.begin(), ids.end(), id) != ids.end()) fail(p + "[0]", "is repeated");
        ids.push_back(id);
        bodies.push_back(l.expr);
        continue;
      }
      if (!rules[i][0].is_string() || rules[i][0].get<std::string>().empty())
        fail(p + "[0]", "must be a non-empty string");
      const std::string& pat = rules[i][0].get_ref<const std::string&>();
      if (std::find(spec.triggers.begin(), spec.triggers.end(), pat) != spec.triggers.end())
        fail(p + "[0]", "is repeated");
      const RuleId r = g_.add_rule("dispatch" + std::to_string(imports_++));
      g_.set_body(r, l.expr);
      spec.triggers.push_back(pat);
      spec.rules.push_back(r);
    }
    if (tokens)
      return {token_dispatch_expr(g_, ids, bodies,
                                  token_list(f, "exclude_tokens", path, false, vocab_), loop),
              false};
    spec.loop = loop;
    spec.stops = ends;
    spec.stop_eos = ends.empty();
    spec.excludes = strings(f, "excludes", path);
    return {g_.tag_dispatch(std::move(spec)), true};
  }

  std::vector<TagParts> tags(const OJson& f, const std::string& path) {
    std::vector<TagParts> out;
    const OJson& ts = array(f, "tags", path);
    for (size_t i = 0; i < ts.size(); ++i) {
      const std::string p = path + ".tags[" + std::to_string(i) + "]";
      if (!ts[i].is_object() || ts[i].value("type", std::string("tag")) != "tag")
        fail(p, "must be a tag ({\"type\": \"tag\", \"begin\", \"content\", \"end\"})");
      out.push_back(tag(ts[i], p));
    }
    return out;
  }

  static bool is_token_format(const OJson& x) {
    return x.is_object() && x.value("type", std::string()) == "token";
  }

  ExprId whole(const TagParts& t) {
    std::vector<ExprId> parts{t.begin_token >= 0 ? t.begin_token : g_.literal(t.begin), t.content};
    if (t.end_token >= 0) parts.push_back(t.end_token);
    if (!t.ends.empty()) parts.push_back(literals(t.ends));
    return g_.seq(std::move(parts));
  }

  TagParts tag(const OJson& f, const std::string& path) {
    TagParts t;
    if (f.contains("begin") && is_token_format(f["begin"]))
      t.begin_token = g_.token(token_id(f["begin"], "token", path + ".begin", vocab_));
    else
      t.begin = str(f, "begin", path);
    auto e = f.find("end");
    if (e != f.end() && is_token_format(*e)) {
      t.end_token = g_.token(token_id(*e, "token", path + ".end", vocab_));
    } else if (e != f.end() && e->is_array() && !e->empty()) {
      for (size_t i = 0; i < e->size(); ++i) {
        if (!(*e)[i].is_string())
          fail(path + ".end[" + std::to_string(i) + "]", "must be a string");
        t.ends.push_back((*e)[i].get<std::string>());
      }
    } else if (e != f.end() && e->is_string()) {
      t.ends.push_back(e->get<std::string>());
    } else {
      fail(path + ".end", "must be a string or a non-empty array of strings");
    }
    auto c = f.find("content");
    if (c == f.end()) fail(path + ".content", "is missing");
    const Ends closing = non_empty(t.ends);
    const Lowered l = format(*c, path + ".content", closing);
    t.content = l.expr;
    if (l.unlimited) {
      // The content reads the end itself (free text stops at its first occurrence).
      if (t.end_token >= 0)
        fail(path + ".end", "a token end after unlimited content is not supported");
      if (closing.empty())
        fail(path + ".end",
             "must be non-empty after unlimited content (any_text, "
             "triggered_tags, tags_with_separator)");
      t.ends.clear();
    }
    return t;
  }

  // Each tag goes to the trigger the automaton completes first while reading its begin; that
  // trigger must be a prefix of the begin (xgrammar: "begin starts with a trigger").
  ExprId dispatch(const std::vector<std::string>& triggers,
                  const std::vector<TagParts>& tags,
                  const std::string& path,
                  const char* tags_field,
                  TagDispatchSpec spec) {
    const AhoCorasick ac(triggers);
    std::vector<std::vector<ExprId>> alts(triggers.size());
    for (size_t i = 0; i < tags.size(); ++i) {
      if (tags[i].begin_token >= 0)
        fail(path + "." + tags_field + "[" + std::to_string(i) + "].begin",
             "must be a string (token triggers, token_triggered_tags, are not supported)");
      uint32_t n = 0;
      int32_t t = -1;
      size_t k = 0;
      while (k < tags[i].begin.size() && t < 0)
        t = ac.match(n = ac.next(n, static_cast<uint8_t>(tags[i].begin[k++])));
      if (t < 0 || k != triggers[t].size())
        fail(path + "." + tags_field + "[" + std::to_string(i) + "].begin",
             "'" + tags[i].begin + "' must start with one of the triggers");
      std::vector<ExprId> parts{g_.literal(std::string_view(tags[i].begin).substr(k)),
                                tags[i].content};
      if (tags[i].end_token >= 0) parts.push_back(tags[i].end_token);
      if (!tags[i].ends.empty()) parts.push_back(literals(tags[i].ends));
      alts[t].push_back(g_.seq(std::move(parts)));
    }
    for (size_t t = 0; t < triggers.size(); ++t) {
      if (alts[t].empty())
        fail(path + ".triggers[" + std::to_string(t) + "]",
             "'" + triggers[t] + "' starts no tag's begin");
      const RuleId r =
          g_.add_rule("trigger" + std::to_string(t) + "_" + std::to_string(imports_++));
      g_.set_body(r, g_.alt(std::move(alts[t])));
      spec.triggers.push_back(triggers[t]);
      spec.rules.push_back(r);
    }
    return g_.tag_dispatch(std::move(spec));
  }

  ExprId legacy(const OJson& root) {
    const std::vector<std::string> triggers = strings(root, "triggers", "structural_tag", true);
    std::vector<TagParts> tags;
    const OJson& st = array(root, "structures", "structural_tag");
    for (size_t i = 0; i < st.size(); ++i) {
      const std::string p = "structural_tag.structures[" + std::to_string(i) + "]";
      if (!st[i].is_object()) fail(p, "must be an object");
      TagParts t;
      t.begin = str(st[i], "begin", p);
      t.ends = {str(st[i], "end", p)};
      if (!st[i].contains("schema")) fail(p + ".schema", "is missing");
      t.content = schema(st[i]["schema"], p + ".schema");
      tags.push_back(std::move(t));
    }
    return dispatch(triggers, tags, "structural_tag", "structures", TagDispatchSpec{});
  }

  static constexpr int kMaxDepth = 64;
  JsonSchemaOptions opts_;
  const TokenTrie* vocab_ = nullptr;
  Grammar g_;
  int imports_ = 0, depth_ = 0;
};

}  // namespace

Expected<Grammar> structural_tag_to_grammar(std::string_view json_text,
                                            const JsonSchemaOptions& opts,
                                            const TokenTrie* vocab) {
  OJson root = OJson::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return invalid_argument("structural_tag: is not valid JSON");
  try {
    return Builder(opts, vocab).build(root);
  } catch (const TagError& e) {
    return invalid_argument(e.what());
  }
}

}  // namespace di::grammar
