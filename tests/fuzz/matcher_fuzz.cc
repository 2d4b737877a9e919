// SPDX-License-Identifier: Apache-2.0
// Input = EBNF grammar, '\0', then a walk: each byte is read as text, or else as the token with
// that id (token terminals: `<[id]>`, `<t>`, `!<...>`). Checks the cached token mask against
// accepting each token one by one, at every step of the walk.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "grammar/ebnf/ebnf_parser.h"
#include "grammar/matcher.h"

namespace {

di::grammar::Vocabulary make_vocab() {
  di::grammar::Vocabulary v;
  v.token_bytes = {"<eos>"};
  v.eos_id = 0;
  v.special_ids = {0, 128};
  for (int b = 1; b < 128; ++b) v.token_bytes.push_back(std::string(1, static_cast<char>(b)));
  v.token_bytes.push_back("<t>");  // 128, special: only a token terminal allows it
  for (const char* s : {"ab", "abc", "\"a", "\",", "{\"", "12", "  ", "a\"", "ba", "\xC3\xA9"})
    v.token_bytes.push_back(s);
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto trie = di::grammar::TokenTrie::build(make_vocab());
  std::string_view in(reinterpret_cast<const char*>(data), size);
  size_t split = in.find('\0');
  if (split == std::string_view::npos) return 0;
  auto g = di::grammar::parse_ebnf(in.substr(0, split), "root", trie.get());
  if (!g) return 0;
  di::grammar::CompileLimits limits;
  limits.max_states = 20'000;
  auto cg = di::grammar::CompiledGrammar::create(*g, trie, limits);
  if (!cg) return 0;
  di::grammar::GrammarMatcher m(*cg);
  di::grammar::TokenBitmask mask;
  for (char c : in.substr(split + 1)) {
    m.fill_next_token_bitmask(mask);
    for (size_t t = 0; t < trie->vocab_size(); ++t) {
      bool ok = m.accept_token(static_cast<int32_t>(t));
      if (ok) m.rollback(1);
      if (ok != mask.test(static_cast<int32_t>(t))) std::abort();
    }
    if (!m.accept_bytes(std::string_view(&c, 1)) &&
        !m.accept_token(static_cast<uint8_t>(c) % static_cast<int32_t>(trie->vocab_size())))
      break;
  }
  return 0;
}
