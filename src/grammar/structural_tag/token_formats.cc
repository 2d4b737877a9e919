// SPDX-License-Identifier: Apache-2.0
#include "grammar/structural_tag/token_formats.h"

namespace di::grammar {

namespace {

ExprId free_token(Grammar& g,
                  const std::vector<int32_t>& triggers,
                  const std::vector<int32_t>& excluded) {
  std::vector<int32_t> out = triggers;
  out.insert(out.end(), excluded.begin(), excluded.end());
  return g.token_except(std::move(out));
}

// The rule `(free | one)*`, or with at_least_one `free* one (free | one)*`: a rule, so the
// loop is built once however often the format is used.
ExprId looped(Grammar& g, ExprId free, ExprId one, bool at_least_one) {
  const RuleId r = g.add_rule("token_loop" + std::to_string(g.rules().size()));
  ExprId any = g.star(g.alt({free, one}));
  g.set_body(r, at_least_one ? g.seq({g.star(free), one, any}) : any);
  return g.ref(r);
}

}  // namespace

ExprId token_dispatch_expr(Grammar& g,
                           const std::vector<int32_t>& triggers,
                           const std::vector<ExprId>& bodies,
                           const std::vector<int32_t>& excluded,
                           bool loop) {
  std::vector<ExprId> alts;
  for (size_t i = 0; i < triggers.size(); ++i)
    alts.push_back(g.seq({g.token(triggers[i]), bodies[i]}));
  const ExprId one = g.alt(std::move(alts));
  const ExprId free = free_token(g, triggers, excluded);
  if (!loop) return g.seq({g.star(free), g.opt(one)});
  return looped(g, free, one, false);
}

ExprId token_triggered_expr(Grammar& g,
                            const std::vector<int32_t>& triggers,
                            const std::vector<ExprId>& tags,
                            const std::vector<int32_t>& excluded,
                            bool at_least_one,
                            bool stop_after_first) {
  const ExprId one = g.alt(tags);
  const ExprId free = free_token(g, triggers, excluded);
  if (stop_after_first) return g.seq({g.star(free), at_least_one ? one : g.opt(one)});
  return looped(g, free, one, at_least_one);
}

}  // namespace di::grammar
