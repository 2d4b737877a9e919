// SPDX-License-Identifier: Apache-2.0
// Any pattern must compile or fail with a Status, in both raw and JSON-string modes.
#include <cstdint>
#include <string_view>

#include "grammar/compiled_grammar.h"
#include "grammar/regex/regex_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  for (bool json : {false, true}) {
    di::grammar::RegexOptions o;
    o.json_string = json;
    o.search = json;
    auto g = di::grammar::regex_to_grammar(text, o);
    if (!g) continue;
    di::grammar::CompileLimits limits;
    limits.max_states = 100'000;
    (void)di::grammar::NfaGrammar::build(*g, limits);
  }
  return 0;
}
