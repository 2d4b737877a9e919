// libFuzzer target for the streaming response parser. The first bytes pick the options (thinking,
// a stop string) and a chunking seed; the rest is model output. The parser must not crash, and
// the accumulated result must be the same fed whole, byte by byte and in seeded random chunks.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "recipe/parse/response_parser.h"

namespace {

using di::recipe::ParsedResponse;
using di::recipe::ParserOptions;
using di::recipe::ResponseParser;

ParsedResponse feed(const ParserOptions& opts, const std::string& text, uint32_t seed) {
  ResponseParser p(opts);
  ParsedResponse r;
  size_t i = 0;
  while (i < text.size()) {
    size_t n = text.size();
    if (seed == 1) {
      n = 1;
    } else if (seed > 1) {
      seed = seed * 1103515245u + 12345u;
      n = (seed >> 16) % 9;
    }
    n = std::min(n, text.size() - i);
    accumulate(r, p.push(std::string_view(text).substr(i, n)));
    i += n;
  }
  accumulate(r, p.finish());
  return r;
}

bool same(const ParsedResponse& a, const ParsedResponse& b) {
  if (a.reasoning_content != b.reasoning_content || a.content != b.content ||
      a.malformed_tool_call != b.malformed_tool_call ||
      a.tool_calls.size() != b.tool_calls.size()) {
    return false;
  }
  for (size_t i = 0; i < a.tool_calls.size(); ++i) {
    if (a.tool_calls[i].index != b.tool_calls[i].index ||
        a.tool_calls[i].name != b.tool_calls[i].name ||
        a.tool_calls[i].arguments != b.tool_calls[i].arguments) {
      return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  ParserOptions opts;
  opts.thinking = (data[0] & 1) != 0;
  const size_t stop_len = (data[0] >> 1) & 3;  // 0..3 bytes of stop string
  const uint32_t seed = 2u + data[1];
  data += 2;
  size -= 2;
  if (stop_len > size) return 0;
  if (stop_len) opts.stop.emplace_back(reinterpret_cast<const char*>(data), stop_len);
  const std::string text(reinterpret_cast<const char*>(data) + stop_len, size - stop_len);
  const ParsedResponse whole = feed(opts, text, 0);
  if (!same(whole, feed(opts, text, 1))) __builtin_trap();
  if (!same(whole, feed(opts, text, seed))) __builtin_trap();
  return 0;
}
