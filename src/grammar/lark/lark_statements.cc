// SPDX-License-Identifier: Apache-2.0
#include "grammar/lark/lark_statements.h"

#include <algorithm>
#include <cctype>

#include "grammar/lark/lark_common.h"
#include "grammar/utf8.h"

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

std::string string_literal(const std::string& text, size_t& pos, int line) {
  std::string out;
  for (++pos; pos < text.size() && text[pos] != '"'; ++pos) {
    char ch = text[pos];
    if (ch == '\\' && pos + 1 < text.size()) {
      const char e = text[++pos];
      // Python's escapes (a table, since "\0" would end a C string literal early).
      static constexpr std::string_view kFrom = "nrtfv0\\\"'";
      static constexpr char kTo[] = {'\n', '\r', '\t', '\f', '\v', '\0', '\\', '"', '\''};
      if (auto k = kFrom.find(e); k != std::string_view::npos) {
        out += kTo[k];
      } else if (e == 'x' || e == 'u') {
        const size_t n = e == 'x' ? 2 : 4;
        const std::string hex = text.substr(pos + 1, n);
        if (hex.size() != n || hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
          fail(line, "bad \\" + std::string(1, e) + " escape");
        append_utf8(static_cast<uint32_t>(std::stoul(hex, nullptr, 16)), out);
        pos += n;
      } else {
        out += '\\';  // as Python keeps unknown escapes
        out += e;
      }
      continue;
    }
    out += ch;
  }
  ++pos;
  if (pos < text.size() && text[pos] == 'i')
    fail(line, "case-insensitive strings (\"...\"i) are not supported");
  return out;
}

std::optional<Modifier> modifier(const Statement& s) {
  for (const char* kw : {"%override", "%extend"}) {
    const std::string k = kw;
    if (s.text.rfind(k, 0) != 0 || (s.text.size() > k.size() && s.text[k.size()] != ' ')) continue;
    Modifier m{k == "%override", Statement{s.text.substr(k.size()), s.line}};
    m.def.text.erase(0, std::min(m.def.text.size(), m.def.text.find_first_not_of(' ')));
    if (m.def.text.empty() || m.def.text.find(':') == std::string::npos)
      fail(s.line, k + " needs a definition ('" + k + " name: ...')");
    return m;
  }
  return std::nullopt;
}

std::string defined_name(const Statement& s) {
  size_t b = s.text[0] == '?' || s.text[0] == '!' ? 1 : 0, e = b;
  while (e < s.text.size() && name_char(s.text[e])) ++e;
  return s.text.substr(b, e - b);
}

std::string regex_literal(const std::string& text, size_t& pos, int line) {
  std::string pattern;
  for (++pos; pos < text.size() && text[pos] != '/'; ++pos) {
    if (text[pos] == '\\' && pos + 1 < text.size() && text[pos + 1] == '/')
      ++pos;
    else if (text[pos] == '\\' && pos + 1 < text.size())
      pattern += text[pos++];
    pattern += text[pos];
  }
  ++pos;
  if (pos < text.size() && std::isalpha(static_cast<unsigned char>(text[pos])))
    fail(line, std::string("regex flags (/.../") + text[pos] + ") are not supported");
  return pattern;
}

std::string common_line(const std::string& name) {
  for (const Statement& s : split(kLarkCommon))
    if (s.text.rfind(name + ":", 0) == 0) return s.text;
  return {};
}

void directive(const Statement& s,
               std::vector<Statement>& ignores,
               std::set<std::string>& imported,
               const std::function<bool(const std::string&)>& is_common) {
  const std::string& t = s.text;
  if (t.rfind("%ignore", 0) == 0) {
    ignores.push_back(Statement{t.substr(7), s.line});
    return;
  }
  if (t.rfind("%declare", 0) == 0)
    fail(s.line,
         "'%declare' is not supported: declared terminals come from a post-lexer (such as "
         "Lark's Indenter), and no text spells them, so a byte-level grammar cannot match them");
  if (t.rfind("%import", 0) != 0) {
    fail(s.line, "'" + t.substr(0, t.find(' ')) +
                     "' is not supported (only %import common, %ignore, %override, %extend)");
  }
  std::string rest = t.substr(7);
  rest.erase(0, rest.find_first_not_of(' '));
  std::vector<std::string> names;
  if (rest.rfind("common.", 0) == 0) {
    names.push_back(rest.substr(7));
  } else if (rest.rfind("common", 0) == 0 && rest.find('(') != std::string::npos) {
    std::string list = rest.substr(rest.find('(') + 1);
    list = list.substr(0, list.find(')'));
    std::string cur;
    for (char c : list + ",") {
      if (c == ',') {
        if (!cur.empty()) names.push_back(cur);
        cur.clear();
      } else if (c != ' ') {
        cur += c;
      }
    }
  } else {
    fail(s.line, "'%import " + rest + "' is not supported (only %import common.NAME)");
  }
  for (std::string n : names) {
    while (!n.empty() && n.back() == ' ') n.pop_back();
    if (n.find("->") != std::string::npos || n.find(' ') != std::string::npos)
      fail(s.line, "import aliases are not supported");
    if (!is_common(n)) fail(s.line, "common." + n + " is not among the supported common terminals");
    imported.insert(n);
  }
}

}  // namespace di::grammar::lark
