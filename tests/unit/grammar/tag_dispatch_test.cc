// SPDX-License-Identifier: Apache-2.0
// TagDispatch (ir.h) against a brute-force reference of its definition, on random small cases
// over {a,b,c} (with stop strings, excludes and stop_eos=false): membership of every string up
// to 6 bytes, the token mask (tokens of 1-4 bytes, so tokens span triggers and what follows
// them) at every viable prefix up to 3 bytes, EOS, rollback, and forced bytes.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "grammar/ebnf/ebnf_parser.h"
#include "grammar/matcher.h"

namespace di::grammar {
namespace {

struct Case {
  std::vector<std::string> triggers;
  std::vector<std::vector<std::string>> after;  // per trigger: the strings that may follow it
  bool loop = true, at_least_one = false;
  std::vector<std::string> stops = {}, excludes = {};
  bool stop_eos = true;
};

// The definition, run directly: free text until some trigger, stop string or exclude is a
// suffix of the text since the last reset; the longest such string decides (ties: trigger, stop,
// exclude): a trigger dispatches to one of its strings, then free text again (loop) or the end
// (once; with stop strings, one of them first); a stop string ends the text (not before the
// first dispatch with at_least_one); an exclude is a dead end.
class Reference {
 public:
  explicit Reference(const Case& c) : c_(c) {}

  // (kind, text since reset or candidate index, bytes of the candidate consumed, trigger, phase)
  struct Config {
    int kind;  // 0 free, 1 in a dispatch, 2 done, 3 in the stop string `cand` after a dispatch
    std::string buf;
    int trigger = -1, cand = -1, k = 0, phase = 0;
    auto key() const { return std::tie(kind, buf, trigger, cand, k, phase); }
    bool operator<(const Config& o) const { return key() < o.key(); }
  };

  std::set<Config> run(const std::string& s) const {
    std::set<Config> cur{Config{0, "", -1, -1, 0, 0}};
    for (char ch : s) {
      std::set<Config> next;
      for (const Config& x : cur) step(x, ch, next);
      cur.swap(next);
    }
    return cur;
  }
  // A prefix of some complete text (stop_eos=false and excludes make dead ends possible).
  // Configurations are finite once the free-text buffer keeps only what a match can still use;
  // 'd' stands for every byte outside the strings' alphabet.
  bool viable(const std::string& s) const {
    std::set<Config> seen, todo;
    for (const Config& x : run(s)) todo.insert(x);
    while (!todo.empty()) {
      const Config x = *todo.begin();
      todo.erase(todo.begin());
      if (!seen.insert(x).second) continue;
      if (done(x)) return true;
      std::set<Config> next;
      for (char ch : std::string("abcd")) step(x, ch, next);
      for (const Config& y : next)
        if (!seen.count(y)) todo.insert(y);
    }
    return false;
  }
  bool complete(const std::string& s) const {
    for (const Config& x : run(s))
      if (done(x)) return true;
    return false;
  }

