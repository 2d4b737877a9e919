// SPDX-License-Identifier: Apache-2.0
// The grammar IR every front end (EBNF, regex, JSON Schema) lowers to: a set of named rules whose
// bodies are expression trees over byte sets. Characters are already UTF-8 bytes here, so the
// matcher works on bytes and never needs to know about code points.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/byte_set.h"

namespace di::grammar {

using ExprId = int32_t;
using RuleId = int32_t;

// kToken: one whole token of the vocabulary as a unit (EBNF `<[id]>`, `<text>`), or with
// `negated` any one text token except it (`!<...>`); see docs/grammar.md "Token terminals".
enum class ExprKind : uint8_t { kEmpty, kBytes, kSeq, kAlt, kRepeat, kRuleRef, kNothing, kToken };

struct Expr {
  ExprKind kind = ExprKind::kEmpty;
  ByteSet bytes;                 // kBytes
  std::vector<ExprId> children;  // kSeq, kAlt, kRepeat (one child)
  int32_t min = 0, max = -1;     // kRepeat; max -1 = unbounded
  RuleId rule = -1;              // kRuleRef
  int32_t token = -1;            // kToken: vocabulary id
  bool negated = false;          // kToken: any text token but `token`
};

struct Rule {
  std::string name;
  ExprId body = -1;  // -1 until defined
};

// Owns the expression pool. Builder methods return ids; ids stay valid for the grammar's life.
class Grammar {
 public:
  ExprId empty();
  ExprId nothing();  // matches no string at all (e.g. an empty character class)
  ExprId bytes(const ByteSet& set);
  ExprId literal(std::string_view s);
  ExprId seq(std::vector<ExprId> items);
  ExprId alt(std::vector<ExprId> items);
  ExprId repeat(ExprId item, int32_t min, int32_t max);
  ExprId star(ExprId item) { return repeat(item, 0, -1); }
  ExprId plus(ExprId item) { return repeat(item, 1, -1); }
  ExprId opt(ExprId item) { return repeat(item, 0, 1); }
  ExprId ref(RuleId rule);
  // A token terminal (ids are checked against the vocabulary when the grammar is compiled).
  ExprId token(int32_t id, bool negated = false);

  // Declares a rule (body set later, which allows forward and recursive references).
  RuleId add_rule(std::string name);
  void set_body(RuleId rule, ExprId body) { rules_[rule].body = body; }
  RuleId find_rule(std::string_view name) const;

  void set_root(RuleId r) { root_ = r; }
  RuleId root() const { return root_; }
  const std::vector<Rule>& rules() const { return rules_; }
  const Expr& expr(ExprId id) const { return exprs_[id]; }
  size_t num_exprs() const { return exprs_.size(); }

  // Human-readable dump (EBNF-like), for error messages and tests.
  std::string to_string() const;

 private:
  ExprId add(Expr e);
  std::vector<Expr> exprs_;
  std::vector<Rule> rules_;
  RuleId root_ = -1;
};

}  // namespace di::grammar
