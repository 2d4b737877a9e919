// SPDX-License-Identifier: Apache-2.0
// Internal to the JSON Schema front end: the converter class, split over schema_converter.cc
// (keywords, $ref, combinators), json_merge.cc (allOf), json_dependencies.cc, json_builders.cc
// (objects, arrays, strings, numbers), json_containers.cc and json_keywords.cc (applicators).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "grammar/any_order.h"
#include "grammar/json_schema/schema_converter.h"

namespace di::grammar {

class NfaGrammar;  // grammar/nfa.h

struct SchemaError : std::runtime_error {
  SchemaError(StatusCode c, const std::string& m) : std::runtime_error(m), code(c) {}
  StatusCode code;
};

using json = nlohmann::ordered_json;

// Shared by the converter's files (schema_converter.cc).
const std::set<std::string>& known_keywords();
std::vector<std::string> types_of(const json& s);  // the "type" list; all six when absent
std::string json_type_of(const json& v);           // "integer" for integral numbers
bool type_allows(const std::vector<std::string>& types, const std::string& t);

class SchemaConverter {
 public:
  SchemaConverter(const json& root, const JsonSchemaOptions& opts) : root_(root), opts_(opts) {}
  Grammar convert();
  Grammar any_value_grammar();

  // --- schema_converter.cc
  ExprId value(const json& schema, const std::string& path, int depth);
  [[noreturn]] void unsupported(const std::string& path, const std::string& what);
  void check_keywords(const json& s, const std::string& path);
  json resolve_ref(const std::string& ref, const std::string& path);

  // --- json_merge.cc
  json merge_all_of(const json& s, const std::string& path, int depth);
  bool one_of_disjoint(const json& branches, int depth);
  bool objects_disjoint(const json& a, const json& b);

  // --- json_dependencies.cc
  json rewrite_dependencies(const json& s, const std::string& path, int depth);

  // --- json_builders.cc
  ExprId ws();
  ExprId as_rule(ExprId e);
  ExprId any_value();
  ExprId string_rule(const json& s, const std::string& path);
  ExprId number_expr(const json& s, bool integer, const std::string& path);
  ExprId object_expr(const json& s, const std::string& path, int depth);
  ExprId counted_members(const std::vector<ExprId>& items,
                         const std::vector<bool>& req,
                         size_t lo,
                         size_t hi,
                         ExprId sep);
  // --- any_order.cc: nullopt past the member bound or the schema's rule budget.
  std::optional<ExprId> any_order_members(const std::vector<ExprId>& items,
                                          const std::vector<bool>& req,
                                          std::optional<ExprId> extra,
                                          size_t lo,
                                          size_t hi,
                                          ExprId sep);
  ExprId braces(ExprId members) {
    return g_.seq({g_.literal("{"), ws(), members, ws(), g_.literal("}")});
  }
  // --- xml_parameters.cc: the structural tags' XML json_schema styles (schema_converter.h).
  Grammar xml_parameters_grammar(XmlStyle style);
  // Parameters in any order (up to the bound; schema order past it), `extra` (undeclared ones)
  // anywhere between; whitespace separates them.
  ExprId xml_members(const std::vector<ExprId>& items,
                     const std::vector<bool>& req,
                     std::optional<ExprId> extra);
  // --- xml_cohere.cc: cohere_xml, recursive <cofl:value name=".." type="..."> tags.
  Grammar cohere_parameters_grammar();
  ExprId cohere_suffix(const json& s, const std::string& path, int depth);
  ExprId cohere_object_body(const json& s, const std::string& path, int depth);
  ExprId cohere_list_body(const json& s, const std::string& path, int depth);
  ExprId cohere_free_suffix();
  ExprId array_expr(const json& s, const std::string& path, int depth);
  ExprId literal_value(const json& v);
  ExprId pattern_members(const json& pp,
                         const std::vector<std::string>& names,
                         const std::string& path,
                         int depth);
  ExprId key_not_in(const std::vector<std::string>& keys);
  void merge_object_shapes(json& base, json& p, const std::string& path);
  void merge_alternatives(json& base, json& p, int depth);
  json exclusive_branches(const json& branches);
  bool merge_forbidden_keys(json& base, json& p, const std::string& path);
  // A patternProperties pattern as an NFA, unanchored as JSON Schema reads it; unsupported
  // patterns are refused.
  std::shared_ptr<const NfaGrammar> key_pattern_nfa(const std::string& pattern,
                                                    const std::string& path);
  std::optional<std::vector<std::string>> pattern_language(const std::string& pattern,
                                                           const std::string& path);
  bool expand_pattern_keys(json& shape, const std::string& path);
  std::optional<std::string> first_pattern_match(const std::string& pattern,
                                                 const std::vector<std::string>& names,
                                                 const std::string& path);
  std::vector<bool> names_match(const json& pn,
                                const std::vector<std::string>& names,
                                const std::string& path);
  std::optional<ExprId> property_name_key(const json& pn,
                                          const std::vector<std::string>& declared,
                                          const std::string& path);
  std::optional<std::vector<json>> finite_values(const json& s, const std::string& path);
  std::optional<std::vector<json>> item_domain(const json& s, const std::string& path, int depth);
  bool schema_allows_type(const json& s, const json& v);
  std::optional<ExprId> unique_items_expr(const json& s,
                                          const json& items,
                                          bool plain,
                                          int64_t lo,
                                          int64_t hi,
                                          ExprId sep,
                                          const std::string& path);
  std::optional<ExprId> contains_expr(const json& s,
                                      const json& items,
                                      bool plain,
                                      int64_t lo,
                                      int64_t hi,
                                      ExprId sep,
                                      const std::string& path,
                                      int depth);
  ExprId shared_rule(const std::string& key, const std::function<ExprId()>& body);
  ExprId regex_expr(const std::string& pattern, bool search, const std::string& path);

  Grammar g_;
  const json& root_;
  JsonSchemaOptions opts_;
  std::map<std::string, RuleId> named_;  // shared rules by key (incl. "$ref:...")
  std::vector<json> owned_;              // resolved/merged schemas kept alive
  AnyOrderBudget any_order_budget_;      // subset rules any_order_members may still spend
};

}  // namespace di::grammar
