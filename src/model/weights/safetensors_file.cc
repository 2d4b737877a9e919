#include "model/weights/safetensors_file.h"

#include <algorithm>
#include <utility>

#include "model/weights/safetensors_parse.h"

namespace di::weights {

Expected<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  DI_ASSIGN_OR_RETURN(MappedFile map, MappedFile::open(path));
  DI_ASSIGN_OR_RETURN(ParsedSafetensors parsed, parse_safetensors(map.data(), map.size(), path));
  SafetensorsFile f;
  f.path_ = path;
  f.map_ = std::move(map);  // The mapping's address does not change, so parsed pointers stay.
  f.tensors_ = std::move(parsed.tensors);
  f.metadata_ = std::move(parsed.metadata);
  f.by_name_.resize(f.tensors_.size());
  for (size_t i = 0; i < f.by_name_.size(); ++i) f.by_name_[i] = i;
  std::sort(f.by_name_.begin(), f.by_name_.end(),
            [&](size_t a, size_t b) { return f.tensors_[a].name < f.tensors_[b].name; });
  return f;
}

const TensorInfo* SafetensorsFile::find(std::string_view name) const {
  auto it = std::lower_bound(by_name_.begin(), by_name_.end(), name,
                             [&](size_t i, std::string_view n) { return tensors_[i].name < n; });
  if (it == by_name_.end() || tensors_[*it].name != name) return nullptr;
  return &tensors_[*it];
}

}  // namespace di::weights
