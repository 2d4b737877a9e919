// Writes a file under a temporary name and renames it into place on commit(), so that readers
// (and a process restarted after a crash) see either the old file or the complete new one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "util/status.h"

namespace di::weights {

class AtomicFile {
 public:
  // Creates (truncating) path + ".tmp".
  static Expected<AtomicFile> create(const std::string& path);

  AtomicFile(AtomicFile&& other) noexcept;
  AtomicFile& operator=(AtomicFile&&) = delete;
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  // Without a successful commit() the temporary file is removed.
  ~AtomicFile();

  Status append(const void* data, size_t num_bytes);
  // fsync, close and rename the temporary file to the final path.
  Status commit();

 private:
  AtomicFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string tmp_path() const { return path_ + ".tmp"; }

  std::string path_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace di::weights
