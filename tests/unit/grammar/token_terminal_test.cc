// SPDX-License-Identifier: Apache-2.0
// Token terminals (`<[id]>`, `<text>`, `!<...>`): the EBNF front end, and the matcher against a
// brute-force matcher on random grammars that mix bytes and token terminals.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "grammar/compiler.h"
#include "grammar/ebnf/ebnf_parser.h"
#include "grammar/matcher.h"

namespace di::grammar {
namespace {

// 0 EOS, 1 "<t>" (special), 2.. text tokens, 9 padding.
Vocabulary tok_vocab() {
  Vocabulary v;
  v.token_bytes = {"<eos>", "<t>", "a", "b", "c", "ab", "bc", "abc", "ca", ""};
  v.eos_id = 0;
  v.special_ids = {0, 1};
  return v;
}

// ---- Brute-force matcher over "symbols": a byte (0-255) or a whole token read as a unit
// (256 + id). A token sequence is in the language iff one of its readings (each token as its
// bytes, when it is a text token, or as its unit symbol) is.
using Syms = std::vector<int>;

struct Brute {
  const Grammar& g;
  const Vocabulary& v;

  bool text(int id) const {
    return id != 1 && id != 0 && !v.token_bytes[static_cast<size_t>(id)].empty();
  }
  bool nonempty(ExprId id) const {
    const Expr& e = g.expr(id);
    switch (e.kind) {
      case ExprKind::kNothing:
        return false;
      case ExprKind::kBytes:
        return !e.bytes.empty();
      case ExprKind::kSeq:
        for (ExprId c : e.children)
          if (!nonempty(c)) return false;
        return true;
      case ExprKind::kAlt:
        for (ExprId c : e.children)
          if (nonempty(c)) return true;
        return false;
      case ExprKind::kRepeat:
        return e.min == 0 || nonempty(e.children[0]);
      case ExprKind::kRuleRef:
        return nonempty(g.rules()[e.rule].body);
      default:
        return true;
    }
  }
  bool unit(const Expr& e, int sym) const {
    if (e.kind == ExprKind::kBytes) return sym < 256 && e.bytes.test(static_cast<uint8_t>(sym));
    if (sym < 256) return false;
    return e.negated ? (text(sym - 256) && sym - 256 != e.token) : sym - 256 == e.token;
  }
  // End positions j with s[i..j) in L(e).
  std::set<size_t> ends(ExprId id, const Syms& s, size_t i) const {
    const Expr& e = g.expr(id);
    switch (e.kind) {
      case ExprKind::kEmpty:
        return {i};
      case ExprKind::kNothing:
      case ExprKind::kTagDispatch:  // tag_dispatch_test.cc covers these
        return {};
      case ExprKind::kBytes:
      case ExprKind::kToken:
        if (i < s.size() && unit(e, s[i])) return {i + 1};
        return {};
      case ExprKind::kRuleRef:
        return ends(g.rules()[e.rule].body, s, i);
      case ExprKind::kSeq: {
        std::set<size_t> cur{i};
        for (ExprId c : e.children) {
          std::set<size_t> next;
          for (size_t p : cur) next.merge(ends(c, s, p));
          cur.swap(next);
        }
        return cur;
      }
      case ExprKind::kAlt: {
        std::set<size_t> out;
        for (ExprId c : e.children) out.merge(ends(c, s, i));
        return out;
      }
      case ExprKind::kRepeat: {
        std::set<size_t> out, cur{i};
        const int cap = e.max < 0 ? e.min + static_cast<int>(s.size()) + 1 : e.max;
        for (int k = 0; k <= cap && !cur.empty(); ++k) {
          if (k >= e.min) out.insert(cur.begin(), cur.end());
          std::set<size_t> next;
          for (size_t p : cur) next.merge(ends(e.children[0], s, p));
          cur.swap(next);
        }
        return out;
      }
    }
    return {};
  }
  // Whether s[i..) is a prefix of some word of L(e).
  bool prefix(ExprId id, const Syms& s, size_t i) const {
    const Expr& e = g.expr(id);
    if (i == s.size()) return nonempty(id);
    switch (e.kind) {
      case ExprKind::kBytes:
      case ExprKind::kToken:
        return i + 1 == s.size() && unit(e, s[i]);
      case ExprKind::kRuleRef:
        return prefix(g.rules()[e.rule].body, s, i);
      case ExprKind::kSeq: {
        std::set<size_t> cur{i};
        for (size_t c = 0; c < e.children.size(); ++c) {
          bool rest_ok = true;
          for (size_t r = c + 1; r < e.children.size(); ++r) rest_ok &= nonempty(e.children[r]);
          for (size_t p : cur)
            if (rest_ok && prefix(e.children[c], s, p)) return true;
          std::set<size_t> next;
          for (size_t p : cur) next.merge(ends(e.children[c], s, p));
          cur.swap(next);
        }
        return cur.count(s.size()) > 0;
      }
      case ExprKind::kAlt:
        for (ExprId c : e.children)
          if (prefix(c, s, i)) return true;
        return false;
      case ExprKind::kRepeat: {
        std::set<size_t> cur{i};
        const int cap = e.max < 0 ? e.min + static_cast<int>(s.size()) + 1 : e.max;
        const bool item_ok = nonempty(e.children[0]);
        for (int k = 0; k < cap && !cur.empty(); ++k) {
          const bool more_ok = k + 1 >= e.min || item_ok;
          for (size_t p : cur)
            if (more_ok && prefix(e.children[0], s, p)) return true;
          std::set<size_t> next;
          for (size_t p : cur) next.merge(ends(e.children[0], s, p));
          cur.swap(next);
        }
        return false;
      }
      default:
        return false;
    }
  }
  // Every reading of a token sequence.
  std::vector<Syms> readings(const std::vector<int32_t>& toks) const {
    std::vector<Syms> out{{}};
    for (int32_t t : toks) {
      std::vector<Syms> next;
      for (const Syms& r : out) {
        Syms u = r;
        u.push_back(256 + t);
        next.push_back(u);
        if (!text(t)) continue;
        Syms b = r;
        for (char c : v.token_bytes[static_cast<size_t>(t)]) b.push_back(static_cast<uint8_t>(c));
        next.push_back(b);
      }
      out.swap(next);
    }
    return out;
  }
  bool viable(const std::vector<int32_t>& toks) const {
    for (const Syms& r : readings(toks))
      if (prefix(g.root() >= 0 ? g.rules()[g.root()].body : -1, r, 0)) return true;
    return false;
  }
  bool member(const std::vector<int32_t>& toks) const {
    for (const Syms& r : readings(toks))
      if (ends(g.rules()[g.root()].body, r, 0).count(r.size())) return true;
    return false;
  }
};

ExprId random_expr(Grammar& g, std::mt19937& rng, int depth, int num_rules) {
  switch (rng() % (depth > 2 ? 4 : 10)) {
    case 0:
      return g.literal(std::string(1, static_cast<char>('a' + rng() % 3)));
    case 1: {
      static const int kPos[] = {1, 2, 5, 7};
      return g.token(kPos[rng() % 4]);
    }
    case 2: {
      static const int kNeg[] = {1, 2, 5};
      return g.token(kNeg[rng() % 3], true);
    }
    case 3: {
      ByteSet s;
      s.set(static_cast<uint8_t>('a' + rng() % 3));
      s.set(static_cast<uint8_t>('a' + rng() % 3));
      return g.bytes(s);
    }
    case 4:
    case 5:
      return g.seq(
          {random_expr(g, rng, depth + 1, num_rules), random_expr(g, rng, depth + 1, num_rules)});
    case 6:
      return g.alt(
          {random_expr(g, rng, depth + 1, num_rules), random_expr(g, rng, depth + 1, num_rules)});
    case 7: {
      int lo = static_cast<int>(rng() % 2),
          hi = rng() % 3 == 0 ? -1 : lo + static_cast<int>(rng() % 3);
      return g.repeat(random_expr(g, rng, depth + 1, num_rules), lo, hi);
    }
    case 8:
      return num_rules > 0 ? g.ref(static_cast<RuleId>(rng() % num_rules)) : g.empty();
    default:  // no `nothing`: the matcher (bytes too) keeps dead ends, the oracle does not
      return g.empty();
  }
}

// Depth-first over token sequences: at every reachable state, the mask against accept_token
// one by one and against the brute-force matcher; EOS against membership.
void check_tree(GrammarMatcher& m,
                const Brute& b,
                std::vector<int32_t>& seq,
                int depth,
                const std::string& gtext) {
  TokenBitmask mask;
  m.fill_next_token_bitmask(mask);
  ASSERT_EQ(mask.test(0), b.member(seq)) << gtext << " at depth " << depth;
  ASSERT_EQ(m.can_terminate(), b.member(seq)) << gtext;
  if (auto forced = m.find_forced_token()) {
    ASSERT_EQ(mask.count(), 1u) << gtext;
    ASSERT_TRUE(mask.test(*forced)) << gtext;
  }
  for (int32_t t = 1; t < 10; ++t) {
    seq.push_back(t);
    const bool expect = b.viable(seq);
    const bool ok = m.accept_token(t);
    ASSERT_EQ(ok, expect) << gtext << " token " << t << " after " << seq.size() - 1 << " tokens";
    ASSERT_EQ(mask.test(t), ok) << gtext << " token " << t;
    if (ok) {
      if (depth < 2) check_tree(m, b, seq, depth + 1, gtext);
      const size_t n = m.num_accepted();
      m.rollback(1);
      ASSERT_EQ(m.num_accepted(), n - 1);
    }
    seq.pop_back();
  }
}

TEST(grammar_token_terminals, RandomGrammarsAgainstBruteForce) {
  std::mt19937 rng(4321);
  const Vocabulary vocab = tok_vocab();
  auto trie = TokenTrie::build(vocab);
  for (int iter = 0; iter < 250; ++iter) {
    Grammar g;
    const int nr = 1 + static_cast<int>(rng() % 3);
    for (int r = 0; r < nr; ++r) {
      std::string name = "r";
      name += std::to_string(r);  // not `"r" + ...`: GCC 12's false -Wrestrict (bug 105329)
      RuleId id = g.add_rule(name);
      g.set_body(id, random_expr(g, rng, 0, r));
    }
    g.set_root(nr - 1);
    auto cg = CompiledGrammar::create(g, trie);
    ASSERT_TRUE(cg.has_value()) << cg.status().message();
    GrammarMatcher m(*cg);
    Brute b{g, vocab};
    std::vector<int32_t> seq;
    check_tree(m, b, seq, 0, g.to_string());
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(grammar_token_terminals, EbnfReferencesResolveThroughTheVocabulary) {
  auto trie = TokenTrie::build(tok_vocab());
  auto g = parse_ebnf("root ::= <t> <[5]> !<[2]> !<t>\n", "root", trie.get());
  ASSERT_TRUE(g.has_value()) << g.status().message();
  EXPECT_NE(g->to_string().find("<[1]> <[5]> !<[2]> !<[1]>"), std::string::npos) << g->to_string();

  auto err = [&](const char* text, const TokenTrie* t) {
    auto r = parse_ebnf(text, "root", t);
    EXPECT_FALSE(r.has_value()) << text;
    return r.has_value() ? std::string() : r.status().message();
  };
  EXPECT_NE(err("root ::= <[5]>", nullptr).find("needs a vocabulary"), std::string::npos);
  EXPECT_NE(err("root ::= <think>", trie.get()).find("'<think>': no token"), std::string::npos);
  EXPECT_NE(err("root ::= <[10]>", trie.get()).find("outside the vocabulary"), std::string::npos);
  EXPECT_NE(err("root ::= <[x]>", trie.get()).find("bad id"), std::string::npos);
  EXPECT_NE(err("root ::= <t", trie.get()).find("unterminated"), std::string::npos);
  EXPECT_NE(err("root ::= ! <t>", trie.get()).find("expected '<'"), std::string::npos);

  // Ids the grammar can never produce as a unit are compile errors.
  for (const char* bad : {"root ::= <[0]>", "root ::= <[9]>"}) {
    auto gg = parse_ebnf(bad, "root", trie.get());
    ASSERT_TRUE(gg.has_value());
    EXPECT_FALSE(CompiledGrammar::create(*gg, trie).has_value()) << bad;
  }
}

// llama.cpp's thinking example: the special tokens as units, anything but `</t>` inside.
TEST(grammar_token_terminals, ThinkingBlockAndFastForward) {
  Vocabulary v = tok_vocab();
  v.token_bytes.push_back("</t>");  // 10, special
  v.special_ids.push_back(10);
  auto trie = TokenTrie::build(v);
  GrammarCompiler c(trie);
  auto cg = c.compile_ebnf("root ::= <t> think\nthink ::= (!</t>)* </t> \"ab\" \"c\"\n");
  ASSERT_TRUE(cg.has_value()) << cg.status().message();
  GrammarMatcher m(*cg);
  TokenBitmask mask;
  m.fill_next_token_bitmask(mask);
  EXPECT_EQ(mask.count(), 1u);
  EXPECT_TRUE(mask.test(1));
  EXPECT_EQ(m.find_forced_token(), std::optional<int32_t>(1));
  EXPECT_EQ(m.find_jump_forward_bytes(), "");
  ASSERT_TRUE(m.accept_token(1));
  m.fill_next_token_bitmask(mask);
  for (int32_t t : {2, 3, 4, 5, 6, 7, 8, 10}) EXPECT_TRUE(mask.test(t)) << t;
  for (int32_t t : {0, 1, 9}) EXPECT_FALSE(mask.test(t)) << t;
  EXPECT_FALSE(m.find_forced_token().has_value());
  ASSERT_TRUE(m.accept_token(7));
  ASSERT_TRUE(m.accept_token(3));
  EXPECT_FALSE(m.accept_token(1));  // a special token is not "any token but </t>"
  ASSERT_TRUE(m.accept_token(10));
  EXPECT_EQ(m.find_jump_forward_bytes(), "abc");
  ASSERT_TRUE(m.accept_token(7));
  EXPECT_TRUE(m.can_terminate());
  m.rollback(2);  // back inside the block
  m.fill_next_token_bitmask(mask);
  EXPECT_TRUE(mask.test(10));
  EXPECT_TRUE(mask.test(2));
  EXPECT_FALSE(mask.test(0));
}

// xgrammar's spellings: Token(ids) is one of the tokens, ExcludeToken(ids) one text token outside
// them (as !<[id]> for a set of ids).
TEST(grammar_token_terminals, XgrammarTokenAndExcludeTokenSpellings) {
  auto trie = TokenTrie::build(tok_vocab());
  auto same = parse_ebnf("root ::= Token(5) ExcludeToken( 2 )\n", "root", trie.get());
  ASSERT_TRUE(same.has_value()) << same.status().message();
  EXPECT_NE(same->to_string().find("<[5]> !<[2]>"), std::string::npos) << same->to_string();
  GrammarCompiler c(trie);
  auto cg = c.compile_ebnf("root ::= Token(5, 1,) ExcludeToken(3, 2, 3) Token(7)\n");
  ASSERT_TRUE(cg.has_value()) << cg.status().message();
  GrammarMatcher m(*cg);
  TokenBitmask mask;
  m.fill_next_token_bitmask(mask);
  EXPECT_EQ(mask.count(), 2u);
  EXPECT_TRUE(mask.test(1) && mask.test(5));
  ASSERT_TRUE(m.accept_token(1));
  m.fill_next_token_bitmask(mask);
  for (int32_t t : {4, 5, 6, 7, 8}) EXPECT_TRUE(mask.test(t)) << t;
  for (int32_t t : {0, 1, 2, 3, 9}) EXPECT_FALSE(mask.test(t)) << t;
  EXPECT_FALSE(m.accept_token(2));
  ASSERT_TRUE(m.accept_token(8));
  EXPECT_FALSE(m.can_terminate());
  EXPECT_FALSE(m.accept_token(5));
  ASSERT_TRUE(m.accept_token(7));
  EXPECT_TRUE(m.can_terminate());

  // Only a following '(' makes a call: a rule may be named Token.
  EXPECT_TRUE(parse_ebnf("root ::= Token\nToken ::= \"a\"\n", "root", trie.get()).has_value());
  auto err = [&](const char* text, const TokenTrie* t) {
    auto r = parse_ebnf(text, "root", t);
    EXPECT_FALSE(r.has_value()) << text;
    return r.has_value() ? std::string() : r.status().message();
  };
  EXPECT_NE(err("root ::= Token()", trie.get()).find("Token() arguments must be non-negative"),
            std::string::npos);
  EXPECT_NE(err("root ::= ExcludeToken(-1)", trie.get()).find("ExcludeToken() arguments"),
            std::string::npos);
  EXPECT_NE(err("root ::= Token(\"a\")", trie.get()).find("non-negative integer token ids"),
            std::string::npos);
  EXPECT_NE(err("root ::= Token(10)", trie.get()).find("outside the vocabulary"),
            std::string::npos);
  EXPECT_NE(err("root ::= Token(1 2)", trie.get()).find("expected ',' or ')' in Token(...)"),
            std::string::npos);
  EXPECT_NE(err("root ::= Token(1)", nullptr).find("needs a vocabulary"), std::string::npos);
}

TEST(grammar_token_terminals, CacheKeyNamesTheVocabulary) {
  Vocabulary a = tok_vocab(), b = tok_vocab();
  b.token_bytes[1] = "<u>";
  auto ta = TokenTrie::build(a), tb = TokenTrie::build(b);
  EXPECT_NE(ta->fingerprint(), tb->fingerprint());
  EXPECT_EQ(ta->fingerprint(), TokenTrie::build(tok_vocab())->fingerprint());
  GrammarCompiler ca(ta), cb(tb);
  EXPECT_TRUE(ca.compile_ebnf("root ::= <t>").has_value());
  EXPECT_FALSE(cb.compile_ebnf("root ::= <t>").has_value());
}

}  // namespace
}  // namespace di::grammar