 private:
  bool may_end(int phase) const { return !c_.at_least_one || phase > 0; }
  bool done(const Config& x) const {
    return x.kind == 2 || (x.kind == 0 && c_.stop_eos && may_end(x.phase));
  }
  void after_dispatch(int phase, std::set<Config>& out) const {
    phase = std::min(phase, 1);  // only "a dispatch happened" matters
    if (c_.loop) {
      out.insert(Config{0, "", -1, -1, 0, phase});
    } else if (c_.stops.empty()) {
      out.insert(Config{2, "", -1, -1, 0, phase});
    } else {
      for (size_t i = 0; i < c_.stops.size(); ++i)
        out.insert(Config{3, "", -1, static_cast<int>(i), 0, phase});
    }
  }
  void enter(int t, int phase, std::set<Config>& out) const {
    for (size_t i = 0; i < c_.after[t].size(); ++i) {
      if (c_.after[t][i].empty())
        after_dispatch(phase + 1, out);
      else
        out.insert(Config{1, "", t, static_cast<int>(i), 0, phase});
    }
  }
  void step(const Config& x, char ch, std::set<Config>& out) const {
    if (x.kind == 0) {
      const std::string buf = x.buf + ch;
      std::vector<std::string> all = c_.triggers;
      all.insert(all.end(), c_.stops.begin(), c_.stops.end());
      all.insert(all.end(), c_.excludes.begin(), c_.excludes.end());
      int best = -1;
      for (size_t t = 0; t < all.size(); ++t) {
        const std::string& tr = all[t];
        if (buf.size() >= tr.size() && buf.compare(buf.size() - tr.size(), tr.size(), tr) == 0 &&
            (best < 0 || tr.size() > all[best].size()))
          best = static_cast<int>(t);
      }
      const auto n_trig = static_cast<int>(c_.triggers.size());
      if (best < 0)  // strings are at most 3 bytes: 2 of history decide every later match
        out.insert(
            Config{0, buf.size() > 2 ? buf.substr(buf.size() - 2) : buf, -1, -1, 0, x.phase});
      else if (best < n_trig)
        enter(best, x.phase, out);
      else if (best < n_trig + static_cast<int>(c_.stops.size()) && may_end(x.phase))
        out.insert(Config{2, "", -1, -1, 0, x.phase});
    } else if (x.kind == 3) {
      const std::string& stop = c_.stops[x.cand];
      if (stop[x.k] != ch) return;
      if (static_cast<size_t>(x.k) + 1 == stop.size())
        out.insert(Config{2, "", -1, -1, 0, x.phase});
      else
        out.insert(Config{3, "", -1, x.cand, x.k + 1, x.phase});
    } else if (x.kind == 1) {
      const std::string& cand = c_.after[x.trigger][x.cand];
      if (cand[x.k] != ch) return;
      if (static_cast<size_t>(x.k) + 1 == cand.size())
        after_dispatch(x.phase + 1, out);
      else
        out.insert(Config{1, "", x.trigger, x.cand, x.k + 1, x.phase});
    }
  }
  const Case& c_;
};

std::string random_word(std::mt19937& rng, size_t lo, size_t hi) {
  std::string s(lo + rng() % (hi - lo + 1), 'a');
  for (char& ch : s) ch = static_cast<char>('a' + rng() % 3);
  return s;
}

Grammar grammar_of(const Case& c) {
  Grammar g;
  const RuleId root = g.add_rule("root");
  TagDispatchSpec spec;
  for (size_t t = 0; t < c.triggers.size(); ++t) {
    const RuleId r = g.add_rule("after" + std::to_string(t));
    std::vector<ExprId> alts;
    for (const std::string& s : c.after[t]) alts.push_back(g.literal(s));
    g.set_body(r, g.alt(std::move(alts)));
    spec.triggers.push_back(c.triggers[t]);
    spec.rules.push_back(r);
  }
  spec.loop = c.loop;
  spec.at_least_one = c.at_least_one;
  spec.stops = c.stops;
  spec.excludes = c.excludes;
  spec.stop_eos = c.stop_eos;
  g.set_body(root, g.tag_dispatch(std::move(spec)));
  g.set_root(root);
  return g;
}

std::vector<std::string> all_words(size_t max_len) {
  std::vector<std::string> all{""};
  for (size_t i = 0; i < all.size(); ++i)
    if (all[i].size() < max_len)
      for (char ch : std::string("abc")) all.push_back(all[i] + ch);
  return all;
}

Vocabulary abc_vocab() {
  Vocabulary v;
  v.token_bytes.push_back("<eos>");
  v.eos_id = 0;
  v.special_ids = {0};
  for (const std::string& w : all_words(4))
    if (!w.empty()) v.token_bytes.push_back(w);
  return v;
}

std::string describe(const Case& c) {
  std::string s = "triggers";
  for (size_t t = 0; t < c.triggers.size(); ++t) {
    s += " '" + c.triggers[t] + "' ->";
    for (auto& a : c.after[t]) s += " '" + a + "'";
  }
  for (auto& x : c.stops) s += " stop '" + x + "'";
  for (auto& x : c.excludes) s += " exclude '" + x + "'";
  return s + (c.loop ? " loop" : " once") + (c.at_least_one ? " at_least_one" : "") +
         (c.stop_eos ? "" : " stop_eos=false");
}

TEST(grammar_tag_dispatch, RandomCasesAgainstReference) {
  std::mt19937 rng(20261130);
  const Vocabulary vocab = abc_vocab();
  auto trie = TokenTrie::build(vocab);
  const std::vector<std::string> words6 = all_words(6), words3 = all_words(3);
  for (int iter = 0; iter < 240; ++iter) {
    Case c;
    const size_t nt = 1 + rng() % 3;
    while (c.triggers.size() < nt) {
      std::string t = random_word(rng, 1, 3);
      if (std::find(c.triggers.begin(), c.triggers.end(), t) == c.triggers.end())
        c.triggers.push_back(t);
    }
    for (size_t t = 0; t < nt; ++t) {
      c.after.emplace_back();
      const size_t na = 1 + rng() % 2;
      for (size_t i = 0; i < na; ++i) c.after.back().push_back(random_word(rng, 0, 2));
    }
    c.loop = rng() % 3 != 0;
    c.at_least_one = rng() % 3 == 0;
    // Stop strings and excludes in 2 of 3 cases, distinct from every other string.
    auto fresh = [&](size_t lo, size_t hi) {
      for (;;) {
        std::string w = random_word(rng, lo, hi);
        auto in = [&](const std::vector<std::string>& v) {
          return std::find(v.begin(), v.end(), w) != v.end();
        };
        if (!in(c.triggers) && !in(c.stops) && !in(c.excludes)) return w;
      }
    };
    if (iter % 3 != 0) {
      for (size_t i = rng() % 2; i > 0; --i) c.stops.push_back(fresh(1, 3));
      for (size_t i = rng() % 3; i > 0; --i) c.excludes.push_back(fresh(2, 3));
      c.stop_eos = c.stops.empty() || rng() % 2 == 0;
    }
    const Reference ref(c);
    auto cg = CompiledGrammar::create(grammar_of(c), trie);
    ASSERT_TRUE(cg.has_value()) << cg.status().message();
    for (const std::string& s : words6) {
      GrammarMatcher m(*cg);
      const bool ok = m.accept_bytes(s);
      // The empty prefix is always accepted, even where the language is empty.
      ASSERT_EQ(ok, s.empty() || ref.viable(s)) << describe(c) << " prefix '" << s << "'";
      ASSERT_EQ(ok && m.can_terminate(), ref.complete(s)) << describe(c) << " input '" << s << "'";
    }
    for (const std::string& p : words3) {
      if (!ref.viable(p)) continue;
      GrammarMatcher m(*cg);
      ASSERT_TRUE(m.accept_bytes(p));
      TokenBitmask mask;
      m.fill_next_token_bitmask(mask);
      ASSERT_EQ(mask.test(0), ref.complete(p)) << describe(c) << " EOS after '" << p << "'";
      for (size_t t = 1; t < vocab.token_bytes.size(); ++t) {
        const bool expect = ref.viable(p + vocab.token_bytes[t]);
        ASSERT_EQ(mask.test(static_cast<int32_t>(t)), expect)
            << describe(c) << " prefix '" << p << "' token '" << vocab.token_bytes[t] << "'";
        // accept_token agrees with the mask.
        GrammarMatcher m2(*cg);
        ASSERT_TRUE(m2.accept_bytes(p));
        ASSERT_EQ(m2.accept_token(static_cast<int32_t>(t)), expect);
      }
    }
  }
}

// Token sequences with rollback: the mask after rolling back equals a fresh matcher's.
TEST(grammar_tag_dispatch, RollbackRestoresMasks) {
  std::mt19937 rng(5);
  const Vocabulary vocab = abc_vocab();
  auto trie = TokenTrie::build(vocab);
  Case c{{"ab", "b"}, {{"cc", "a"}, {"c"}}, true, false};
  auto cg = CompiledGrammar::create(grammar_of(c), trie);
  ASSERT_TRUE(cg.has_value());
  for (int iter = 0; iter < 40; ++iter) {
    GrammarMatcher m(*cg);
    std::vector<int32_t> accepted;
    for (int k = 0; k < 8; ++k) {
      TokenBitmask mask;
      m.fill_next_token_bitmask(mask);
      std::vector<int32_t> allowed;
      for (size_t t = 1; t < vocab.token_bytes.size(); ++t)
        if (mask.test(static_cast<int32_t>(t))) allowed.push_back(static_cast<int32_t>(t));
      ASSERT_FALSE(allowed.empty());
      const int32_t t = allowed[rng() % allowed.size()];
      ASSERT_TRUE(m.accept_token(t));
      accepted.push_back(t);
    }
    const size_t n = 1 + rng() % accepted.size();
    m.rollback(n);
    GrammarMatcher fresh(*cg);
    for (size_t i = 0; i + n < accepted.size(); ++i) ASSERT_TRUE(fresh.accept_token(accepted[i]));
    TokenBitmask a, b;
    m.fill_next_token_bitmask(a);
    fresh.fill_next_token_bitmask(b);
    for (size_t t = 0; t < vocab.token_bytes.size(); ++t)
      ASSERT_EQ(a.test(static_cast<int32_t>(t)), b.test(static_cast<int32_t>(t)));
  }
}

TEST(grammar_tag_dispatch, ForcedBytesAfterATrigger) {
  const Vocabulary vocab = abc_vocab();
  auto trie = TokenTrie::build(vocab);
  auto cg = CompiledGrammar::create(grammar_of(Case{{"ab"}, {{"ccab"}}, true, false}), trie);
  ASSERT_TRUE(cg.has_value());
  GrammarMatcher m(*cg);
  EXPECT_EQ(m.find_jump_forward_bytes(), "");  // free text: nothing forced
  ASSERT_TRUE(m.accept_bytes("cab"));
  EXPECT_EQ(m.find_jump_forward_bytes(), "ccab");  // the trigger's continuation
  ASSERT_TRUE(m.accept_bytes("ccab"));
  EXPECT_EQ(m.find_jump_forward_bytes(), "");  // free again (the automaton restarted)
  EXPECT_TRUE(m.can_terminate());
}

// xgrammar's EBNF spelling: the same construct, its options, and the ones refused.
TEST(grammar_tag_dispatch, EbnfMacro) {
  const Vocabulary vocab = abc_vocab();
  auto g = parse_ebnf(R"(root ::= TagDispatch(("ab", x), ("c", y), stop_eos=true,
                              loop_after_dispatch=false, excludes=())
                         x ::= "cc"
                         y ::= "a")");
  ASSERT_TRUE(g.has_value()) << g.status().message();
  auto cg = CompiledGrammar::create(*g, TokenTrie::build(vocab));
  ASSERT_TRUE(cg.has_value());
  auto full = [&](const std::string& s) {
    GrammarMatcher m(*cg);
    return m.accept_bytes(s) && m.can_terminate();
  };
  EXPECT_TRUE(
      full("aab"
           "cc"));
  EXPECT_TRUE(full("bbca"));
  EXPECT_FALSE(
      full("abcc"
           "b"));  // loop_after_dispatch=false: the end after one dispatch
  EXPECT_FALSE(full("abc"));
  // stop_eos=false with stop strings and excludes: the text ends only by a stop string.
  auto stops = parse_ebnf(R"(root ::= TagDispatch(("a", r), stop_eos=false, stop_str=("cc", "bb"),
                              excludes=("cb"))
                             r ::= "b")");
  ASSERT_TRUE(stops.has_value()) << stops.status().message();
  auto scg = CompiledGrammar::create(*stops, TokenTrie::build(vocab));
  ASSERT_TRUE(scg.has_value());
  auto sfull = [&](const std::string& s) {
    GrammarMatcher m(*scg);
    return m.accept_bytes(s) && m.can_terminate();
  };
  EXPECT_TRUE(sfull("cc"));
  EXPECT_TRUE(sfull("abbcc"));
  EXPECT_TRUE(sfull("bb"));
  EXPECT_FALSE(sfull("ab"));    // no stop string yet
  EXPECT_FALSE(sfull("cbcc"));  // excluded
  EXPECT_FALSE(sfull("ccab"));  // nothing after the stop string
  EXPECT_NE(stops->to_string().find("stop_str=(\"cc\", \"bb\")"), std::string::npos);
  auto bad = parse_ebnf(R"(root ::= TagDispatch(("a", r), stop_after=1)
                           r ::= "b")");
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(bad.status().message().find("option 'stop_after'"), std::string::npos);
  EXPECT_FALSE(parse_ebnf(R"(root ::= TagDispatch(("", r))
                             r ::= "b")")
                   .has_value());
}

}  // namespace
}  // namespace di::grammar
