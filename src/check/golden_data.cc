#include "check/golden_data.h"

#include <cstring>
#include <fstream>

#include "tensor/numeric.h"

namespace di::check {

Expected<GoldenData> GoldenData::open(const std::string& dir) {
  DI_ASSIGN_OR_RETURN(auto file, weights::SafetensorsFile::open(dir + "/golden.safetensors"));
  GoldenData g(std::move(file));
  std::ifstream in(dir + "/manifest.json");
  if (!in) return not_found("cannot read " + dir + "/manifest.json");
  g.manifest_ = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (g.manifest_.is_discarded() || !g.manifest_.is_object()) {
    return invalid_argument(dir + "/manifest.json is not a JSON object");
  }
  return g;
}

Expected<std::vector<int64_t>> GoldenData::shape(const std::string& name) const {
  const weights::TensorInfo* t = file_.find(name);
  if (!t) return not_found(file_.path() + ": no tensor '" + name + "'");
  return t->shape;
}

Expected<std::vector<float>> GoldenData::floats(const std::string& name) const {
  const weights::TensorInfo* t = file_.find(name);
  if (!t) return not_found(file_.path() + ": no tensor '" + name + "'");
  std::vector<float> out(static_cast<size_t>(t->num_elements()));
  for (size_t i = 0; i < out.size(); ++i) {
    if (t->dtype == weights::DType::kF32) {
      std::memcpy(&out[i], t->data + 4 * i, 4);
    } else if (t->dtype == weights::DType::kBF16) {
      uint16_t h;
      std::memcpy(&h, t->data + 2 * i, 2);
      out[i] = bf16_to_float(h);
    } else {
      return invalid_argument(file_.path() + ": tensor '" + name + "' is not F32 or BF16");
    }
  }
  return out;
}

Expected<std::vector<int64_t>> GoldenData::ints(const std::string& name) const {
  const weights::TensorInfo* t = file_.find(name);
  if (!t) return not_found(file_.path() + ": no tensor '" + name + "'");
  std::vector<int64_t> out(static_cast<size_t>(t->num_elements()));
  for (size_t i = 0; i < out.size(); ++i) {
    if (t->dtype == weights::DType::kI64) {
      std::memcpy(&out[i], t->data + 8 * i, 8);
    } else if (t->dtype == weights::DType::kI32) {
      int32_t v;
      std::memcpy(&v, t->data + 4 * i, 4);
      out[i] = v;
    } else if (t->dtype == weights::DType::kU8) {
      out[i] = t->data[i];
    } else {
      return invalid_argument(file_.path() + ": tensor '" + name + "' is not an integer tensor");
    }
  }
  return out;
}

}  // namespace di::check
