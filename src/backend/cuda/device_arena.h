// One device allocation made at start-up and carved up without further cudaMalloc calls:
// persistent data (uploaded weights) grows from the bottom, per-op scratch from the top and is
// released in stack order (mark / reset). Nothing is freed individually; exhaustion is a Status.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "util/status.h"

namespace di::backend::cuda {

class DeviceArena {
 public:
  static Expected<std::unique_ptr<DeviceArena>> create(size_t bytes);
  ~DeviceArena();
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;

  Expected<void*> alloc_persistent(size_t bytes);
  Expected<void*> alloc_scratch(size_t bytes);
  size_t scratch_mark() const { return top_; }
  void scratch_reset(size_t mark) { top_ = mark; }
  size_t capacity() const { return size_; }
  size_t persistent_bytes() const { return bottom_; }

 private:
  DeviceArena(uint8_t* base, size_t size) : base_(base), size_(size), bottom_(0), top_(size) {}
  uint8_t* base_;
  size_t size_;
  size_t bottom_;  // first free byte above the persistent region
  size_t top_;     // first byte of the scratch region
};

}  // namespace di::backend::cuda
