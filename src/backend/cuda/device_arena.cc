#include "backend/cuda/device_arena.h"

#include <string>

#include "backend/cuda/cuda_check.h"

namespace di::backend::cuda {

namespace {
constexpr size_t kAlign = 256;  // cudaMalloc's own alignment; keeps vector loads legal
size_t align_up(size_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}
}  // namespace

Expected<std::unique_ptr<DeviceArena>> DeviceArena::create(size_t bytes) {
  void* p = nullptr;
  bytes = align_up(bytes);
  DI_CUDA_RETURN_IF_ERROR(cudaMalloc(&p, bytes));
  return std::unique_ptr<DeviceArena>(new DeviceArena(static_cast<uint8_t*>(p), bytes));
}

DeviceArena::~DeviceArena() {
  // A failure here has no one left to report to; the context is being torn down anyway.
  (void)cudaFree(base_);
}

Expected<void*> DeviceArena::alloc_persistent(size_t bytes) {
  const size_t n = align_up(bytes);
  if (n > top_ - bottom_) {
    return resource_exhausted("device arena: " + std::to_string(bytes) +
                              " persistent bytes do not fit (capacity " + std::to_string(size_) +
                              ", persistent " + std::to_string(bottom_) + ")");
  }
  void* p = base_ + bottom_;
  bottom_ += n;
  return p;
}

Expected<void*> DeviceArena::alloc_scratch(size_t bytes) {
  const size_t n = align_up(bytes);
  if (n > top_ - bottom_) {
    return resource_exhausted("device arena: " + std::to_string(bytes) +
                              " scratch bytes do not fit (capacity " + std::to_string(size_) + ")");
  }
  top_ -= n;
  return static_cast<void*>(base_ + top_);
}

}  // namespace di::backend::cuda
