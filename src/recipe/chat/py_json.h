// JSON text exactly as Python's json.dumps(value, ensure_ascii=False) writes it (", " and ": "
// separators, non-ASCII kept as UTF-8, key order as given). The DeepSeek reference encoders
// render tool schemas and non-string tool arguments this way, so the prompt bytes depend on it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace di::recipe {

std::string py_json_dumps(const nlohmann::ordered_json& value);
// A JSON string literal for `s` (quotes included), escaped as json.dumps(ensure_ascii=False) does.
std::string py_json_quote(std::string_view s);

}  // namespace di::recipe
