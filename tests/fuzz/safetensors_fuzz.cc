// libFuzzer target for the safetensors header parser: any input must yield a value or a Status,
// never a crash, and every accepted tensor must lie inside the input buffer.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "model/weights/safetensors_parse.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  di::Expected<di::weights::ParsedSafetensors> parsed =
      di::weights::parse_safetensors(data, size, "fuzz-input");
  if (!parsed.has_value()) return 0;
  const uint8_t* end = data + size;
  for (const di::weights::TensorInfo& t : parsed->tensors) {
    // Invariants the reader promises its callers; a violation is a bug, so stop loudly.
    if (t.data < data + 8 || t.data > end || t.num_bytes > static_cast<size_t>(end - t.data)) {
      std::abort();
    }
    if (static_cast<size_t>(t.num_elements()) * di::weights::dtype_size(t.dtype) != t.num_bytes) {
      std::abort();
    }
  }
  return 0;
}
