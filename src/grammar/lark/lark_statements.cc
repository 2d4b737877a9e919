// SPDX-License-Identifier: Apache-2.0
#include "grammar/lark/lark_statements.h"

#include <cctype>

namespace di::grammar::lark {

[[noreturn]] void fail(int line, const std::string& what) {
  throw LarkError("lark: line " + std::to_string(line) + ": " + what);
}

bool terminal_name(std::string_view n) {
  size_t i = 0;
  while (i < n.size() && n[i] == '_') ++i;
  return i < n.size() && std::isupper(static_cast<unsigned char>(n[i]));
}

bool name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

std::vector<Statement> split(std::string_view text) {
  std::vector<Statement> out;
  std::string cur;
  int line = 1, start = 1, depth = 0;
  auto flush = [&] {
    size_t b = cur.find_first_not_of(" \t\r");
    if (b != std::string::npos) {
      if (cur[b] == '|' && !out.empty()) {
        out.back().text += " " + cur.substr(b);
      } else {
        out.push_back(Statement{cur.substr(b), start});
      }
    }
    cur.clear();
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '"' || (c == '/' && (i + 1 >= text.size() || text[i + 1] != '/'))) {
      const size_t open = i;  // a string or a regex: copied as is
      cur += c;
      for (++i; i < text.size() && text[i] != c; ++i) {
        if (text[i] == '\n')
          fail(line, "unterminated " + std::string(c == '"' ? "string" : "regex"));
        if (text[i] == '\\' && i + 1 < text.size()) cur += text[i++];
        cur += text[i];
      }
      if (i >= text.size()) fail(line, "unterminated literal at offset " + std::to_string(open));
      cur += c;
      continue;
    }
    if (c == '/') {  // `//` comment
      while (i + 1 < text.size() && text[i + 1] != '\n') ++i;
      continue;
    }
    if (c == '(' || c == '[') ++depth;
    if (c == ')' || c == ']') --depth;
    if (c == '\n') {
      ++line;
      if (depth > 0) {
        cur += ' ';
        continue;
      }
      flush();
      start = line;
      continue;
    }
    if (cur.empty()) start = line;
    cur += c;
  }
  flush();
  return out;
}

}  // namespace di::grammar::lark
