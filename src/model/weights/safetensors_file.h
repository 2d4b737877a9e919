// One safetensors file, memory-mapped and validated on open, with lookup by tensor name.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "model/weights/mapped_file.h"
#include "model/weights/tensor_info.h"
#include "util/status.h"

namespace di::weights {

class SafetensorsFile {
 public:
  // Maps `path` read-only and validates the header (see parse_safetensors for the checks and
  // status codes). Tensor bytes are not read: pages fault in when a tensor is first touched.
  static Expected<SafetensorsFile> open(const std::string& path);

  // Move-only: it owns the mapping that every TensorInfo::data points into. Moving keeps those
  // pointers (and TensorInfo addresses) valid.
  SafetensorsFile(SafetensorsFile&&) noexcept = default;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept = default;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;
  ~SafetensorsFile() = default;

  // nullptr if absent.
  const TensorInfo* find(std::string_view name) const;
  // In file layout order (by data offset); for files written by SafetensorsWriter that is the
  // order the tensors were added.
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  // The "__metadata__" map (empty if the file has none).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::string& path() const { return path_; }

 private:
  SafetensorsFile() = default;

  std::string path_;
  MappedFile map_;
  std::vector<TensorInfo> tensors_;
  std::vector<size_t> by_name_;  // Indices into tensors_, sorted by name, for find().
  std::map<std::string, std::string> metadata_;
};

}  // namespace di::weights
