// Files of `deepinfer batch`: the resumable, append-only result file (each result is written,
// flushed and fsynced as it finishes; on restart the complete lines tell what is done and a line
// cut short by a kill is truncated away) and the stderr progress bar.
#pragma once

#include <chrono>
#include <cstdint>
#include <set>
#include <string>

#include "util/status.h"

namespace di::cli {

class ResultFile {
 public:
  // Opens (creating) `path`, keeps its complete result lines and truncates anything after the
  // last one. `done` receives their custom_ids.
  static Expected<ResultFile> open(const std::string& path, std::set<std::string>& done);
  ResultFile(ResultFile&& o) noexcept : fd_(o.fd_), path_(std::move(o.path_)) { o.fd_ = -1; }
  ResultFile(const ResultFile&) = delete;
  ~ResultFile();

  // Appends `line` + '\n' and fsyncs, so a result on disk survives a kill right after.
  Status append(const std::string& line);

 private:
  ResultFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_ = -1;
  std::string path_;
};

// "[=====>    ] 12/64  3.1 req/s  250 out tok/s  ETA 0:12" on stderr, redrawn at most 10x/s.
class ProgressBar {
 public:
  ProgressBar(int64_t total, bool enabled);
  void update(int64_t done, int64_t generated_tokens, bool force = false);
  void finish(int64_t done, int64_t generated_tokens);

 private:
  int64_t total_;
  bool enabled_;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace di::cli
