#include "cli/batch_files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "api/openai_batch.h"

namespace di::cli {

Expected<ResultFile> ResultFile::open(const std::string& path, std::set<std::string>& done) {
  std::string content;
  {
    std::ifstream in(path, std::ios::binary);
    if (in) {
      std::ostringstream ss;
      ss << in.rdbuf();
      content = ss.str();
    }
  }
  // Keep the prefix of complete lines that are results; a partial last line (killed mid-write,
  // which the fsync per result makes at most one) is cut off.
  size_t keep = 0;
  while (keep < content.size()) {
    const size_t nl = content.find('\n', keep);
    if (nl == std::string::npos) break;
    auto id = api::custom_id_of_result(std::string_view(content).substr(keep, nl - keep));
    if (!id) break;
    done.insert(*id);
    keep = nl + 1;
  }
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return invalid_argument("--output " + path + ": " + std::strerror(errno));
  if (::ftruncate(fd, static_cast<off_t>(keep)) != 0 || ::lseek(fd, 0, SEEK_END) < 0) {
    const std::string err = std::strerror(errno);
    ::close(fd);
    return invalid_argument("--output " + path + ": " + err);
  }
  return ResultFile(fd, path);
}

ResultFile::~ResultFile() {
  if (fd_ >= 0) ::close(fd_);
}

Status ResultFile::append(const std::string& line) {
  std::string buf = line + "\n";
  size_t off = 0;
  while (off < buf.size()) {
    const ssize_t n = ::write(fd_, buf.data() + off, buf.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status(StatusCode::kUnavailable, path_ + ": " + std::strerror(errno));
    }
    off += static_cast<size_t>(n);
  }
  if (::fsync(fd_) != 0) return Status(StatusCode::kUnavailable, path_ + ": fsync failed");
  return Status();
}

ProgressBar::ProgressBar(int64_t total, bool enabled)
    : total_(total), enabled_(enabled), start_(std::chrono::steady_clock::now()) {}

void ProgressBar::update(int64_t done, int64_t generated_tokens, bool force) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (!force && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  const double s = std::max(1e-9, std::chrono::duration<double>(now - start_).count());
  const double frac = total_ > 0 ? static_cast<double>(done) / static_cast<double>(total_) : 1.0;
  constexpr int kWidth = 24;
  char bar[kWidth + 1];
  const int full = static_cast<int>(frac * kWidth);
  for (int i = 0; i < kWidth; ++i) bar[i] = i < full ? '=' : (i == full ? '>' : ' ');
  bar[kWidth] = '\0';
  const double rate = static_cast<double>(done) / s;
  const double eta = rate > 0 ? static_cast<double>(total_ - done) / rate : 0.0;
  std::fprintf(stderr, "\r[%s] %lld/%lld  %.2f req/s  %.1f out tok/s  ETA %d:%02d ", bar,
               static_cast<long long>(done), static_cast<long long>(total_), rate,
               static_cast<double>(generated_tokens) / s, static_cast<int>(eta) / 60,
               static_cast<int>(eta) % 60);
  std::fflush(stderr);
}

void ProgressBar::finish(int64_t done, int64_t generated_tokens) {
  if (!enabled_) return;
  update(done, generated_tokens, /*force=*/true);
  std::fprintf(stderr, "\n");
}

}  // namespace di::cli
