// A checkpoint directory: one or more safetensors shards seen as one name -> tensor map.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "model/weights/safetensors_file.h"
#include "model/weights/tensor_info.h"
#include "util/status.h"

namespace di::weights {

inline constexpr char kIndexFileName[] = "model.safetensors.index.json";
inline constexpr char kSingleFileName[] = "model.safetensors";

class Checkpoint {
 public:
  // Opens, in order of preference:
  //   DIR/model.safetensors.index.json  (HF-style {"weight_map": {tensor: shard file}}): every
  //                                     shard it names; each mapped tensor must be in its shard,
  //   DIR/model.safetensors,
  //   every DIR/*.safetensors (sorted by name).
  // A tensor name in two files is InvalidArgument; a missing shard, or a tensor absent from the
  // shard the index names, is NotFound. Shard names in the index must be plain file names (no
  // '/'), so an index cannot reach outside DIR. Every shard is validated as SafetensorsFile::open.
  static Expected<Checkpoint> open_dir(const std::string& dir);

  // Move-only: owns the mappings. Moving keeps TensorInfo pointers valid.
  Checkpoint(Checkpoint&&) noexcept = default;
  Checkpoint& operator=(Checkpoint&&) noexcept = default;
  Checkpoint(const Checkpoint&) = delete;
  Checkpoint& operator=(const Checkpoint&) = delete;
  ~Checkpoint() = default;

  // nullptr if absent.
  const TensorInfo* find(std::string_view name) const;
  // Sorted.
  std::vector<std::string> names() const;
  size_t num_tensors() const { return by_name_.size(); }
  // The opened files, in the order they were opened.
  const std::vector<SafetensorsFile>& files() const { return files_; }

 private:
  Checkpoint() = default;
  // Opens `paths` and builds the name map, rejecting a name found in two files.
  static Expected<Checkpoint> open_files(const std::vector<std::string>& paths);
  static Expected<Checkpoint> open_index(const std::string& dir, const std::string& index_path);

  std::vector<SafetensorsFile> files_;
  std::map<std::string, const TensorInfo*, std::less<>> by_name_;
};

}  // namespace di::weights
