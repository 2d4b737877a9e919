// A read-only, private memory mapping of a whole file (RAII: munmap on destruction).
// Checkpoints are many GB; mapping lets the OS fault pages in only when a tensor is touched,
// and lets several readers share the page cache without copies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "util/status.h"

namespace di::weights {

class MappedFile {
 public:
  // Maps `path` read-only. A zero-length file is valid and maps to data() == nullptr.
  // Non-regular files (directories, FIFOs) are rejected because they cannot be mapped.
  static Expected<MappedFile> open(const std::string& path);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  MappedFile(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  void reset();

  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace di::weights
