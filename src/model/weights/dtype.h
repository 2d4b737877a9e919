// Element types a safetensors checkpoint can hold, with their on-disk spelling and width.
// The V4.1 checkpoint mixes BF16/F32 tensors, F8_E4M3 weights with F8_E8M0 block scales and I8
// packed FP4 experts, so the reader must know every one of them to size and validate tensors.
#pragma once

#include <cstddef>
#include <string_view>

#include "util/status.h"

namespace di::weights {

enum class DType { kBool, kU8, kI8, kI16, kI32, kI64, kF16, kBF16, kF32, kF64, kF8E4M3, kF8E8M0 };

// Every DType, so that tests and tools can iterate without repeating the list.
inline constexpr DType kAllDTypes[] = {
    DType::kBool, DType::kU8,   DType::kI8,  DType::kI16, DType::kI32,    DType::kI64,
    DType::kF16,  DType::kBF16, DType::kF32, DType::kF64, DType::kF8E4M3, DType::kF8E8M0,
};

// "BF16" -> kBF16 etc. The spelling comes from a file, so an unknown one is an InvalidArgument
// error rather than a crash.
Expected<DType> parse_safetensors_dtype(std::string_view name);

// The safetensors spelling ("F8_E4M3" for kF8E4M3), the inverse of parse_safetensors_dtype.
std::string_view dtype_name(DType dtype);

// Bytes per element.
size_t dtype_size(DType dtype);

}  // namespace di::weights
