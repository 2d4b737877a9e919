// Python-compatible JSON serialization (see py_json.h).
#include "recipe/chat/py_json.h"

#include <cstdio>

namespace di::recipe {
namespace {

void append_quoted(std::string& out, std::string_view s) {
  out += '"';
  for (const char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

void append_value(std::string& out, const nlohmann::ordered_json& v) {
  using T = nlohmann::ordered_json::value_t;
  switch (v.type()) {
    case T::object: {
      out += '{';
      bool first = true;
      for (const auto& [key, item] : v.items()) {
        if (!first) out += ", ";
        first = false;
        append_quoted(out, key);
        out += ": ";
        append_value(out, item);
      }
      out += '}';
      return;
    }
    case T::array: {
      out += '[';
      for (size_t i = 0; i < v.size(); ++i) {
        if (i) out += ", ";
        append_value(out, v[i]);
      }
      out += ']';
      return;
    }
    case T::string:
      append_quoted(out, v.get_ref<const std::string&>());
      return;
    case T::boolean:
      out += v.get<bool>() ? "true" : "false";
      return;
    case T::null:
    case T::discarded:
      out += "null";
      return;
    case T::number_float: {
      const double d = v.get<double>();
      if (d != d) {
        out += "NaN";
      } else if (d == d + 1 && d != 0) {  // +-inf
        out += d > 0 ? "Infinity" : "-Infinity";
      } else {
        out += v.dump();  // shortest round-trip form, like Python's repr ("1.0", "1e-05")
      }
      return;
    }
    default:
      out += v.dump();
      return;  // integers
  }
}

}  // namespace

std::string py_json_dumps(const nlohmann::ordered_json& value) {
  std::string out;
  append_value(out, value);
  return out;
}

std::string py_json_quote(std::string_view s) {
  std::string out;
  append_quoted(out, s);
  return out;
}

}  // namespace di::recipe
