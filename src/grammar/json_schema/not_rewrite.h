// SPDX-License-Identifier: Apache-2.0
// JSON Schema `not` in the forms that have a positive equivalent, rewritten before conversion:
// `not: {}` / `not: true` (nothing matches), `not: false` (no constraint), `not: {not: X}` (X, as
// an allOf part), `not: {type: T}` (the remaining types; refused where that would need "a
// number but not an integer") and `not: {required: [k]}` (an object without k). Other forms are
// left in place for the converter to refuse (strict) or ignore (lenient). `not: {const: v}` and
// `not: {enum: [...]}` next to an enum, a const or a boolean/null type filter those values.
#pragma once

#include <nlohmann/json.hpp>

namespace di::grammar {

// Ordered JSON: property order is the order the grammar emits properties in.
nlohmann::ordered_json rewrite_not(nlohmann::ordered_json s);

// The negation of `i` as a positive schema, for the forms an if/then/else condition usually
// takes: a type list, and objects described by type "object", properties and required (the
// negation is an anyOf: a non-object where i demands an object, an object without a required
// key, or one whose property k fails its schema, that schema left as `not` for rewrite_not:
// const/enum/type). Null when i has another form.
nlohmann::ordered_json negate_schema(const nlohmann::ordered_json& i);

// if/then/else as anyOf [allOf [if, then], allOf [not if, else]] (exact), merged into s.
// Returns s unchanged (still with `if`) when `not if` has no positive form, or s already has
// anyOf/oneOf.
nlohmann::ordered_json rewrite_if(nlohmann::ordered_json s);

}  // namespace di::grammar
