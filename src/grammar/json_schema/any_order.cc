// SPDX-License-Identifier: Apache-2.0
// Objects whose declared members may come in any order (JSON Schema does not order properties):
// the members between the braces, `sep` between two of them, through grammar/any_order.h with
// the schema's member bound and rule budget. Past them, objects keep the schema's order
// (object_expr).
#include "grammar/any_order.h"

#include "grammar/json_schema/converter.h"

namespace di::grammar {

std::optional<ExprId> SchemaConverter::any_order_members(const std::vector<ExprId>& items,
                                                         const std::vector<bool>& req,
                                                         std::optional<ExprId> extra,
                                                         size_t lo,
                                                         size_t hi,
                                                         ExprId sep) {
  return any_order_sequence(g_, items, req, extra, lo, hi, sep, opts_.any_order_max_properties,
                            any_order_budget_);
}

}  // namespace di::grammar
