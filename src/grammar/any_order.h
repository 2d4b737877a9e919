// SPDX-License-Identifier: Apache-2.0
// Members that may come in any order, each at most once (JSON objects' declared members, the
// parameters of a tool call, Qwen XML parameters): one rule per set of members written so far (a
// subset state, 2^n of them for n members), so the sequence may end only once every required
// member was written, and a counted sequence (lo..hi members) knows its count from the set.
// `sep` goes between two members; `extra` (optional) may appear, after a sep, between any two.
// Past `max_members` members, or once the grammar's budget of subset rules is spent, the caller
// keeps its fixed order (the function returns nullopt).
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "grammar/ir.h"

namespace di::grammar {

// Subset rules a grammar may still spend on any-order sequences: 2^8 for one 8-member sequence,
// so 16 such. Bounds compile time and NFA size for grammars with many wide objects.
struct AnyOrderBudget {
  size_t rules_left = 4096;
};

std::optional<ExprId> any_order_sequence(Grammar& g,
                                         const std::vector<ExprId>& members,
                                         const std::vector<bool>& required,
                                         std::optional<ExprId> extra,
                                         size_t lo,
                                         size_t hi,
                                         ExprId sep,
                                         int max_members,
                                         AnyOrderBudget& budget);

}  // namespace di::grammar
