// SPDX-License-Identifier: Apache-2.0
#include "grammar/structural_tag/structural_tag.h"

#include <stdexcept>

#include "grammar/aho_corasick.h"

namespace di::grammar {
namespace {

using OJson = nlohmann::ordered_json;

struct TagError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw TagError(path + ": " + what);
}

// A tag of a triggered_tags format, before it is attached to its trigger.
struct TagParts {
  std::string begin, end;
  ExprId content = -1;
};

class Builder {
 public:
  explicit Builder(const JsonSchemaOptions& opts) : opts_(opts) {}

  Grammar build(const OJson& root) {
    if (!root.is_object()) fail("structural_tag", "must be a JSON object");
    if (auto t = root.find("type"); t != root.end() && *t != "structural_tag")
      fail("structural_tag.type", "must be \"structural_tag\"");
    const RuleId r = g_.add_rule("root");
    ExprId body;
    if (root.contains("format")) {
      body = format(root["format"], "format", /*top=*/true);
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
  static const std::string& str(const OJson& obj, const char* key, const std::string& path) {
    auto it = obj.find(key);
    if (it == obj.end() || !it->is_string()) fail(path + "." + key, "must be a string");
    return it->get_ref<const std::string&>();
  }
  static bool flag(const OJson& obj, const char* key, const std::string& path) {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return false;
    if (!it->is_boolean()) fail(path + "." + key, "must be a boolean");
    return it->get<bool>();
  }
  static const OJson& array(const OJson& obj, const char* key, const std::string& path) {
    auto it = obj.find(key);
    if (it == obj.end() || !it->is_array() || it->empty())
      fail(path + "." + key, "must be a non-empty array");
    return *it;
  }

  ExprId schema(const OJson& s, const std::string& path) {
    if (!s.is_object() && !s.is_boolean()) fail(path, "must be a JSON Schema (object)");
    auto sub = json_schema_to_grammar(s, opts_);
    if (!sub) fail(path, sub.status().message());
    return g_.ref(g_.import(*sub, "s" + std::to_string(imports_++) + "_"));
  }

  ExprId format(const OJson& f, const std::string& path, bool top) {
    if (!f.is_object()) fail(path, "must be an object");
    // Request input: bound the recursion (sequence/or/tag nest formats).
    if (++depth_ > kMaxDepth) fail(path, "formats nested deeper than 64");
    struct Leave {
      int& d;
      ~Leave() { --d; }
    } leave{depth_};
    const std::string& type = str(f, "type", path);
    if (type == "const_string") return g_.literal(str(f, "value", path));
    if (type == "json_schema") {
      if (!f.contains("json_schema")) fail(path + ".json_schema", "is missing");
      return schema(f["json_schema"], path + ".json_schema");
    }
    if (type == "sequence" || type == "or") {
      const OJson& elems = array(f, "elements", path);
      std::vector<ExprId> items;
      for (size_t i = 0; i < elems.size(); ++i)
        items.push_back(format(elems[i], path + ".elements[" + std::to_string(i) + "]", false));
      return type == "sequence" ? g_.seq(std::move(items)) : g_.alt(std::move(items));
    }
    if (type == "tag") {
      TagParts t = tag(f, path);
      return g_.seq({g_.literal(t.begin), t.content, g_.literal(t.end)});
    }
    if (type == "triggered_tags") {
      if (!top) fail(path, "triggered_tags is supported only as the root format");
      if (auto ex = f.find("excludes"); ex != f.end() && !(ex->is_array() && ex->empty()))
        fail(path + ".excludes", "is not supported");
      std::vector<std::string> triggers;
      const OJson& tr = array(f, "triggers", path);
      for (size_t i = 0; i < tr.size(); ++i) {
        if (!tr[i].is_string() || tr[i].get<std::string>().empty())
          fail(path + ".triggers[" + std::to_string(i) + "]", "must be a non-empty string");
        triggers.push_back(tr[i].get<std::string>());
      }
      std::vector<TagParts> tags;
      const OJson& ts = array(f, "tags", path);
      for (size_t i = 0; i < ts.size(); ++i) {
        const std::string p = path + ".tags[" + std::to_string(i) + "]";
        if (!ts[i].is_object() || ts[i].value("type", std::string("tag")) != "tag")
          fail(p, "must be a tag ({\"type\": \"tag\", \"begin\", \"content\", \"end\"})");
        tags.push_back(tag(ts[i], p));
      }
      return dispatch(triggers, tags, path, "tags", flag(f, "at_least_one", path),
                      flag(f, "stop_after_first", path));
    }
    fail(path + ".type", "'" + type +
                             "' is not supported (const_string, json_schema, sequence, or, tag, "
                             "triggered_tags; any_text as a tag's content)");
  }

  TagParts tag(const OJson& f, const std::string& path) {
    TagParts t;
    t.begin = str(f, "begin", path);
    t.end = str(f, "end", path);
    auto c = f.find("content");
    if (c == f.end()) fail(path + ".content", "is missing");
    if (c->is_object() && c->value("type", std::string()) == "any_text") {
      // Free text up to the first occurrence of `end`, which closes the tag.
      if (t.end.empty()) fail(path + ".end", "must be non-empty after any_text content");
      const RuleId none = g_.add_rule("t" + std::to_string(imports_++) + "_end");
      g_.set_body(none, g_.empty());
      t.content = g_.tag_dispatch(TagDispatchSpec{{t.end}, {none}, false, true});
      t.end.clear();
      return t;
    }
    t.content = format(*c, path + ".content", false);
    return t;
  }

  // Each tag goes to the trigger the automaton completes first while reading its begin; that
  // trigger must be a prefix of the begin (xgrammar: "begin starts with a trigger").
  ExprId dispatch(const std::vector<std::string>& triggers,
                  const std::vector<TagParts>& tags,
                  const std::string& path,
                  const char* tags_field,
                  bool at_least_one,
                  bool stop_after_first) {
    const AhoCorasick ac(triggers);
    std::vector<std::vector<ExprId>> alts(triggers.size());
    for (size_t i = 0; i < tags.size(); ++i) {
      uint32_t n = 0;
      int32_t t = -1;
      size_t k = 0;
      while (k < tags[i].begin.size() && t < 0)
        t = ac.match(n = ac.next(n, static_cast<uint8_t>(tags[i].begin[k++])));
      if (t < 0 || k != triggers[t].size())
        fail(path + "." + tags_field + "[" + std::to_string(i) + "].begin",
             "'" + tags[i].begin + "' must start with one of the triggers");
      alts[t].push_back(g_.seq({g_.literal(std::string_view(tags[i].begin).substr(k)),
                                tags[i].content, g_.literal(tags[i].end)}));
    }
    TagDispatchSpec spec;
    spec.loop = !stop_after_first;
    spec.at_least_one = at_least_one;
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
    std::vector<std::string> triggers;
    const OJson& tr = array(root, "triggers", "structural_tag");
    for (size_t i = 0; i < tr.size(); ++i) {
      if (!tr[i].is_string() || tr[i].get<std::string>().empty())
        fail("structural_tag.triggers[" + std::to_string(i) + "]", "must be a non-empty string");
      triggers.push_back(tr[i].get<std::string>());
    }
    std::vector<TagParts> tags;
    const OJson& st = array(root, "structures", "structural_tag");
    for (size_t i = 0; i < st.size(); ++i) {
      const std::string p = "structural_tag.structures[" + std::to_string(i) + "]";
      if (!st[i].is_object()) fail(p, "must be an object");
      TagParts t;
      t.begin = str(st[i], "begin", p);
      t.end = str(st[i], "end", p);
      if (!st[i].contains("schema")) fail(p + ".schema", "is missing");
      t.content = schema(st[i]["schema"], p + ".schema");
      tags.push_back(std::move(t));
    }
    return dispatch(triggers, tags, "structural_tag", "structures", false, false);
  }

  static constexpr int kMaxDepth = 64;
  JsonSchemaOptions opts_;
  Grammar g_;
  int imports_ = 0, depth_ = 0;
};

}  // namespace

Expected<Grammar> structural_tag_to_grammar(std::string_view json_text,
                                            const JsonSchemaOptions& opts) {
  OJson root = OJson::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return invalid_argument("structural_tag: is not valid JSON");
  try {
    return Builder(opts).build(root);
  } catch (const TagError& e) {
    return invalid_argument(e.what());
  }
}

}  // namespace di::grammar
