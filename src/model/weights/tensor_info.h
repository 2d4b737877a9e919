// Where one tensor of a checkpoint lives: its type, shape and bytes inside a mapped file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "model/weights/dtype.h"

namespace di::weights {

struct TensorInfo {
  std::string name;
  DType dtype = DType::kU8;
  std::vector<int64_t> shape;
  // Points into the memory-mapped file; pages fault in lazily on first touch. Not aligned beyond
  // what the file layout gives (safetensors packs tensors back to back), so read wide types with
  // memcpy or check alignment first. Valid while the owning SafetensorsFile / Checkpoint lives.
  const uint8_t* data = nullptr;
  size_t num_bytes = 0;
  std::string file;  // Path of the file that holds it, for error messages.

  // Product of the dims (1 for a scalar). The reader has checked that it does not overflow.
  int64_t num_elements() const;
};

}  // namespace di::weights
