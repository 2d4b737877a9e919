// SPDX-License-Identifier: Apache-2.0
#include "grammar/ebnf/tag_dispatch_args.h"

#include <cctype>

namespace di::grammar {

TagDispatchArgs read_tag_dispatch_args(EbnfCursor& c) {
  TagDispatchArgs a;
  auto peek = [&] { return c.pos < c.text.size() ? c.text[c.pos] : '\0'; };
  auto expect = [&](char ch) {
    c.skip_space();
    if (peek() != ch)
      c.fail(std::string("expected '") + ch + "' in TagDispatch", StatusCode::kInvalidArgument);
    ++c.pos;
    c.skip_space();
  };
  for (;;) {
    c.skip_space();
    if (peek() == '(') {
      expect('(');
      a.triggers.push_back(c.read_string());
      if (a.triggers.back().empty())
        c.fail("empty TagDispatch trigger", StatusCode::kInvalidArgument);
      expect(',');
      a.rules.push_back(c.read_name());
      expect(')');
    } else {  // name=true|false or name=("s", ...)
      std::string opt;
      while (c.pos < c.text.size() &&
             (std::isalnum(static_cast<unsigned char>(peek())) != 0 || peek() == '_'))
        opt += c.text[c.pos++];
      expect('=');
      if (opt == "stop_str" || opt == "excludes") {
        std::vector<std::string>& list = opt == "stop_str" ? a.stops : a.excludes;
        expect('(');
        while (peek() == '"') {
          list.push_back(c.read_string());
          if (list.back().empty())
            c.fail("empty string in TagDispatch " + opt, StatusCode::kInvalidArgument);
          c.skip_space();
          if (peek() != ',') break;
          expect(',');
        }
        if (peek() != ')')
          c.fail("expected ')' after TagDispatch " + opt, StatusCode::kInvalidArgument);
        ++c.pos;
      } else if (opt == "loop_after_dispatch" || opt == "stop_eos") {
        const bool value = c.text.substr(c.pos, 4) == "true";
        if (!value && c.text.substr(c.pos, 5) != "false")
          c.fail("TagDispatch option " + opt + " must be true or false",
                 StatusCode::kInvalidArgument);
        c.pos += value ? 4 : 5;
        (opt == "stop_eos" ? a.stop_eos : a.loop) = value;
      } else {
        c.fail("TagDispatch option '" + opt + "' is not supported", StatusCode::kUnimplemented);
      }
    }
    c.skip_space();
    if (peek() == ')' || c.pos >= c.text.size()) break;
    expect(',');
  }
  expect(')');
  if (a.triggers.empty())
    c.fail("TagDispatch needs at least one (trigger, rule)", StatusCode::kInvalidArgument);
  return a;
}

}  // namespace di::grammar
