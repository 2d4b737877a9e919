// SPDX-License-Identifier: Apache-2.0
// JSON Schema `not` in the forms that have a positive equivalent, rewritten before conversion:
// `not: {}` / `not: true` (nothing matches), `not: false` (no constraint), `not: {not: X}` (X, as
// an allOf part), `not: {type: T}` (the remaining types; refused where that would need "a
// number but not an integer") and `not: {required: [k]}` (an object without k). Other forms are
// left in place for the converter to refuse (strict) or ignore (lenient).
#pragma once

#include <nlohmann/json.hpp>

namespace di::grammar {

// Ordered JSON: property order is the order the grammar emits properties in.
nlohmann::ordered_json rewrite_not(nlohmann::ordered_json s);

}  // namespace di::grammar
