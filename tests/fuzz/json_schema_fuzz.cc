// SPDX-License-Identifier: Apache-2.0
// Any schema text (valid JSON or not) must convert or fail with a Status.
#include <cstdint>
#include <string_view>

#include "grammar/compiled_grammar.h"
#include "grammar/json_schema/schema_converter.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  for (bool lenient : {false, true}) {
    di::grammar::JsonSchemaOptions o;
    o.lenient = lenient;
    auto g = di::grammar::json_schema_to_grammar(text, o);
    if (!g) continue;
    di::grammar::CompileLimits limits;
    limits.max_states = 100'000;
    (void)di::grammar::NfaGrammar::build(*g, limits);
  }
  return 0;
}
