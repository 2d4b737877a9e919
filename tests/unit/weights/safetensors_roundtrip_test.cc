// Writer -> reader round trips, plus checks of the written layout made with plain JSON parsing so
// that a bug shared by writer and reader cannot hide.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "model/weights/safetensors_file.h"
#include "model/weights/safetensors_writer.h"
#include "unit/weights/test_files.h"

namespace di::weights {
namespace {

using testing::contains;
using testing::random_bytes;
using testing::TempDir;

struct Spec {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

// One tensor per dtype with odd shapes (so offsets are not all 8-aligned), a scalar and an empty
// tensor.
std::vector<Spec> make_specs() {
  std::vector<Spec> specs;
  uint32_t seed = 1;
  for (DType d : kAllDTypes) {
    std::vector<int64_t> shape = {3, static_cast<int64_t>(seed % 5) + 1, 7};
    size_t n = 3 * shape[1] * 7 * dtype_size(d);
    specs.push_back({"t." + std::string(dtype_name(d)), d, shape, random_bytes(n, seed++)});
  }
  specs.push_back({"scalar", DType::kF64, {}, random_bytes(8, 99)});
  specs.push_back({"empty", DType::kBF16, {4, 0}, {}});
  return specs;
}

TEST(SafetensorsRoundTripTest, EveryDTypeBitwise) {
  TempDir dir;
  const std::string path = dir.file("rt.safetensors");
  const std::vector<Spec> specs = make_specs();
  SafetensorsWriter w;
  std::vector<std::string> fill_order;
  for (size_t i = 0; i < specs.size(); ++i) {
    const Spec& s = specs[i];
    if (i % 2 == 0) {
      w.add_bytes(s.name, s.dtype, s.shape, s.bytes);
    } else {
      w.add(s.name, s.dtype, s.shape, [&fill_order, &s](uint8_t* dst, size_t n) {
        fill_order.push_back(s.name);
        ASSERT_EQ(n, s.bytes.size());
        if (n > 0) std::memcpy(dst, s.bytes.data(), n);
      });
    }
  }
  w.set_metadata("format", "pt");
  w.set_metadata("note", "round \"trip\" \xc3\xa9");
  ASSERT_TRUE(w.write(path).ok());

  Expected<SafetensorsFile> f = SafetensorsFile::open(path);
  ASSERT_TRUE(f.has_value()) << f.status().to_string();
  EXPECT_EQ(f->path(), path);
  ASSERT_EQ(f->tensors().size(), specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    const Spec& s = specs[i];
    EXPECT_EQ(f->tensors()[i].name, s.name) << "tensors() must be in add order";
    const TensorInfo* t = f->find(s.name);
    ASSERT_NE(t, nullptr) << s.name;
    EXPECT_EQ(t->dtype, s.dtype) << s.name;
    EXPECT_EQ(t->shape, s.shape) << s.name;
    EXPECT_EQ(t->file, path);
    ASSERT_EQ(t->num_bytes, s.bytes.size()) << s.name;
    EXPECT_EQ(static_cast<size_t>(t->num_elements()) * dtype_size(t->dtype), t->num_bytes);
    if (t->num_bytes > 0) {
      EXPECT_EQ(std::memcmp(t->data, s.bytes.data(), t->num_bytes), 0) << s.name;
    }
  }
  EXPECT_EQ(f->find("t.F3"), nullptr);
  EXPECT_EQ(f->find(""), nullptr);
  ASSERT_EQ(f->metadata().size(), 2u);
  EXPECT_EQ(f->metadata().at("note"), "round \"trip\" \xc3\xa9");

  std::vector<std::string> expected_fill;
  for (size_t i = 1; i < specs.size(); i += 2) expected_fill.push_back(specs[i].name);
  EXPECT_EQ(fill_order, expected_fill) << "fill must run once per tensor, in add order";

  // Moving the file keeps every TensorInfo pointer valid.
  const TensorInfo* before = f->find("scalar");
  SafetensorsFile moved = std::move(f).value();
  EXPECT_EQ(moved.find("scalar"), before);
}

TEST(SafetensorsRoundTripTest, LayoutMatchesTheFormat) {
  TempDir dir;
  const std::string path = dir.file("layout.safetensors");
  const std::vector<Spec> specs = make_specs();
  SafetensorsWriter w;
  for (const Spec& s : specs) w.add_bytes(s.name, s.dtype, s.shape, s.bytes);
  ASSERT_TRUE(w.write(path).ok());

  std::vector<uint8_t> raw = testing::read_bytes(path);
  ASSERT_GE(raw.size(), 8u);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | raw[i];
  EXPECT_EQ(n % 8, 0u) << "header must be padded to a multiple of 8";
  ASSERT_LE(8 + n, raw.size());
  std::string header(raw.begin() + 8, raw.begin() + 8 + static_cast<std::ptrdiff_t>(n));
  EXPECT_EQ(header.find_last_not_of(' ') + 1, header.find_last_of('}') + 1);
  nlohmann::json j = nlohmann::json::parse(header);
  EXPECT_FALSE(j.contains("__metadata__")) << "no metadata was set";
  uint64_t offset = 0;
  for (const Spec& s : specs) {
    ASSERT_TRUE(j.contains(s.name)) << s.name;
    const auto& e = j[s.name];
    EXPECT_EQ(e["dtype"].get<std::string>(), dtype_name(s.dtype));
    EXPECT_EQ(e["shape"].get<std::vector<int64_t>>(), s.shape);
    uint64_t b = e["data_offsets"][0].get<uint64_t>();
    uint64_t end = e["data_offsets"][1].get<uint64_t>();
    EXPECT_EQ(b, offset) << "tensors are packed back to back in add order";
    EXPECT_EQ(end - b, s.bytes.size());
    ASSERT_LE(8 + n + end, raw.size());
    EXPECT_TRUE(std::equal(s.bytes.begin(), s.bytes.end(), raw.begin() + 8 + n + b)) << s.name;
    offset = end;
  }
  EXPECT_EQ(raw.size(), 8 + n + offset) << "no trailing bytes";
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST(SafetensorsRoundTripTest, WriterRejectsBadInput) {
  TempDir dir;
  const std::string path = dir.file("bad.safetensors");
  {
    SafetensorsWriter w;
    w.add_bytes("a", DType::kF32, {2, 2}, std::vector<uint8_t>(15));
    Status st = w.write(path);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(contains(st.message(), "'a'")) << st.message();
  }
  {
    SafetensorsWriter w;
    w.add_bytes("a", DType::kU8, {1}, {1});
    w.add_bytes("a", DType::kU8, {1}, {2});
    EXPECT_EQ(w.write(path).code(), StatusCode::kInvalidArgument);
  }
  {
    SafetensorsWriter w;
    w.add_bytes("neg", DType::kU8, {-1}, {});
    EXPECT_EQ(w.write(path).code(), StatusCode::kInvalidArgument);
  }
  {
    SafetensorsWriter w;
    w.add_bytes("bad\xff", DType::kU8, {1}, {1});
    EXPECT_EQ(w.write(path).code(), StatusCode::kInvalidArgument);
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  {
    SafetensorsWriter w;
    w.add_bytes("a", DType::kU8, {1}, {1});
    Status st = w.write(dir.file("no/such/dir/x.safetensors"));
    EXPECT_EQ(st.code(), StatusCode::kUnavailable);
    EXPECT_TRUE(contains(st.message(), "no/such/dir")) << st.message();
  }
}

}  // namespace
}  // namespace di::weights
