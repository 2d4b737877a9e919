#include "api/tool_call_grammar.h"

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "grammar/any_order.h"
#include "grammar/utf8.h"

namespace di::api {
namespace {

using grammar::ExprId;
using grammar::Grammar;
using OJson = nlohmann::ordered_json;

constexpr std::string_view kDsml =
    "\xEF\xBD\x9C"
    "DSML"
    "\xEF\xBD\x9C";  // ｜DSML｜

// What ResponseParser accepts inside name="...": no quote, newline or angle bracket.
bool plain_name(const std::string& s) {
  return !s.empty() && s.size() <= 256 && s.find_first_of("\"\n<>") == std::string::npos;
}

// Keywords that only annotate: they do not change which values a schema accepts.
bool annotation(const std::string& k) {
  static const std::set<std::string> kNotes = {"description", "title",    "examples",
                                               "default",     "$comment", "deprecated",
                                               "readOnly",    "writeOnly"};
  return kNotes.count(k) > 0;
}

class Builder {
 public:
  explicit Builder(const grammar::JsonSchemaOptions& opts) : opts_(opts) {}

  Expected<Grammar> build(const OJson& spec) {
    const OJson& tools = spec.at("tools");
    const std::string only = spec.contains("name") && spec["name"].is_string()
                                 ? spec["name"].get<std::string>()
                                 : std::string();
    std::vector<ExprId> invokes;
    for (const OJson& t : tools) {
      const std::string name = t.at("name").get<std::string>();
      if (!only.empty() && name != only) continue;
      auto strict = invoke(name, t.contains("parameters") ? t["parameters"] : OJson::object());
      // tool_choice auto never checked arguments: a schema DSML cannot carry must not turn
      // parallel_tool_calls false into a 400, so that call takes any parameters.
      if (!strict && spec.value("optional", false) && plain_name(name)) strict = loose_invoke(name);
      DI_ASSIGN_OR_RETURN(ExprId inv, std::move(strict));
      invokes.push_back(inv);
    }
    if (invokes.empty()) return invalid_argument("no tool to call");
    const grammar::RuleId call = g_.add_rule("invoke");
    g_.set_body(call, g_.alt(std::move(invokes)));
    // Named or parallel_tool_calls false: exactly one call; required: one or more.
    const bool single = !only.empty() || spec.value("single", false);
    ExprId calls = g_.ref(call);
    if (!single) calls = g_.seq({calls, g_.star(g_.seq({g_.literal("\n"), g_.ref(call)}))});
    const grammar::RuleId root = g_.add_rule("root");
    // After "<｜DSML｜": where ResponseParser starts a tool-call block.
    const ExprId rest =
        g_.seq({g_.literal(" calls>\n"), calls, g_.literal("\n"), close(" calls>")});
    if (spec.value("optional", false)) {
      // tool_choice auto, parallel_tool_calls false: free text in which the parser's block
      // marker starts the one block, which ends the reply.
      const grammar::RuleId block = g_.add_rule("block");
      g_.set_body(block, rest);
      grammar::TagDispatchSpec td;
      td.triggers = {std::string("<") + std::string(kDsml)};
      td.rules = {block};
      td.loop = false;
      g_.set_body(root, g_.tag_dispatch(std::move(td)));
    } else {
      g_.set_body(root, g_.seq({open(""), rest}));
    }
    g_.set_root(root);
    return std::move(g_);
  }

 private:
  // "<" or "</", the marker, the tag. (Appends, not a `+` chain: GCC 12 reports a false
  // -Wrestrict on those, bug 105329.)
  ExprId marker(std::string_view lead, std::string_view tag) {
    std::string s(lead);
    s += kDsml;
    s += tag;
    return g_.literal(s);
  }
  ExprId open(std::string_view tag) { return marker("<", tag); }
  ExprId close(std::string_view tag) { return marker("</", tag); }

  Expected<ExprId> invoke(const std::string& name, const OJson& params) {
    const std::string at = "tools: function '" + name + "'";
    if (!plain_name(name))
      return invalid_argument(at + ": the name cannot be written in a DSML invoke tag");
    if (!params.is_object()) return invalid_argument(at + ": parameters must be a JSON Schema");
    for (const auto& [k, v] : params.items()) {
      const bool ok = annotation(k) || k == "properties" || k == "required" ||
                      k == "additionalProperties" || k == "$defs" || k == "definitions" ||
                      k == "$schema" || k == "$id" || k == "strict" ||
                      (k == "type" && v == "object");
      if (!ok)
        return invalid_argument(at + ": parameters keyword '" + k +
                                "' cannot be enforced on DSML parameters (an object schema "
                                "with properties and required is)");
    }
    std::set<std::string> required;
    if (auto r = params.find("required"); r != params.end()) {
      if (!r->is_array()) return invalid_argument(at + ": parameters.required must be an array");
      for (const OJson& k : *r)
        if (k.is_string()) required.insert(k.get<std::string>());
    }
    std::vector<ExprId> lines;
    std::vector<bool> req;
    if (auto props = params.find("properties"); props != params.end()) {
      if (!props->is_object())
        return invalid_argument(at + ": parameters.properties must be an object");
      for (const auto& [key, sub] : props->items()) {
        DI_ASSIGN_OR_RETURN(ExprId p, parameter(at, key, sub, params));
        lines.push_back(g_.seq({p, g_.literal("\n")}));
        req.push_back(required.erase(key) > 0);
      }
    }
    if (!required.empty())
      return invalid_argument(at + ": required parameter '" + *required.begin() +
                              "' is not among the properties");
    return g_.seq({open(" invoke name=\""), g_.literal(name), g_.literal("\">\n"),
                   parameters(lines, req), close(" invoke>")});
  }

