// SPDX-License-Identifier: Apache-2.0
// The arguments of xgrammar's EBNF macro TagDispatch(("trigger", rule), ...,
// loop_after_dispatch=true|false, stop_eos=true, stop_str=(), excludes=()), read through the
// EBNF parser's own cursor so strings and names follow its rules. Other options are
// kUnimplemented.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace di::grammar {

struct EbnfCursor {
  std::string_view text;
  size_t& pos;
  std::function<void()> skip_space;
  std::function<std::string()> read_string;  // at '"'
  std::function<std::string()> read_name;
  std::function<void(const std::string&, StatusCode)> fail;  // throws
};

struct TagDispatchArgs {
  std::vector<std::string> triggers, rules, stops, excludes;
  bool loop = true, stop_eos = true;
};

// From just after `TagDispatch(` through the closing `)`.
TagDispatchArgs read_tag_dispatch_args(EbnfCursor& c);

}  // namespace di::grammar
