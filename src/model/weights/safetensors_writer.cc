#include "model/weights/safetensors_writer.h"

#include <exception>
#include <filesystem>
#include <new>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "model/weights/atomic_file.h"
#include "model/weights/checkpoint.h"

namespace di::weights {
namespace {

using json = nlohmann::json;

// JSON spelling of a string; throws json::type_error on invalid UTF-8 (caught by callers).
std::string quoted(const std::string& s) {
  return json(s).dump();
}

void pad_to_multiple_of_8(std::string* header) {
  while (header->size() % 8 != 0) header->push_back(' ');
}

}  // namespace

void SafetensorsWriter::add(std::string name,
                            DType dtype,
                            std::vector<int64_t> shape,
                            FillFn fill) {
  entries_.push_back(Entry{std::move(name), dtype, std::move(shape), std::move(fill), {}, false});
}

void SafetensorsWriter::add_bytes(std::string name,
                                  DType dtype,
                                  std::vector<int64_t> shape,
                                  std::vector<uint8_t> bytes) {
  entries_.push_back(
      Entry{std::move(name), dtype, std::move(shape), nullptr, std::move(bytes), true});
}

void SafetensorsWriter::set_metadata(std::string key, std::string value) {
  metadata_[std::move(key)] = std::move(value);
}

Status SafetensorsWriter::plan(std::vector<uint64_t>* sizes) const {
  std::set<std::string> names;
  sizes->clear();
  for (const Entry& e : entries_) {
    const std::string where = "tensor '" + e.name + "': ";
    if (e.name == "__metadata__") return invalid_argument(where + "reserved name");
    if (!names.insert(e.name).second) return invalid_argument(where + "added twice");
    uint64_t n = dtype_size(e.dtype);
    for (int64_t d : e.shape) {
      if (d < 0) return invalid_argument(where + "negative dimension");
      if (__builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) {
        return invalid_argument(where + "byte size overflows");
      }
    }
    if (e.has_bytes && e.bytes.size() != n) {
      return invalid_argument(where + "has " + std::to_string(e.bytes.size()) +
                              " bytes but its shape needs " + std::to_string(n));
    }
    if (!e.has_bytes && !e.fill) return invalid_argument(where + "no fill function");
    sizes->push_back(n);
  }
  return Status::ok_status();
}

Expected<std::string> SafetensorsWriter::header_json(const std::vector<uint64_t>& sizes) const {
  // Built by hand rather than as one json object so that the header keeps add order (nlohmann
  // objects sort keys) at linear cost, which keeps layout order == header order.
  std::string h = "{";
  bool first = true;
  try {
    if (!metadata_.empty()) {
      h += "\"__metadata__\":" + json(metadata_).dump();
      first = false;
    }
    uint64_t offset = 0;
    for (size_t i = 0; i < entries_.size(); ++i) {
      const Entry& e = entries_[i];
      json desc = {{"dtype", std::string(dtype_name(e.dtype))},
                   {"shape", e.shape},
                   {"data_offsets", {offset, offset + sizes[i]}}};
      offset += sizes[i];
      if (!first) h += ",";
      first = false;
      h += quoted(e.name) + ":" + desc.dump();
    }
  } catch (const json::type_error& err) {
    return invalid_argument(std::string("name or metadata is not valid UTF-8: ") + err.what());
  }
  h += "}";
  pad_to_multiple_of_8(&h);
  return h;
}

Status SafetensorsWriter::write(const std::string& path) const {
  std::vector<uint64_t> sizes;
  Status st = plan(&sizes);
  if (!st.ok()) return st.with_context(path);
  Expected<std::string> header = header_json(sizes);
  if (!header) return header.status().with_context(path);

  DI_ASSIGN_OR_RETURN(AtomicFile out, AtomicFile::create(path));
  uint8_t len_le[8];
  uint64_t len = header->size();
  for (int i = 0; i < 8; ++i) len_le[i] = static_cast<uint8_t>(len >> (8 * i));
  DI_RETURN_IF_ERROR(out.append(len_le, sizeof(len_le)));
  DI_RETURN_IF_ERROR(out.append(header->data(), header->size()));

  std::vector<uint8_t> buffer;  // Reused: grows to the largest tensor filled through `fill`.
  for (size_t i = 0; i < entries_.size(); ++i) {
    const Entry& e = entries_[i];
    if (e.has_bytes) {
      DI_RETURN_IF_ERROR(out.append(e.bytes.data(), e.bytes.size()));
      continue;
    }
    try {
      buffer.resize(sizes[i]);
      e.fill(buffer.data(), buffer.size());
    } catch (const std::bad_alloc&) {
      return resource_exhausted(path + ": tensor '" + e.name + "': cannot allocate " +
                                std::to_string(sizes[i]) + " bytes");
    } catch (const std::exception& err) {
      return internal_error(path + ": tensor '" + e.name + "': fill failed: " + err.what());
    }
    DI_RETURN_IF_ERROR(out.append(buffer.data(), buffer.size()));
  }
  return out.commit();
}

Status write_index_json(const std::string& dir,
                        const std::map<std::string, std::string>& shard_of_tensor) {
  const std::string path = (std::filesystem::path(dir) / kIndexFileName).string();
  std::string text;
  try {
    json root = {{"metadata", json::object()}, {"weight_map", shard_of_tensor}};
    text = root.dump(2) + "\n";
  } catch (const json::type_error& err) {
    return invalid_argument(path + ": name is not valid UTF-8: " + err.what());
  }
  DI_ASSIGN_OR_RETURN(AtomicFile out, AtomicFile::create(path));
  DI_RETURN_IF_ERROR(out.append(text.data(), text.size()));
  return out.commit();
}

}  // namespace di::weights
