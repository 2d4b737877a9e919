#include "model/weights/checkpoint.h"

#include <algorithm>
#include <exception>
#include <filesystem>
#include <new>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "model/weights/mapped_file.h"

namespace di::weights {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// Real index files are a few MB; the bound keeps a bogus one from exhausting memory.
constexpr size_t kMaxIndexBytes = 100u << 20;

std::string join(const std::string& dir, const std::string& name) {
  return (fs::path(dir) / name).string();
}

bool is_regular(const std::string& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec);
}

// A shard name from the index must stay inside the checkpoint directory.
bool is_plain_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

// weight_map of the index: tensor name -> shard file name.
Expected<std::map<std::string, std::string>> read_weight_map(const std::string& index_path) {
  DI_ASSIGN_OR_RETURN(MappedFile map, MappedFile::open(index_path));
  if (map.size() > kMaxIndexBytes) {
    return invalid_argument(index_path + ": index is larger than 100 MiB");
  }
  const uint8_t* begin = map.data();
  json root = json::parse(begin, begin + map.size(), nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return invalid_argument(index_path + ": not valid JSON");
  if (!root.is_object()) return invalid_argument(index_path + ": not a JSON object");
  auto wm = root.find("weight_map");
  if (wm == root.end() || !wm->is_object()) {
    return invalid_argument(index_path + ": missing or non-object \"weight_map\"");
  }
  std::map<std::string, std::string> out;
  for (const auto& [tensor, shard] : wm->items()) {
    if (!shard.is_string() || !is_plain_file_name(shard.get_ref<const std::string&>())) {
      return invalid_argument(index_path + ": tensor '" + tensor +
                              "': shard must be a plain file name string");
    }
    out[tensor] = shard.get_ref<const std::string&>();
  }
  return out;
}

}  // namespace

Expected<Checkpoint> Checkpoint::open_files(const std::vector<std::string>& paths) {
  Checkpoint ckpt;
  ckpt.files_.reserve(paths.size());
  for (const std::string& p : paths) {
    DI_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::open(p));
    ckpt.files_.push_back(std::move(f));
  }
  // Built after all files are in place; moving a SafetensorsFile keeps its TensorInfo addresses.
  for (const SafetensorsFile& f : ckpt.files_) {
    for (const TensorInfo& t : f.tensors()) {
      auto [it, inserted] = ckpt.by_name_.emplace(t.name, &t);
      if (!inserted) {
        return invalid_argument("tensor '" + t.name + "' appears in both " + it->second->file +
                                " and " + t.file);
      }
    }
  }
  return ckpt;
}

Expected<Checkpoint> Checkpoint::open_index(const std::string& dir, const std::string& index_path) {
  DI_ASSIGN_OR_RETURN(auto weight_map, read_weight_map(index_path));
  std::set<std::string> shards;
  for (const auto& [tensor, shard] : weight_map) shards.insert(shard);
  std::vector<std::string> paths;
  for (const std::string& shard : shards) {
    std::string path = join(dir, shard);
    if (!is_regular(path)) {
      return not_found(index_path + ": names shard " + path + ", which does not exist");
    }
    paths.push_back(std::move(path));
  }
  DI_ASSIGN_OR_RETURN(Checkpoint ckpt, open_files(paths));
  for (const auto& [tensor, shard] : weight_map) {
    const TensorInfo* t = ckpt.find(tensor);
    std::string want = join(dir, shard);
    if (t == nullptr || t->file != want) {
      return not_found(index_path + ": tensor '" + tensor + "' is mapped to " + want +
                       ", which does not contain it");
    }
  }
  return ckpt;
}

Expected<Checkpoint> Checkpoint::open_dir(const std::string& dir) {
  // Errors travel as values; this only converts allocation failure and the like.
  try {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) return not_found(dir + ": not a directory");
    std::string index = join(dir, kIndexFileName);
    if (fs::exists(index, ec)) return open_index(dir, index);
    std::string single = join(dir, kSingleFileName);
    if (fs::exists(single, ec)) return open_files({single});

    std::vector<std::string> paths;
    fs::directory_iterator it(dir, ec);
    if (ec) return not_found(dir + ": cannot list directory: " + ec.message());
    for (; it != fs::directory_iterator(); it.increment(ec)) {
      if (ec)
        return Status(StatusCode::kUnavailable, dir + ": cannot list directory: " + ec.message());
      const fs::path& p = it->path();
      if (p.extension() == ".safetensors" && is_regular(p.string())) paths.push_back(p.string());
    }
    if (ec)
      return Status(StatusCode::kUnavailable, dir + ": cannot list directory: " + ec.message());
    if (paths.empty()) return not_found(dir + ": no .safetensors files");
    std::sort(paths.begin(), paths.end());
    return open_files(paths);
  } catch (const std::bad_alloc&) {
    return resource_exhausted(dir + ": out of memory opening checkpoint");
  } catch (const std::exception& e) {
    return internal_error(dir + ": unexpected error opening checkpoint: " + e.what());
  }
}

const TensorInfo* Checkpoint::find(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  out.reserve(by_name_.size());
  for (const auto& [name, info] : by_name_) out.push_back(name);
  return out;
}

}  // namespace di::weights
