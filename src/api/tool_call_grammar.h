// The grammar of a V4.1 DSML tool-call block (recipe/parse/dsml_block.cc reads it back), for
// tool_choice "required" or a named function: the answer is exactly one block
//
//   <｜DSML｜ calls>
//   <｜DSML｜ invoke name="NAME">
//   <｜DSML｜ parameter name="KEY" string="true|false">VALUE</｜DSML｜ parameter>
//   ...
//   </｜DSML｜ invoke>
//   </｜DSML｜ calls>
//
// with one or more invokes (one of NAME when named). Each call's parameters follow its tool's
// `parameters` schema: the declared properties in schema order, required ones always, optional
// ones optionally; a value is string="false" with JSON matching the property's schema, or, for a
// plain {"type": "string"} property, also string="true" with raw text (no U+FF5C, so it cannot
// close the tag early). The markers are spelled as text (the parser reads detokenized text).
#pragma once

#include <nlohmann/json.hpp>

#include "grammar/ir.h"
#include "grammar/json_schema/schema_converter.h"
#include "util/status.h"

namespace di::api {

// spec: {"tools": [{"name": N, "parameters": {...}}, ...], "name": N | null, "single": bool,
// "optional": bool} (tool_choice.h writes it). single: one call (parallel_tool_calls false);
// optional: free text in which the block may start once, at "<｜DSML｜", and end the reply
// (tool_choice auto with parallel_tool_calls false). Errors (kInvalidArgument) name the tool and
// the schema part that cannot be written as DSML parameters.
Expected<grammar::Grammar> tool_call_grammar(const nlohmann::ordered_json& spec,
                                             const grammar::JsonSchemaOptions& opts = {});

}  // namespace di::api