  // The parameter lines of a call in any order, each at most once and the required ones present
  // (grammar/any_order.h, as JSON objects' members), up to opts_.any_order_max_properties
  // parameters while the budget all the tools share lasts; past that in schema order. (The model
  // writes its arguments in the order it chooses; the response parser reads them in any order.)
  ExprId parameters(const std::vector<ExprId>& lines, const std::vector<bool>& req) {
    if (auto e =
            grammar::any_order_sequence(g_, lines, req, std::nullopt, 0, lines.size(), g_.empty(),
                                        opts_.any_order_max_properties, any_order_budget_))
      return *e;
    std::vector<ExprId> items;
    for (size_t i = 0; i < lines.size(); ++i) items.push_back(req[i] ? lines[i] : g_.opt(lines[i]));
    return g_.seq(std::move(items));
  }

  // A call of `name` with any parameters: names ResponseParser accepts, either form, raw
  // values without U+FF5C (so they cannot close the tag early).
  ExprId loose_invoke(const std::string& name) {
    grammar::CharClass not_bar, name_char;
    not_bar.add(0xFF5C, 0xFF5C);
    name_char.add('"', '"');
    name_char.add('\n', '\n');
    name_char.add('<', '<');
    name_char.add('>', '>');
    name_char.add(0xFF5C, 0xFF5C);
    const ExprId line =
        g_.seq({open(" parameter name=\""), g_.plus(grammar::utf8_class(g_, name_char.negated())),
                g_.literal("\" string=\""), g_.alt({g_.literal("true"), g_.literal("false")}),
                g_.literal("\">"), g_.star(grammar::utf8_class(g_, not_bar.negated())),
                close(" parameter>"), g_.literal("\n")});
    return g_.seq({open(" invoke name=\""), g_.literal(name), g_.literal("\">\n"), g_.star(line),
                   close(" invoke>")});
  }

  Expected<ExprId> parameter(const std::string& at,
                             const std::string& key,
                             const OJson& sub,
                             const OJson& params) {
    if (!plain_name(key))
      return invalid_argument(at + ": parameter name '" + key +
                              "' cannot be written in a DSML parameter tag");
    // The property's schema on its own, with the definitions its $refs may point to.
    OJson schema = sub;
    if (schema.is_object())
      for (const char* defs : {"$defs", "definitions"})
        if (params.contains(defs) && !schema.contains(defs)) schema[defs] = params[defs];
    auto value = grammar::json_schema_to_grammar(schema, opts_);
    if (!value)
      return invalid_argument(at + ": parameter '" + key + "': " + value.status().message());
    std::string prefix = "p";
    prefix += std::to_string(imports_++);
    prefix += '_';
    const ExprId json = g_.ref(g_.import(*value, prefix));
    std::vector<ExprId> forms{g_.seq({g_.literal("false\">"), json})};
    // string="true": raw text, as the V4.1 prompt asks for string parameters (also a string
    // enum's values, as the structural tags' deepseek_xml writes them), never with U+FF5C.
    if (grammar::plain_string_schema(sub)) {
      grammar::CharClass not_bar;
      not_bar.add(0xFF5C, 0xFF5C);
      forms.push_back(
          g_.seq({g_.literal("true\">"), g_.star(grammar::utf8_class(g_, not_bar.negated()))}));
    } else if (auto vals = grammar::string_enum_values(sub)) {
      std::vector<ExprId> raw;
      for (const std::string& v : *vals)
        if (v.find(kDsml.substr(0, 3)) == std::string::npos) raw.push_back(g_.literal(v));
      if (!raw.empty()) forms.push_back(g_.seq({g_.literal("true\">"), g_.alt(std::move(raw))}));
    }
    return g_.seq({open(" parameter name=\""), g_.literal(key), g_.literal("\" string=\""),
                   g_.alt(std::move(forms)), close(" parameter>")});
  }

  grammar::JsonSchemaOptions opts_;
  Grammar g_;
  int imports_ = 0;
  grammar::AnyOrderBudget any_order_budget_;  // subset rules over all the tools
};

}  // namespace

Expected<Grammar> tool_call_grammar(const OJson& spec, const grammar::JsonSchemaOptions& opts) {
  if (!spec.is_object() || !spec.contains("tools") || !spec["tools"].is_array())
    return invalid_argument("tool-call spec must hold a 'tools' array");
  try {
    return Builder(opts).build(spec);
  } catch (const nlohmann::json::exception& e) {  // a spec not written by tool_choice.cc
    return invalid_argument(std::string("malformed tool-call spec: ") + e.what());
  }
}

}  // namespace di::api
