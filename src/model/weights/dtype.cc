#include "model/weights/dtype.h"

#include <string>

namespace di::weights {
namespace {

struct DTypeEntry {
  DType dtype;
  std::string_view name;
  size_t size;
};

// One table drives parsing, naming and sizing so the three can never disagree.
constexpr DTypeEntry kTable[] = {
    {DType::kBool, "BOOL", 1}, {DType::kU8, "U8", 1},          {DType::kI8, "I8", 1},
    {DType::kI16, "I16", 2},   {DType::kI32, "I32", 4},        {DType::kI64, "I64", 8},
    {DType::kF16, "F16", 2},   {DType::kBF16, "BF16", 2},      {DType::kF32, "F32", 4},
    {DType::kF64, "F64", 8},   {DType::kF8E4M3, "F8_E4M3", 1}, {DType::kF8E8M0, "F8_E8M0", 1},
};

const DTypeEntry* entry_of(DType dtype) {
  for (const DTypeEntry& e : kTable) {
    if (e.dtype == dtype) return &e;
  }
  return nullptr;
}

}  // namespace

Expected<DType> parse_safetensors_dtype(std::string_view name) {
  for (const DTypeEntry& e : kTable) {
    if (e.name == name) return e.dtype;
  }
  // The name comes from an untrusted header: bound what we echo back.
  constexpr size_t kMaxEcho = 32;
  std::string shown(name.substr(0, kMaxEcho));
  if (name.size() > kMaxEcho) shown += "...";
  return invalid_argument("unknown safetensors dtype '" + shown + "'");
}

std::string_view dtype_name(DType dtype) {
  const DTypeEntry* e = entry_of(dtype);
  return e ? e->name : std::string_view("?");
}

size_t dtype_size(DType dtype) {
  const DTypeEntry* e = entry_of(dtype);
  return e ? e->size : 0;
}

}  // namespace di::weights
