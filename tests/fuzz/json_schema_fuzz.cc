// SPDX-License-Identifier: Apache-2.0
// Any schema text (valid JSON or not) must convert or fail with a Status, as JSON and as XML
// parameters in each style (structural tags' qwen/minimax/glm/deepseek_xml), keys in any order
// and in schema order.
#include <cstdint>
#include <string_view>

#include "grammar/compiled_grammar.h"
#include "grammar/json_schema/schema_converter.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto schema = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  for (int mode = 0; mode < 4; ++mode) {
    di::grammar::JsonSchemaOptions o;
    o.lenient = mode & 1;
    if (mode & 2) o.any_order_max_properties = 0;
    auto g = di::grammar::json_schema_to_grammar(text, o);
    if (!schema.is_discarded()) {
      // One XML style per mode (qwen, minimax, glm, deepseek).
      const auto style = static_cast<di::grammar::XmlStyle>(mode);
      auto q = di::grammar::json_schema_to_xml_parameters_grammar(schema, style, o);
      if (q) (void)di::grammar::NfaGrammar::build(*q, {.max_states = 100'000});
    }
    if (!g) continue;
    di::grammar::CompileLimits limits;
    limits.max_states = 100'000;
    (void)di::grammar::NfaGrammar::build(*g, limits);
  }
  return 0;
}
