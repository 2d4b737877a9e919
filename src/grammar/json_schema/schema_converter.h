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
#include <string_view>

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

// A tool's arguments in Qwen's XML parameter style (structural tags' `qwen_xml_parameter`;
// json_schema/qwen_xml.cc): `<parameter=KEY>VALUE</parameter>` per property of an object schema.
Expected<Grammar> json_schema_to_qwen_xml_grammar(const nlohmann::ordered_json& schema,
                                                  const JsonSchemaOptions& opts = {});

// Any JSON value (response_format json_object).
Grammar any_json_grammar(const JsonSchemaOptions& opts = {});

}  // namespace di::grammar
