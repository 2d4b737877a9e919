// SPDX-License-Identifier: Apache-2.0
// See any_order.h.
#include "grammar/any_order.h"

#include <bit>
#include <cstdint>

namespace di::grammar {

std::optional<ExprId> any_order_sequence(Grammar& g,
                                         const std::vector<ExprId>& items,
                                         const std::vector<bool>& required,
                                         std::optional<ExprId> extra,
                                         size_t lo,
                                         size_t hi,
                                         ExprId sep,
                                         int max_members,
                                         AnyOrderBudget& budget) {
  const size_t n = items.size();
  if (n < 2 || max_members <= 0 || n > static_cast<size_t>(max_members) || n > 16)
    return std::nullopt;
  const size_t states = size_t{1} << n;
  if (states > budget.rules_left) return std::nullopt;
  budget.rules_left -= states;
  uint32_t req_mask = 0;
  for (size_t i = 0; i < n; ++i)
    if (required[i]) req_mask |= 1u << i;
  // A set can still close when the members it lacks fit below hi.
  auto viable = [&](uint32_t m) {
    const auto written = static_cast<size_t>(std::popcount(m));
    return written <= hi && written + std::popcount(req_mask & ~m) <= hi;
  };
  std::vector<ExprId> member(n);
  for (size_t i = 0; i < n; ++i) member[i] = g.as_rule(items[i]);
  // after[m]: at least one member written, declared set m.
  std::vector<RuleId> after(states, -1);
  for (uint32_t m = extra ? 0 : 1; m < states; ++m)
    if (viable(m)) after[m] = g.add_rule("keys" + std::to_string(g.rules().size()));
  for (uint32_t m = 0; m < states; ++m) {
    if (after[m] < 0) continue;
    const auto written = static_cast<size_t>(std::popcount(m));
    std::vector<ExprId> alts;
    if ((m & req_mask) == req_mask && written >= lo) alts.push_back(g.empty());
    for (size_t i = 0; i < n; ++i) {
      const uint32_t next = m | 1u << i;
      if (next != m && after[next] >= 0)
        alts.push_back(g.seq({sep, member[i], g.ref(after[next])}));
    }
    ExprId body = alts.empty() ? g.nothing() : g.alt(std::move(alts));
    if (extra) body = g.seq({g.star(g.seq({sep, *extra})), body});
    g.set_body(after[m], body);
  }
  std::vector<ExprId> first;
  if (req_mask == 0 && lo == 0) first.push_back(g.empty());
  if (extra && after[0] >= 0) first.push_back(g.seq({*extra, g.ref(after[0])}));
  for (size_t i = 0; i < n; ++i)
    if (after[1u << i] >= 0) first.push_back(g.seq({member[i], g.ref(after[1u << i])}));
  return first.empty() ? g.nothing() : g.alt(std::move(first));
}

}  // namespace di::grammar
