// SPDX-License-Identifier: Apache-2.0
#include "grammar/ir.h"

#include <algorithm>
#include <cstdio>

namespace di::grammar {

ExprId Grammar::add(Expr e) {
  exprs_.push_back(std::move(e));
  return static_cast<ExprId>(exprs_.size() - 1);
}

ExprId Grammar::empty() {
  return add(Expr{});
}

ExprId Grammar::nothing() {
  Expr e;
  e.kind = ExprKind::kNothing;
  return add(std::move(e));
}

ExprId Grammar::bytes(const ByteSet& set) {
  if (set.empty()) return nothing();
  Expr e;
  e.kind = ExprKind::kBytes;
  e.bytes = set;
  return add(std::move(e));
}

ExprId Grammar::literal(std::string_view s) {
  if (s.empty()) return empty();
  std::vector<ExprId> items;
  items.reserve(s.size());
  for (char c : s) items.push_back(bytes(ByteSet::single(static_cast<uint8_t>(c))));
  return seq(std::move(items));
}

ExprId Grammar::seq(std::vector<ExprId> items) {
  if (items.empty()) return empty();
  if (items.size() == 1) return items[0];
  Expr e;
  e.kind = ExprKind::kSeq;
  e.children = std::move(items);
  return add(std::move(e));
}

ExprId Grammar::alt(std::vector<ExprId> items) {
  if (items.empty()) return nothing();
  if (items.size() == 1) return items[0];
  Expr e;
  e.kind = ExprKind::kAlt;
  e.children = std::move(items);
  return add(std::move(e));
}

ExprId Grammar::repeat(ExprId item, int32_t min, int32_t max) {
  if (min == 1 && max == 1) return item;
  Expr e;
  e.kind = ExprKind::kRepeat;
  e.children = {item};
  e.min = min;
  e.max = max;
  return add(std::move(e));
}

ExprId Grammar::ref(RuleId rule) {
  Expr e;
  e.kind = ExprKind::kRuleRef;
  e.rule = rule;
  return add(std::move(e));
}

ExprId Grammar::as_rule(ExprId e) {
  const ExprKind k = expr(e).kind;
  if (k == ExprKind::kRuleRef || k == ExprKind::kEmpty || k == ExprKind::kNothing) return e;
  const RuleId r = add_rule("r" + std::to_string(rules().size()));
  set_body(r, e);
  return ref(r);
}

ExprId Grammar::token(int32_t id, bool negated) {
  Expr e;
  e.kind = ExprKind::kToken;
  e.token = id;
  e.negated = negated;
  if (negated) e.excluded = {id};
  return add(std::move(e));
}

ExprId Grammar::token_except(std::vector<int32_t> ids) {
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  Expr e;
  e.kind = ExprKind::kToken;
  e.negated = true;
  e.token = ids.empty() ? -1 : ids[0];
  e.excluded = std::move(ids);
  return add(std::move(e));
}

ExprId Grammar::tag_dispatch(TagDispatchSpec spec) {
  Expr e;
  e.kind = ExprKind::kTagDispatch;
  e.rule = static_cast<int32_t>(tag_dispatches_.size());
  tag_dispatches_.push_back(std::move(spec));
  return add(std::move(e));
}

RuleId Grammar::import(const Grammar& other, const std::string& prefix) {
  const auto expr_base = static_cast<ExprId>(exprs_.size());
  const auto rule_base = static_cast<RuleId>(rules_.size());
  const auto td_base = static_cast<int32_t>(tag_dispatches_.size());
  for (const Rule& r : other.rules_)
    rules_.push_back(Rule{prefix + r.name, r.body < 0 ? -1 : r.body + expr_base});
  for (TagDispatchSpec td : other.tag_dispatches_) {
    for (int32_t& r : td.rules) r += rule_base;
    tag_dispatches_.push_back(std::move(td));
  }
  for (Expr e : other.exprs_) {
    for (ExprId& c : e.children) c += expr_base;
    if (e.kind == ExprKind::kRuleRef) e.rule += rule_base;
    if (e.kind == ExprKind::kTagDispatch) e.rule += td_base;
    exprs_.push_back(std::move(e));
  }
  return other.root_ < 0 ? -1 : other.root_ + rule_base;
}

RuleId Grammar::add_rule(std::string name) {
  rules_.push_back(Rule{std::move(name), -1});
  return static_cast<RuleId>(rules_.size() - 1);
}

RuleId Grammar::find_rule(std::string_view name) const {
  for (size_t i = 0; i < rules_.size(); ++i)
    if (rules_[i].name == name) return static_cast<RuleId>(i);
  return -1;
}

namespace {

void print_bytes(const ByteSet& s, std::string& out) {
  if (s.count() == 1 && s.first() >= 0x20 && s.first() < 0x7f && s.first() != '"' &&
      s.first() != '\\') {
    out += '"';
    out += static_cast<char>(s.first());
    out += '"';
    return;
  }
  out += '[';
  for (int b = 0; b < 256; ++b) {
    if (!s.test(static_cast<uint8_t>(b))) continue;
    int e = b;
    while (e + 1 < 256 && s.test(static_cast<uint8_t>(e + 1))) ++e;
    char buf[24];
    if (e == b)
      std::snprintf(buf, sizeof(buf), "\\x%02x", b);
    else
      std::snprintf(buf, sizeof(buf), "\\x%02x-\\x%02x", b, e);
    out += buf;
    b = e;
  }
  out += ']';
}

void print_expr(const Grammar& g, ExprId id, std::string& out) {
  const Expr& e = g.expr(id);
  switch (e.kind) {
    case ExprKind::kEmpty:
      out += "\"\"";
      break;
    case ExprKind::kNothing:
      out += "[]";
      break;
    case ExprKind::kBytes:
      print_bytes(e.bytes, out);
      break;
    case ExprKind::kRuleRef:
      out += g.rules()[e.rule].name;
      break;
    case ExprKind::kToken:
      if (!e.negated) {
        out += "<[" + std::to_string(e.token) + "]>";
      } else {
        out += "!<[";
        for (size_t i = 0; i < e.excluded.size(); ++i)
          out += (i ? "," : "") + std::to_string(e.excluded[i]);
        out += "]>";
      }
      break;
    case ExprKind::kTagDispatch: {
      const TagDispatchSpec& td = g.tag_dispatches()[e.rule];
      out += "TagDispatch(";
      for (size_t i = 0; i < td.triggers.size(); ++i)
        out += "(\"" + td.triggers[i] + "\", " + g.rules()[td.rules[i]].name + "), ";
      out += std::string("loop_after_dispatch=") + (td.loop ? "true" : "false");
      if (!td.stop_eos) out += ", stop_eos=false";
      if (td.max_chars >= 0) out += ", max_chars=" + std::to_string(td.max_chars);
      for (const auto* list : {&td.stops, &td.excludes}) {
        if (list->empty()) continue;
        out += list == &td.stops ? ", stop_str=(" : ", excludes=(";
        for (size_t i = 0; i < list->size(); ++i) out += (i ? ", \"" : "\"") + (*list)[i] + "\"";
        out += ')';
      }
      out += td.at_least_one ? ", at_least_one=true)" : ")";
      break;
    }
    case ExprKind::kSeq:
    case ExprKind::kAlt:
      out += '(';
      for (size_t i = 0; i < e.children.size(); ++i) {
        if (i) out += e.kind == ExprKind::kSeq ? " " : " | ";
        print_expr(g, e.children[i], out);
      }
      out += ')';
      break;
    case ExprKind::kRepeat:
      print_expr(g, e.children[0], out);
      out += '{' + std::to_string(e.min) + ',' + (e.max < 0 ? "" : std::to_string(e.max)) + '}';
      break;
  }
}

}  // namespace

std::string Grammar::to_string() const {
  std::string out;
  for (const Rule& r : rules_) {
    out += r.name + " ::= ";
    if (r.body >= 0) print_expr(*this, r.body, out);
    out += '\n';
  }
  return out;
}

}  // namespace di::grammar
