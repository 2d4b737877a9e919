// SPDX-License-Identifier: Apache-2.0
#include "grammar/ebnf/tag_dispatch_args.h"

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
    } else {  // an option, compared without spaces
      std::string opt;
      while (c.pos < c.text.size() && peek() != ',' &&
             !(peek() == ')' && (opt.empty() || opt.back() != '('))) {
        if (peek() != ' ') opt += peek();
        ++c.pos;
      }
      if (opt == "loop_after_dispatch=true" || opt == "loop_after_dispatch=false") {
        a.loop = opt.ends_with("true");
      } else if (opt != "stop_eos=true" && opt != "stop_str=()" && opt != "excludes=()") {
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
