// SPDX-License-Identifier: Apache-2.0
// Regexes for JSON Schema "format" values we enforce. Each is at most as permissive as the
// standard (a format we cannot express exactly errs on rejecting), never more.
#pragma once

#include <string>
#include <string_view>

namespace di::grammar {

// Regex for the string content (no quotes), or "" if the format is not supported.
std::string format_regex(std::string_view format);

}  // namespace di::grammar
