// SPDX-License-Identifier: Apache-2.0
// Structural tags (xgrammar's `structural_tag`, as vLLM and SGLang accept it) lowered to the
// grammar IR. Two spellings:
//   legacy  {"type": "structural_tag", "structures": [{"begin", "schema", "end"}, ...],
//            "triggers": [...]}
//   format  {"type": "structural_tag", "format": F} with F one of
//            {"type": "const_string", "value"}, {"type": "json_schema", "json_schema"},
//            {"type": "any_text", "excludes"}, {"type": "sequence", "elements"},
//            {"type": "or", "elements"}, {"type": "tag", "begin", "content", "end"} (end: a
//            string or an array of them),
//            {"type": "triggered_tags", "triggers", "tags", "excludes", "at_least_one",
//             "stop_after_first"},
//            {"type": "tags_with_separator", "tags", "separator", "at_least_one",
//             "stop_after_first"}, and since grammar8 `regex`, `grammar`, `token`,
//            `exclude_token`, `any_tokens` (leaf_formats.h), `optional` / `plus` / `star`
//            (`content`), `repeat` (`content`, `min`, `max`; -1 unbounded), and a tag's `begin`
//            / `end` as a token format; since grammar9 `dispatch` (`rules` [pattern, format],
//            `loop`, `excludes`: unlimited, like triggered_tags), `token_dispatch` and
//            `token_triggered_tags` (token_formats.h), `qwen_xml_parameter` / json_schema
//            `style: qwen_xml` and exclude_tokens lists of any length; since grammar10 the
//            styles minimax_xml / glm_xml / deepseek_xml (json_schema/xml_parameters.cc),
//            any_text `max_chars` / `max_tokens` and any_tokens `max_tokens`
//            (leaf_formats.h); since grammar11 the styles kimi_k3_xml (xml_parameters.cc) and
//            cohere_xml (json_schema/xml_cohere.cc), and undeclared parameters in the XML
//            styles. Other types are a 400 naming the type.
// any_text, triggered_tags and tags_with_separator are "unlimited": inside a tag they run up to
// the tag's end string (which they read themselves, as xgrammar does), elsewhere to the end of
// the text, so they must come last in a sequence. Triggers become a TagDispatch (ir.h) whose
// stop string is that end; each tag belongs to the trigger its begin starts with.
// Errors are kInvalidArgument naming the field ("structural_tag: format.tags[1].begin: ...").
#pragma once

#include <string_view>

#include "grammar/ir.h"
#include "grammar/json_schema/schema_converter.h"
#include "grammar/vocabulary.h"
#include "util/status.h"

namespace di::grammar {

// `vocab`: for the token formats (leaf_formats.h); null refuses them.
Expected<Grammar> structural_tag_to_grammar(std::string_view json_text,
                                            const JsonSchemaOptions& opts = {},
                                            const TokenTrie* vocab = nullptr);

}  // namespace di::grammar
