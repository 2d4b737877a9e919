#include "model/weights/safetensors_parse.h"

#include <algorithm>
#include <exception>
#include <limits>
#include <new>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>
#include <utility>

namespace di::weights {
namespace {

using json = nlohmann::json;

// Names and strings come from an untrusted header: bound what we echo into messages.
std::string shown(std::string_view s) {
  constexpr size_t kMaxEcho = 200;
  if (s.size() <= kMaxEcho) return std::string(s);
  return std::string(s.substr(0, kMaxEcho)) + "...";
}

std::string in_tensor(const std::string& file, std::string_view name) {
  return file + ": tensor '" + shown(name) + "': ";
}

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// A JSON integer that fits in [0, INT64_MAX]; floats, booleans and negatives are rejected.
bool as_non_negative_int(const json& v, uint64_t* out) {
  if (!v.is_number_integer()) return false;
  if (v.is_number_unsigned()) {
    *out = v.get<uint64_t>();
  } else {
    int64_t s = v.get<int64_t>();
    if (s < 0) return false;
    *out = static_cast<uint64_t>(s);
  }
  return *out <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
}

struct Range {
  uint64_t begin = 0;
  uint64_t end = 0;
};

// Validates one tensor entry (everything that does not depend on the other tensors).
Status parse_tensor_entry(const std::string& file,
                          const std::string& name,
                          const json& entry,
                          TensorInfo* info,
                          Range* range) {
  const std::string where = in_tensor(file, name);
  if (!entry.is_object()) return invalid_argument(where + "entry is not a JSON object");

  auto dtype_it = entry.find("dtype");
  if (dtype_it == entry.end() || !dtype_it->is_string()) {
    return invalid_argument(where + "missing or non-string \"dtype\"");
  }
  Expected<DType> dtype = parse_safetensors_dtype(dtype_it->get_ref<const std::string&>());
  if (!dtype) return dtype.status().with_context(file + ": tensor '" + shown(name) + "'");

  auto shape_it = entry.find("shape");
  if (shape_it == entry.end() || !shape_it->is_array()) {
    return invalid_argument(where + "missing or non-list \"shape\"");
  }
  // Count in uint64 with overflow checks: a hostile shape must not wrap to a small byte size.
  uint64_t elements = 1;
  std::vector<int64_t> shape;
  shape.reserve(shape_it->size());
  for (const json& d : *shape_it) {
    uint64_t dim = 0;
    if (!as_non_negative_int(d, &dim)) {
      return invalid_argument(where + "shape must be a list of non-negative integers");
    }
    if (__builtin_mul_overflow(elements, dim, &elements) ||
        elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return invalid_argument(where + "element count overflows");
    }
    shape.push_back(static_cast<int64_t>(dim));
  }
  uint64_t expected_bytes = 0;
  if (__builtin_mul_overflow(elements, static_cast<uint64_t>(dtype_size(*dtype)),
                             &expected_bytes)) {
    return invalid_argument(where + "byte size overflows");
  }

  auto offs_it = entry.find("data_offsets");
  if (offs_it == entry.end() || !offs_it->is_array() || offs_it->size() != 2 ||
      !as_non_negative_int((*offs_it)[0], &range->begin) ||
      !as_non_negative_int((*offs_it)[1], &range->end)) {
    return invalid_argument(where + "\"data_offsets\" must be [begin, end] of non-negative ints");
  }
  if (range->begin > range->end) {
    return out_of_range(where + "data_offsets [" + std::to_string(range->begin) + ", " +
                        std::to_string(range->end) + "] has begin > end");
  }
  if (range->end - range->begin != expected_bytes) {
    return invalid_argument(
        where + "data_offsets span " + std::to_string(range->end - range->begin) + " bytes but " +
        std::string(dtype_name(*dtype)) + " shape needs " + std::to_string(expected_bytes));
  }

  info->name = name;
  info->dtype = *dtype;
  info->shape = std::move(shape);
  info->num_bytes = static_cast<size_t>(expected_bytes);
  info->file = file;
  return Status::ok_status();
}

Status parse_metadata(const std::string& file,
                      const json& value,
                      std::map<std::string, std::string>* out) {
  if (!value.is_object()) return invalid_argument(file + ": __metadata__ is not a JSON object");
  for (const auto& [key, v] : value.items()) {
    if (!v.is_string()) {
      return invalid_argument(file + ": __metadata__ value for '" + shown(key) +
                              "' is not a string");
    }
    (*out)[key] = v.get_ref<const std::string&>();
  }
  return Status::ok_status();
}

// Tensors may leave gaps but must not share bytes (zero-byte tensors share nothing).
Status check_no_overlap(const std::string& file,
                        const std::vector<TensorInfo>& tensors,
                        const std::vector<Range>& ranges) {
  std::vector<size_t> order(tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return ranges[a].begin != ranges[b].begin ? ranges[a].begin < ranges[b].begin
                                              : ranges[a].end < ranges[b].end;
  });
  bool have_prev = false;
  size_t prev = 0;  // The non-empty tensor with the largest end so far.
  for (size_t i : order) {
    if (ranges[i].begin == ranges[i].end) continue;
    if (have_prev && ranges[i].begin < ranges[prev].end) {
      return invalid_argument(in_tensor(file, tensors[i].name) + "byte range overlaps tensor '" +
                              shown(tensors[prev].name) + "'");
    }
    if (!have_prev || ranges[i].end > ranges[prev].end) prev = i;
    have_prev = true;
  }
  return Status::ok_status();
}

Expected<ParsedSafetensors> parse_checked(const uint8_t* data,
                                          size_t size,
                                          const std::string& file) {
  if (size < 8) {
    return data_loss(file + ": file is " + std::to_string(size) +
                     " bytes, shorter than the 8-byte header length");
  }
  const uint64_t header_len = read_u64_le(data);
  if (header_len > kMaxSafetensorsHeaderBytes) {
    return invalid_argument(file + ": header length " + std::to_string(header_len) +
                            " exceeds the 100 MiB limit");
  }
  if (header_len > size - 8) {
    return data_loss(file + ": header length " + std::to_string(header_len) +
                     " exceeds the file size " + std::to_string(size) + " (truncated?)");
  }
  const uint8_t* header = data + 8;
  const uint8_t* data_section = header + header_len;
  const uint64_t data_size = size - 8 - header_len;

  // nlohmann keeps the last of duplicate keys silently; a callback sees every top-level key so a
  // duplicated tensor name is reported instead of one of the two entries vanishing.
  std::set<std::string, std::less<>> seen;
  std::string duplicate;
  auto on_event = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth == 1 && event == json::parse_event_t::key && duplicate.empty() &&
        parsed.is_string()) {
      const std::string& key = parsed.get_ref<const std::string&>();
      if (!seen.insert(key).second) duplicate = key.empty() ? std::string("\"\"") : key;
    }
    return true;
  };
  json root = json::parse(header, header + header_len, on_event, /*allow_exceptions=*/false);
  if (root.is_discarded()) return invalid_argument(file + ": header is not valid JSON");
  if (!root.is_object()) return invalid_argument(file + ": header is not a JSON object");
  if (!duplicate.empty()) {
    return invalid_argument(in_tensor(file, duplicate) + "appears twice in the header");
  }

  ParsedSafetensors out;
  out.header_bytes = static_cast<size_t>(header_len);
  std::vector<Range> ranges;
  out.tensors.reserve(root.size());
  ranges.reserve(root.size());
  for (const auto& [name, entry] : root.items()) {
    if (name == "__metadata__") {
      DI_RETURN_IF_ERROR(parse_metadata(file, entry, &out.metadata));
      continue;
    }
    TensorInfo info;
    Range range;
    DI_RETURN_IF_ERROR(parse_tensor_entry(file, name, entry, &info, &range));
    out.tensors.push_back(std::move(info));
    ranges.push_back(range);
  }
  DI_RETURN_IF_ERROR(check_no_overlap(file, out.tensors, ranges));

  // Checked last so that a header that is consistent in itself but points past the end of the
  // file reads as what it almost always is: a truncated download or copy.
  for (size_t i = 0; i < ranges.size(); ++i) {
    if (ranges[i].end > data_size) {
      return data_loss(in_tensor(file, out.tensors[i].name) + "data ends at byte " +
                       std::to_string(ranges[i].end) + " of the data section, which has only " +
                       std::to_string(data_size) + " (file truncated or offsets out of range)");
    }
    out.tensors[i].data = data_section + ranges[i].begin;
  }

  // File layout order; pointers into one buffer compare meaningfully.
  std::stable_sort(out.tensors.begin(), out.tensors.end(),
                   [](const TensorInfo& a, const TensorInfo& b) { return a.data < b.data; });
  return out;
}

}  // namespace

Expected<ParsedSafetensors> parse_safetensors(const uint8_t* data,
                                              size_t size,
                                              const std::string& file) {
  // Everything above reports problems as values; this only turns allocation failure (or a
  // library exception we did not foresee) into a Status so nothing escapes the API.
  try {
    return parse_checked(data, size, file);
  } catch (const std::bad_alloc&) {
    return resource_exhausted(file + ": out of memory while parsing the safetensors header");
  } catch (const std::exception& e) {
    return internal_error(file + ": unexpected error parsing the safetensors header: " + e.what());
  }
}

}  // namespace di::weights
