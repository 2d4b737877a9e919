// Test-only reader for the integer tensors of the v41-mini golden.safetensors file
// (8-byte little-endian header length, JSON header, raw little-endian data). Deliberately
// tiny and independent of the engine's own weights reader.
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace di::engram::testing {

inline std::string golden_dir() {
  return std::string(DI_SHARED_DIR) + "/golden/v41-mini";
}

struct GoldenTensor {
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<int64_t> values;  // widened to int64
};

class GoldenFile {
 public:
  // Returns false (and sets error) if the file is missing or malformed.
  bool open(const std::string& path, std::string& error) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      error = "cannot open " + path;
      return false;
    }
    std::ostringstream buf;
    buf << in.rdbuf();
    bytes_ = buf.str();
    if (bytes_.size() < 8) {
      error = "short file";
      return false;
    }
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; --i)
      header_len = (header_len << 8) | static_cast<uint8_t>(bytes_[static_cast<std::size_t>(i)]);
    if (header_len > bytes_.size() - 8) {
      error = "bad header length";
      return false;
    }
    header_ = nlohmann::json::parse(bytes_.substr(8, header_len), nullptr, false);
    if (header_.is_discarded()) {
      error = "bad header";
      return false;
    }
    data_begin_ = 8 + header_len;
    return true;
  }

  // Reads an I64 or I32 tensor; false if absent or of another dtype.
  bool read(const std::string& name, GoldenTensor& out) const {
    if (!header_.contains(name)) return false;
    const auto& entry = header_[name];
    out.dtype = entry["dtype"].get<std::string>();
    out.shape = entry["shape"].get<std::vector<int64_t>>();
    const auto offsets = entry["data_offsets"].get<std::vector<uint64_t>>();
    const std::size_t width = out.dtype == "I64" ? 8 : out.dtype == "I32" ? 4 : 0;
    if (width == 0 || offsets.size() != 2 || offsets[1] < offsets[0] ||
        data_begin_ + offsets[1] > bytes_.size()) {
      return false;
    }
    const std::size_t count = (offsets[1] - offsets[0]) / width;
    out.values.resize(count);
    const char* p = bytes_.data() + data_begin_ + offsets[0];
    for (std::size_t i = 0; i < count; ++i) {
      uint64_t v = 0;
      for (std::size_t b = width; b-- > 0;) v = (v << 8) | static_cast<uint8_t>(p[i * width + b]);
      if (width == 4) {
        out.values[i] = static_cast<int32_t>(static_cast<uint32_t>(v));
      } else {
        out.values[i] = static_cast<int64_t>(v);
      }
    }
    return true;
  }

 private:
  std::string bytes_;
  nlohmann::json header_;
  std::size_t data_begin_ = 0;
};

}  // namespace di::engram::testing
