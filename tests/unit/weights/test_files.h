// Helpers shared by the weights tests: a scratch directory and hand-built safetensors bytes, so
// the reader can be tested against files that do not come from our own writer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace di::weights::testing {

// A fresh directory under $TMPDIR (or /tmp), removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// u64 LE length of `header`, `header`, then `data`: the raw container, built without our writer.
std::vector<uint8_t> raw_safetensors(const std::string& header, const std::vector<uint8_t>& data);
void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes);
std::vector<uint8_t> read_bytes(const std::string& path);
std::vector<uint8_t> random_bytes(size_t n, uint32_t seed);
bool contains(const std::string& haystack, const std::string& needle);

}  // namespace di::weights::testing
