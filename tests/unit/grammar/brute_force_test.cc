// SPDX-License-Identifier: Apache-2.0
// Random small grammars over {a,b,c}: (1) the Earley recognizer against an exhaustive enumeration
// of the language, (2) the cached token masks against checking every token one by one.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "grammar/matcher.h"

namespace di::grammar {
namespace {

constexpr size_t kMaxLen = 6;
using StrSet = std::set<std::string>;

StrSet concat(const StrSet& a, const StrSet& b) {
  StrSet out;
  for (auto& x : a)
    for (auto& y : b)
      if (x.size() + y.size() <= kMaxLen) out.insert(x + y);
  return out;
}

// All strings of length <= kMaxLen in L(e); rules are non-recursive here.
StrSet enumerate(const Grammar& g, ExprId id) {
  const Expr& e = g.expr(id);
  switch (e.kind) {
    case ExprKind::kEmpty:
      return {""};
    case ExprKind::kNothing:
    case ExprKind::kTagDispatch:  // tag_dispatch_test.cc covers these
    case ExprKind::kToken:        // token_terminal_test.cc covers these
      return {};
    case ExprKind::kBytes: {
      StrSet out;
      for (int b = 0; b < 256; ++b)
        if (e.bytes.test(static_cast<uint8_t>(b))) out.insert(std::string(1, static_cast<char>(b)));
      return out;
    }
    case ExprKind::kRuleRef:
      return enumerate(g, g.rules()[e.rule].body);
    case ExprKind::kSeq: {
      StrSet cur{""};
      for (ExprId c : e.children) cur = concat(cur, enumerate(g, c));
      return cur;
    }
    case ExprKind::kAlt: {
      StrSet out;
      for (ExprId c : e.children) out.merge(enumerate(g, c));
      return out;
    }
    case ExprKind::kRepeat: {
      StrSet item = enumerate(g, e.children[0]), out, cur{""};
      for (int n = 0; (e.max < 0 || n <= e.max) && n <= static_cast<int>(kMaxLen) + 1; ++n) {
        if (n >= e.min) out.insert(cur.begin(), cur.end());
        cur = concat(cur, item);
      }
      return out;
    }
  }
  return {};
}

// with_nothing: some empty leaves become `nothing` (dead ends the NFA builder must prune).
ExprId random_expr(
    Grammar& g, std::mt19937& rng, int depth, int num_rules, bool with_nothing = false) {
  int k = static_cast<int>(rng() % (depth > 3 ? 2 : 7));
  switch (k) {
    case 0:
      return g.literal(std::string(1, static_cast<char>('a' + rng() % 3)));
    case 1: {
      ByteSet s;
      s.set(static_cast<uint8_t>('a' + rng() % 3));
      s.set(static_cast<uint8_t>('a' + rng() % 3));
      return g.bytes(s);
    }
    case 2:
      return g.seq({random_expr(g, rng, depth + 1, num_rules, with_nothing),
                    random_expr(g, rng, depth + 1, num_rules, with_nothing)});
    case 3:
      return g.alt({random_expr(g, rng, depth + 1, num_rules, with_nothing),
                    random_expr(g, rng, depth + 1, num_rules, with_nothing)});
    case 4: {
      int lo = static_cast<int>(rng() % 2),
          hi = rng() % 3 == 0 ? -1 : lo + static_cast<int>(rng() % 3);
      return g.repeat(random_expr(g, rng, depth + 1, num_rules, with_nothing), lo, hi);
    }
    case 5:
      return num_rules > 0 ? g.ref(static_cast<RuleId>(rng() % num_rules)) : g.empty();
    default:
      return with_nothing && rng() % 2 == 0 ? g.nothing() : g.empty();
  }
}

// Whether some completion of at most 6 bytes makes `s` a sentence (the enumeration above only
// knows strings up to kMaxLen, so a longer valid prefix needs this second look).
bool viable(const std::shared_ptr<const CompiledGrammar>& cg, const std::string& s) {
  std::vector<std::string> frontier{s};
  for (int len = 0; len <= 6; ++len) {
    std::vector<std::string> next;
    for (auto& x : frontier) {
      GrammarMatcher m(cg);
      if (!m.accept_bytes(x)) continue;
      if (m.can_terminate()) return true;
      for (char c : std::string("abc")) {
        std::string y = x;
        y.push_back(c);
        next.push_back(y);
      }
    }
    frontier.swap(next);
  }
  return false;
}

Vocabulary abc_vocab() {
  Vocabulary v;
  v.token_bytes.push_back("<eos>");
  v.eos_id = 0;
  v.special_ids = {0};
  std::vector<std::string> all{""};
  for (int len = 1; len <= 3; ++len) {
    std::vector<std::string> next;
    for (auto& s : all)
      if (s.size() == static_cast<size_t>(len - 1))
        for (char c : std::string("abc")) {
          std::string t = s;
          t.push_back(c);
          next.push_back(t);
        }
    for (auto& s : next) v.token_bytes.push_back(s), all.push_back(s);
  }
  v.token_bytes.push_back("ad");
  return v;
}

void check_random_grammars(uint32_t seed, bool with_nothing) {
  std::mt19937 rng(seed);
  Vocabulary vocab = abc_vocab();
  auto trie = TokenTrie::build(vocab);
  for (int iter = 0; iter < 300; ++iter) {
    Grammar g;
    int nr = 1 + static_cast<int>(rng() % 3);
    for (int r = 0; r < nr; ++r) {
      std::string name = "r";
      name += std::to_string(r);
      RuleId id = g.add_rule(name);
      g.set_body(id, random_expr(g, rng, 0, r, with_nothing));  // refs only to earlier rules
    }
    g.set_root(nr - 1);
    StrSet lang = enumerate(g, g.rules()[g.root()].body);
    StrSet prefixes;
    for (auto& s : lang)
      for (size_t i = 0; i <= s.size(); ++i) prefixes.insert(s.substr(0, i));
    auto cg = CompiledGrammar::create(g, trie);
    ASSERT_TRUE(cg.has_value());
    // (1) membership of every string up to length 4.
    std::vector<std::string> all{""};
    for (size_t i = 0; i < all.size(); ++i)
      if (all[i].size() < 4)
        for (char c : std::string("abc")) {
          std::string t = all[i];
          t.push_back(c);
          all.push_back(t);
        }
    for (auto& s : all) {
      GrammarMatcher m(*cg);
      bool ok = m.accept_bytes(s) && m.can_terminate();
      ASSERT_EQ(ok, lang.count(s) > 0) << g.to_string() << "input '" << s << "'";
    }
    // (2) masks at reachable prefixes (short enough that the enumeration is exact).
    for (auto& p : prefixes) {
      if (p.size() > 2) continue;
      GrammarMatcher m(*cg);
      ASSERT_TRUE(m.accept_bytes(p));
      TokenBitmask mask;
      m.fill_next_token_bitmask(mask);
      for (size_t t = 1; t < vocab.token_bytes.size(); ++t) {
        std::string s = p + vocab.token_bytes[t];
        bool expect =
            prefixes.count(s) > 0 || (mask.test(static_cast<int32_t>(t)) && viable(*cg, s));
        ASSERT_EQ(mask.test(static_cast<int32_t>(t)), expect)
            << g.to_string() << "prefix '" << p << "' token '" << vocab.token_bytes[t] << "'";
      }
      ASSERT_EQ(mask.test(0), lang.count(p) > 0);
    }
  }
}

TEST(grammar_brute_force, RandomGrammarsMembershipAndMasks) {
  check_random_grammars(1234, false);
}

// Dead ends (`"a" []`, a call of a rule that cannot complete): no token may lead into one.
TEST(grammar_brute_force, DeadEndsArePruned) {
  check_random_grammars(4321, true);
  Vocabulary vocab = abc_vocab();
  Grammar g;
  const RuleId root = g.add_rule("root"), loop = g.add_rule("loop");
  g.set_body(loop, g.seq({g.literal("b"), g.ref(loop)}));  // never ends
  g.set_body(root, g.alt({g.seq({g.literal("a"), g.nothing()}), g.literal("ab"),
                          g.seq({g.literal("c"), g.ref(loop)})}));
  g.set_root(root);
  auto cg = CompiledGrammar::create(g, TokenTrie::build(vocab));
  ASSERT_TRUE(cg.has_value());
  GrammarMatcher m(*cg);
  TokenBitmask mask;
  m.fill_next_token_bitmask(mask);
  for (size_t t = 0; t < vocab.token_bytes.size(); ++t)
    EXPECT_EQ(mask.test(static_cast<int32_t>(t)),
              vocab.token_bytes[t] == "a" || vocab.token_bytes[t] == "ab")
        << vocab.token_bytes[t];
  EXPECT_FALSE(m.accept_bytes("c"));
  ASSERT_TRUE(m.accept_bytes("a"));
  EXPECT_EQ(m.find_jump_forward_bytes(), "b");
}

// Recursive grammar: masks against one-by-one token checks through the matcher itself.
TEST(grammar_brute_force, RecursiveGrammarMaskEqualsPerTokenCheck) {
  Vocabulary vocab = abc_vocab();
  auto trie = TokenTrie::build(vocab);
  Grammar g;
  RuleId s = g.add_rule("s");
  g.set_body(s, g.alt({g.seq({g.literal("a"), g.ref(s), g.literal("b")}), g.literal("c"),
                       g.seq({g.ref(s), g.literal("c")})}));
  g.set_root(s);
  auto cg = CompiledGrammar::create(g, trie);
  ASSERT_TRUE(cg.has_value());
  std::mt19937 rng(7);
  for (int iter = 0; iter < 50; ++iter) {
    GrammarMatcher m(*cg);
    for (int step = 0; step < 8; ++step) {
      TokenBitmask mask;
      m.fill_next_token_bitmask(mask);
      std::vector<int32_t> allowed;
      for (size_t t = 0; t < vocab.token_bytes.size(); ++t) {
        bool ok = m.accept_token(static_cast<int32_t>(t));
        if (ok) m.rollback(1), allowed.push_back(static_cast<int32_t>(t));
        ASSERT_EQ(mask.test(static_cast<int32_t>(t)), ok) << "token " << vocab.token_bytes[t];
      }
      if (allowed.empty()) break;
      int32_t pick = allowed[rng() % allowed.size()];
      if (pick == 0) break;
      ASSERT_TRUE(m.accept_token(pick));
    }
  }
}

}  // namespace
}  // namespace di::grammar
