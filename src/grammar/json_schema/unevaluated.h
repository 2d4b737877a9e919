// SPDX-License-Identifier: Apache-2.0
// `unevaluatedProperties` / `unevaluatedItems` where no in-place applicator is in play (no
// allOf/anyOf/oneOf/not/if/then/else/$ref/$dynamicRef/$recursiveRef/dependentSchemas/
// dependencies, and for items no `contains`): then the only keywords that evaluate members are
// the schema's own properties/patternProperties/additionalProperties (prefixItems/items/
// additionalItems), so the keyword is exactly additionalProperties (items after the tuple):
// vacuous next to an additionalProperties (an items schema that covers every element), else it
// becomes one. Next to applicators (grammar8) where what they evaluate is known statically
// (allOf / local $ref / not; if/then/else, oneOf and anyOf branch by branch; see
// unevaluated.cc): the same with the evaluated names declared. Other schemas are left
// unchanged, for the converter to refuse (strict) or ignore (lenient).
// The rewrite runs once over the document as written (every subschema position), never on the
// converter's merged schemas: an anyOf branch merged with its parent's siblings, or a negated
// `if`, would count evaluations the real applicators do not make (a failed `if` evaluates
// nothing), so the rewrite there could accept invalid instances.
#pragma once

#include <nlohmann/json.hpp>

namespace di::grammar {

// Whether any object in `j` has one of the keywords as a key (cheap test before copying).
bool mentions_unevaluated(const nlohmann::ordered_json& j);

// Rewrites every subschema of `root` in place; false (and nothing done) when no schema uses
// the keywords.
bool rewrite_unevaluated(nlohmann::ordered_json& root);

}  // namespace di::grammar
