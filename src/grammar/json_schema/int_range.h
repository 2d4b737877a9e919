// SPDX-License-Identifier: Apache-2.0
// Regex text for decimal integers in a range (JSON Schema minimum/maximum on integers, and the
// integer part of bounded numbers). Canonical decimal only: no '+', no leading zeros, no "-0".
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace di::grammar {

// Regex (no anchors) matching exactly the integers n with lo <= n <= hi (either bound optional).
// Returns "" when the range is empty (the caller then builds a grammar that matches nothing).
std::string int_range_regex(std::optional<int64_t> lo, std::optional<int64_t> hi);

}  // namespace di::grammar
