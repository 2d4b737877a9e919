// SPDX-License-Identifier: Apache-2.0
// Any text must parse or fail with a Status, as EBNF and as Lark (lark_parser.h); never crash,
// hang or abort. A small vocabulary lets token terminals (`<[id]>`, `<t>`, `!<...>`) resolve
// and compile.
// Run: build-fuzz/tests/fuzz/ebnf_fuzz -dict=tests/fuzz/ebnf.dict -max_total_time=60
#include <cstdint>
#include <string_view>

#include "grammar/compiled_grammar.h"
#include "grammar/ebnf/ebnf_parser.h"
#include "grammar/lark/lark_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto trie = [] {
    di::grammar::Vocabulary v;
    v.token_bytes = {"<eos>", "<t>", "</t>", "a", "ab", ""};
    v.special_ids = {0, 1, 2};
    v.eos_id = 0;
    return di::grammar::TokenTrie::build(v);
  }();
  std::string_view text(reinterpret_cast<const char*>(data), size);
  di::grammar::CompileLimits limits;
  limits.max_states = 100'000;
  auto g = di::grammar::parse_ebnf(text, "root", size % 2 ? trie.get() : nullptr);
  if (g) (void)di::grammar::CompiledGrammar::create(*g, trie, limits);
  auto l = di::grammar::parse_lark(text);
  if (l) (void)di::grammar::NfaGrammar::build(*l, limits);
  return 0;
}
