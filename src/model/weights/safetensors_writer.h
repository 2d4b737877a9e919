// Streaming safetensors writer: tensors are described up front and their bytes produced one at a
// time while writing, so a multi-GB file never has to exist in memory at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "model/weights/dtype.h"
#include "util/status.h"

namespace di::weights {

class SafetensorsWriter {
 public:
  using FillFn = std::function<void(uint8_t* dst, size_t num_bytes)>;

  // `fill` must write exactly num_bytes (= elements * dtype_size) into dst; it is called once
  // per write(), in add order. Problems (bad shape, duplicate name) are reported by write().
  void add(std::string name, DType dtype, std::vector<int64_t> shape, FillFn fill);
  // Same with the bytes given now; their count must match the shape (else write() fails).
  void add_bytes(std::string name,
                 DType dtype,
                 std::vector<int64_t> shape,
                 std::vector<uint8_t> bytes);
  void set_metadata(std::string key, std::string value);

  // Writes the header (u64 LE length + JSON padded with spaces to a multiple of 8, so the data
  // section starts 8-aligned) and then the tensors back to back in add order (no padding between
  // them, as other safetensors readers require). Goes to path + ".tmp", fsyncs, then renames, so
  // a crash never leaves a half-written file under `path`. Peak extra memory is one buffer of
  // the largest tensor's size. Errors: InvalidArgument for bad input, Unavailable for I/O.
  Status write(const std::string& path) const;

 private:
  struct Entry {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    FillFn fill;  // Used when bytes is unset.
    std::vector<uint8_t> bytes;
    bool has_bytes = false;
  };
  // Checks the entries and computes each one's byte size.
  Status plan(std::vector<uint64_t>* sizes) const;
  // The JSON header, already padded.
  Expected<std::string> header_json(const std::vector<uint64_t>& sizes) const;

  std::vector<Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

// Writes DIR/model.safetensors.index.json with {"metadata": {}, "weight_map": shard_of_tensor}
// (tensor name -> shard file name), the layout Checkpoint::open_dir reads for sharded checkpoints.
Status write_index_json(const std::string& dir,
                        const std::map<std::string, std::string>& shard_of_tensor);

}  // namespace di::weights
