// SPDX-License-Identifier: Apache-2.0
// Any text must parse or fail with a Status; never crash, hang or abort.
#include <cstdint>
#include <string_view>

#include "grammar/compiled_grammar.h"
#include "grammar/ebnf/ebnf_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto g = di::grammar::parse_ebnf(text);
  if (g) {
    di::grammar::CompileLimits limits;
    limits.max_states = 100'000;
    (void)di::grammar::NfaGrammar::build(*g, limits);
  }
  return 0;
}
