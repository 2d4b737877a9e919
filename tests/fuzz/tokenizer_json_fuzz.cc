// libFuzzer target for the tokenizer.json loader: arbitrary bytes must load or be refused with a
// Status, never crash; a tokenizer that loads must encode and decode a sample.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "recipe/tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto tok = di::recipe::Tokenizer::from_json(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!tok) return 0;
  auto ids = tok->encode("Hello, 世界 123!", di::recipe::SpecialTokens::kAll);
  for (int32_t id : ids) {
    if (id < 0 || id >= tok->vocab_size()) std::abort();
  }
  (void)tok->decode(ids);
  return 0;
}
