// Typed access to a golden folder's golden.safetensors and manifest.json (shared/golden/README.md).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/weights/safetensors_file.h"
#include "util/status.h"

namespace di::check {

class GoldenData {
 public:
  static Expected<GoldenData> open(const std::string& dir);

  bool has(const std::string& name) const { return file_.find(name) != nullptr; }
  // The tensor as f32 (from F32 or BF16), as int64 (from I32, I64 or U8); error if absent.
  Expected<std::vector<float>> floats(const std::string& name) const;
  Expected<std::vector<int64_t>> ints(const std::string& name) const;
  Expected<std::vector<int64_t>> shape(const std::string& name) const;
  const nlohmann::json& manifest() const { return manifest_; }

 private:
  explicit GoldenData(weights::SafetensorsFile file) : file_(std::move(file)) {}
  weights::SafetensorsFile file_;
  nlohmann::json manifest_;
};

}  // namespace di::check
