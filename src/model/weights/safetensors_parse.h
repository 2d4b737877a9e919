// Validating parser for the safetensors container format, separate from any file I/O so that it
// can be unit-tested and fuzzed on plain byte buffers.
//
// Layout: u64 little-endian header length N, N bytes of JSON, then the data section.
// The JSON maps tensor names to {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative
// to the data section) plus an optional "__metadata__" string->string map.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/weights/tensor_info.h"
#include "util/status.h"

namespace di::weights {

// Headers beyond this are rejected before parsing: real headers are a few MB at most, and a bogus
// length must not make us parse (and allocate for) gigabytes of JSON.
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100ull << 20;

struct ParsedSafetensors {
  // Sorted by data offset, i.e. in file layout order (ties, which only zero-byte tensors can
  // have, by name). For files from SafetensorsWriter this is the order tensors were added.
  std::vector<TensorInfo> tensors;
  std::map<std::string, std::string> metadata;  // "__metadata__"
  size_t header_bytes = 0;                      // N, the JSON length
};

// Parses and validates the whole container held in [data, data + size). Only the 8-byte prefix
// and the header are read; tensor bytes are never touched, so a mapped file stays lazy.
// TensorInfo::data points into `data`; `file` names the source in messages and TensorInfo::file.
// Never throws and never aborts on any input: every problem is a Status naming the file and,
// when known, the tensor:
//   DataLoss        file shorter than 8 bytes, header longer than the file, data section shorter
//                   than the largest data_offsets end (truncated file)
//   InvalidArgument header over 100 MiB, bad JSON / not an object, duplicate tensor name, unknown
//                   dtype, bad shape, malformed data_offsets, byte size != elements * dtype size,
//                   overlapping byte ranges, __metadata__ not a string->string map
//   OutOfRange      data_offsets with begin > end
// Gaps between tensors and trailing bytes after the last one are allowed.
Expected<ParsedSafetensors> parse_safetensors(const uint8_t* data,
                                              size_t size,
                                              const std::string& file);

}  // namespace di::weights
