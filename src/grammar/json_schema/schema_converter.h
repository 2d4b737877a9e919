// SPDX-License-Identifier: Apache-2.0
// JSON Schema front end: lowers a schema to the grammar IR (keyword coverage in
// shared/spec/recipe-tokenizer-grammar.md §A3). Strict by default: a validation keyword we cannot
// enforce is an error naming it, because silently ignoring it would let invalid JSON through.
// `lenient` ignores such keywords instead (oneOf then behaves as anyOf).
//
// Output JSON shape: objects with at most `any_order_max_properties` declared members take them
// in any order (each at most once), wider ones keep the schema's property order; whitespace
// between tokens is flexible (any JSON whitespace).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/ir.h"
#include "util/status.h"

namespace di::grammar {

struct JsonSchemaOptions {
  bool lenient = false;
  // Maximum number of whitespace bytes between two JSON tokens (-1 = unbounded).
  int max_whitespace = 16;
  // Objects (and enum/const objects) with 2..this many declared members accept them in any
  // order: 2^n grammar rules per object, within a per-schema budget. 0 = schema order only.
  int any_order_max_properties = 8;
};

Expected<Grammar> json_schema_to_grammar(const nlohmann::ordered_json& schema,
                                         const JsonSchemaOptions& opts = {});
Expected<Grammar> json_schema_to_grammar(std::string_view schema_text,
                                         const JsonSchemaOptions& opts = {});

// A tool's arguments as XML parameters, one per property of an object schema (structural tags'
// `json_schema` styles; json_schema/xml_parameters.cc): qwen_xml
// `<parameter=KEY>VALUE</parameter>`, minimax_xml `<parameter name="KEY">`, glm_xml
// `<arg_key>KEY</arg_key><arg_value>`, deepseek_xml `<｜DSML｜parameter name="KEY"
// string="true|false">`, kimi_k3_xml `<|open|>argument key="KEY" type="T"<|sep|>VALUE<|close|>
// argument<|sep|>`; cohere_xml (xml_cohere.cc) `<cofl:value name="KEY" type="raw|json|dict|list">`
// nested for objects and arrays.
enum class XmlStyle { kQwen, kMiniMax, kGlm, kDeepSeek, kKimiK3, kCohere };
Expected<Grammar> json_schema_to_xml_parameters_grammar(const nlohmann::ordered_json& schema,
                                                        XmlStyle style,
                                                        const JsonSchemaOptions& opts = {});

// {"type": "string"} with annotations only: every string is valid, so raw text is too.
bool plain_string_schema(const nlohmann::ordered_json& schema);
// A string enum/const and nothing else that validates: its values (written raw by the XML styles
// and DSML's string="true"); nullopt otherwise.
std::optional<std::vector<std::string>> string_enum_values(const nlohmann::ordered_json& schema);

// Any JSON value (response_format json_object).
Grammar any_json_grammar(const JsonSchemaOptions& opts = {});

}  // namespace di::grammar
