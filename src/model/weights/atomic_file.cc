#include "model/weights/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

namespace di::weights {
namespace {

Status io_error(const std::string& path, const char* what, int err) {
  return {StatusCode::kUnavailable, path + ": " + what + ": " + std::strerror(err)};
}

}  // namespace

Expected<AtomicFile> AtomicFile::create(const std::string& path) {
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return io_error(tmp, "cannot create", errno);
  return AtomicFile(path, fd);
}

AtomicFile::AtomicFile(AtomicFile&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(std::exchange(other.fd_, -1)),
      committed_(std::exchange(other.committed_, true)) {}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !path_.empty()) ::unlink(tmp_path().c_str());
}

Status AtomicFile::append(const void* data, size_t num_bytes) {
  if (fd_ < 0) return internal_error(tmp_path() + ": append after close");
  const auto* p = static_cast<const uint8_t*>(data);
  // write() may stop short (signals, large counts): loop until everything is out.
  while (num_bytes > 0) {
    ssize_t n = ::write(fd_, p, num_bytes);
    if (n < 0) {
      if (errno == EINTR) continue;
      return io_error(tmp_path(), "write failed", errno);
    }
    p += n;
    num_bytes -= static_cast<size_t>(n);
  }
  return Status::ok_status();
}

Status AtomicFile::commit() {
  if (fd_ < 0) return internal_error(tmp_path() + ": commit after close");
  // fsync before rename: otherwise a crash can leave the new name pointing at missing data.
  if (::fsync(fd_) != 0) return io_error(tmp_path(), "fsync failed", errno);
  int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) return io_error(tmp_path(), "close failed", errno);
  if (std::rename(tmp_path().c_str(), path_.c_str()) != 0) {
    return io_error(path_, "rename failed", errno);
  }
  committed_ = true;
  return Status::ok_status();
}

}  // namespace di::weights
