// SPDX-License-Identifier: Apache-2.0
// Objects whose declared members may come in any order (JSON Schema does not order properties);
// the members between the braces, `sep` between two of them.
// One rule per set of members written so far (a subset state, 2^n of them for n members), so
// each declared key appears at most once, the object may close only once every required member
// was written, and counted objects (min/maxProperties) know their count from the set. Additional
// members (keys outside the declared set, as the caller built them) may appear between any two
// declared ones. Past JsonSchemaOptions::any_order_max_properties members, or once the schema
// has spent its rule budget, objects keep the schema's order (object_expr).
#include <bit>

#include "grammar/json_schema/converter.h"

namespace di::grammar {

namespace {

// Subset rules per schema, all objects together: 2^8 rules for one 8-member object, so 16 such
// objects. Bounds compile time and NFA size for schemas with many wide objects.
constexpr size_t kAnyOrderRuleBudget = 4096;

}  // namespace

std::optional<ExprId> SchemaConverter::any_order_members(const std::vector<ExprId>& items,
                                                         const std::vector<bool>& req,
                                                         std::optional<ExprId> extra,
                                                         size_t lo,
                                                         size_t hi,
                                                         ExprId sep) {
  const size_t n = items.size();
  if (n < 2 || opts_.any_order_max_properties <= 0 ||
      n > static_cast<size_t>(opts_.any_order_max_properties) || n > 16)
    return std::nullopt;
  const size_t states = size_t{1} << n;
  if (any_order_rules_ + states > kAnyOrderRuleBudget) return std::nullopt;
  any_order_rules_ += states;
  uint32_t req_mask = 0;
  for (size_t i = 0; i < n; ++i)
    if (req[i]) req_mask |= 1u << i;
  // A set can still close when the members it lacks fit below hi.
  auto viable = [&](uint32_t m) {
    const auto written = static_cast<size_t>(std::popcount(m));
    return written <= hi && written + std::popcount(req_mask & ~m) <= hi;
  };
  std::vector<ExprId> member(n);
  for (size_t i = 0; i < n; ++i) member[i] = as_rule(items[i]);
  // after[m]: at least one member written, declared set m.
  std::vector<RuleId> after(states, -1);
  for (uint32_t m = extra ? 0 : 1; m < states; ++m)
    if (viable(m)) after[m] = g_.add_rule("keys" + std::to_string(g_.rules().size()));
  for (uint32_t m = 0; m < states; ++m) {
    if (after[m] < 0) continue;
    const auto written = static_cast<size_t>(std::popcount(m));
    std::vector<ExprId> alts;
    if ((m & req_mask) == req_mask && written >= lo) alts.push_back(g_.empty());
    for (size_t i = 0; i < n; ++i) {
      const uint32_t next = m | 1u << i;
      if (next != m && after[next] >= 0)
        alts.push_back(g_.seq({sep, member[i], g_.ref(after[next])}));
    }
    ExprId body = alts.empty() ? g_.nothing() : g_.alt(std::move(alts));
    if (extra) body = g_.seq({g_.star(g_.seq({sep, *extra})), body});
    g_.set_body(after[m], body);
  }
  std::vector<ExprId> first;
  if (req_mask == 0 && lo == 0) first.push_back(g_.empty());
  if (extra && after[0] >= 0) first.push_back(g_.seq({*extra, g_.ref(after[0])}));
  for (size_t i = 0; i < n; ++i)
    if (after[1u << i] >= 0) first.push_back(g_.seq({member[i], g_.ref(after[1u << i])}));
  return first.empty() ? g_.nothing() : g_.alt(std::move(first));
}

}  // namespace di::grammar
