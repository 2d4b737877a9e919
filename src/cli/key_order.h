// SPDX-License-Identifier: Apache-2.0
// grammar-bench's key-order diagnostic (--key-order): rewrites an instance with every object's
// keys in the order the schema declares them, so a rejected valid instance that is accepted
// after the rewrite was rejected for its key order alone. Diagnostic only: the order is one
// global rank over every `properties` object of the schema document (first declaration wins),
// not a resolution of which subschema applies where.
#pragma once

#include <nlohmann/json.hpp>

namespace di::cli {

// `instance` with its objects' keys sorted by the rank of their first declaration in `schema`;
// undeclared keys keep their relative order after the declared ones.
nlohmann::ordered_json reorder_keys_like_schema(const nlohmann::ordered_json& schema,
                                                const nlohmann::ordered_json& instance);

}  // namespace di::cli
