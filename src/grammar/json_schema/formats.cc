// SPDX-License-Identifier: Apache-2.0
#include "grammar/json_schema/formats.h"

namespace di::grammar {

namespace {
// Day ranges per month; Feb 29 only in leap years (divisible by 4, centuries by 400).
constexpr const char* kDate =
    "(\\d{4}-((0[13578]|1[02])-(0[1-9]|[12]\\d|3[01])|(0[469]|11)-(0[1-9]|[12]\\d|30)|"
    "02-(0[1-9]|1\\d|2[0-8])))|"
    "((\\d\\d(0[48]|[2468][048]|[13579][26])|([02468][048]|[13579][26])00)-02-29)";
constexpr const char* kTime =
    "([01]\\d|2[0-3]):[0-5]\\d:([0-5]\\d|60)(\\.\\d+)?(Z|z|[+-]([01]\\d|2[0-3]):[0-5]\\d)";
constexpr const char* kLabel = "[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?";
}  // namespace

std::string format_regex(std::string_view f) {
  if (f == "date") return std::string("(") + kDate + ")";
  if (f == "time") return kTime;
  if (f == "date-time") return std::string("(") + kDate + ")[Tt]" + kTime;
  if (f == "uuid")
    return "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}";
  if (f == "ipv4") {
    std::string octet = "(25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)";
    return octet + "(\\." + octet + "){3}";
  }
  if (f == "email") return "[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\\.[A-Za-z0-9-]+)+";
  if (f == "hostname") return std::string(kLabel) + "(\\." + kLabel + ")*";
  // RFC 3986 characters only (no IP-literal brackets): narrower than the RFC, never wider.
  if (f == "uri")
    return "[A-Za-z][A-Za-z0-9+.-]*:([A-Za-z0-9._~!$&'()*+,;=:@/?#-]|%[0-9A-Fa-f]{2})*";
  return "";
}

}  // namespace di::grammar
