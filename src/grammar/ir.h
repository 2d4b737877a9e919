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
// `negated` any one text token outside a set (`!<...>`, structural tags' exclude_tokens); see
// docs/grammar.md "Token terminals".
// kTagDispatch: free text watched for triggers (TagDispatch below; docs/grammar.md).
enum class ExprKind : uint8_t {
  kEmpty,
  kBytes,
  kSeq,
  kAlt,
  kRepeat,
  kRuleRef,
  kNothing,
  kToken,
  kTagDispatch
};

// xgrammar's TagDispatch: free bytes in which no trigger occurs; the first trigger completed
// (the longest one ending at that byte) must be followed by its rule, after which free text
// starts again (`loop`) or the expression ends. Stop strings and excludes are watched the same
// way (the longest of all the strings ending at a byte decides): a stop string ends the
// expression (it is its last bytes), an excluded string may not occur in the free text. With
// stop strings and no loop, one of them must follow the dispatched rule directly. The NFA
// builder lowers it through an Aho-Corasick automaton over all the strings (aho_corasick.h),
// one NFA state per automaton node.
struct TagDispatchSpec {
  std::vector<std::string> triggers;  // distinct (none: free text with stops/excludes)
  std::vector<int32_t> rules;         // per trigger: the rule read right after it
  bool loop = true;                   // free text again after a dispatch (else the end)
  bool at_least_one = false;          // may not end before one dispatch
  std::vector<std::string> stops;     // xgrammar's stop_str: non-empty strings
  std::vector<std::string> excludes;  // non-empty strings the free text may not contain
  bool stop_eos = true;               // the free text may end anywhere (xgrammar's stop_eos)
  // Without triggers: at most this many code points of free text (-1: no bound), the stop
  // string excluded (structural tags' any_text max_chars).
  int64_t max_chars = -1;
};

struct Expr {
  ExprKind kind = ExprKind::kEmpty;
  ByteSet bytes;                  // kBytes
  std::vector<ExprId> children;   // kSeq, kAlt, kRepeat (one child)
  int32_t min = 0, max = -1;      // kRepeat; max -1 = unbounded
  RuleId rule = -1;               // kRuleRef; kTagDispatch: index into tag_dispatches()
  int32_t token = -1;             // kToken: vocabulary id (negated: the first excluded one, or -1)
  bool negated = false;           // kToken: any text token but the `excluded` ones
  std::vector<int32_t> excluded;  // kToken negated: sorted, distinct; may be empty
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
  // e wrapped in its own rule (a reference, empty or nothing as is): a rule is built once in the
  // NFA however often it is referenced, an expression is copied at every use.
  ExprId as_rule(ExprId e);
  // A token terminal (ids are checked against the vocabulary when the grammar is compiled).
  ExprId token(int32_t id, bool negated = false);
  // Any one text token outside `ids` (none: any text token).
  ExprId token_except(std::vector<int32_t> ids);
  ExprId tag_dispatch(TagDispatchSpec spec);

  // Copies every rule of `other` (names prefixed) into this grammar; returns other's root here.
  RuleId import(const Grammar& other, const std::string& prefix);

  // Declares a rule (body set later, which allows forward and recursive references).
  RuleId add_rule(std::string name);
  void set_body(RuleId rule, ExprId body) { rules_[rule].body = body; }
  RuleId find_rule(std::string_view name) const;

  void set_root(RuleId r) { root_ = r; }
  RuleId root() const { return root_; }
  const std::vector<Rule>& rules() const { return rules_; }
  const Expr& expr(ExprId id) const { return exprs_[id]; }
  size_t num_exprs() const { return exprs_.size(); }
  const std::vector<TagDispatchSpec>& tag_dispatches() const { return tag_dispatches_; }

  // Human-readable dump (EBNF-like), for error messages and tests.
  std::string to_string() const;

 private:
  ExprId add(Expr e);
  std::vector<Expr> exprs_;
  std::vector<Rule> rules_;
  std::vector<TagDispatchSpec> tag_dispatches_;
  RuleId root_ = -1;
};

}  // namespace di::grammar
