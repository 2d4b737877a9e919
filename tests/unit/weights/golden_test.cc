// Opens the shared golden files (read-only) to check the reader against files written by the
// Python reference, not by our writer.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "model/weights/checkpoint.h"
#include "model/weights/safetensors_file.h"

namespace di::weights {
namespace {

const std::string kGoldenDir = std::string(DI_SHARED_DIR) + "/golden/v41-mini";

#define SKIP_WITHOUT_GOLDEN()                                            \
  if (!std::filesystem::exists(kGoldenDir)) {                            \
    GTEST_SKIP() << "shared golden files not present at " << kGoldenDir; \
  }

void expect_tensor(const TensorInfo* t, DType dtype, const std::vector<int64_t>& shape) {
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->dtype, dtype) << t->name;
  EXPECT_EQ(t->shape, shape) << t->name;
  EXPECT_EQ(t->num_bytes, static_cast<size_t>(t->num_elements()) * dtype_size(dtype)) << t->name;
}

TEST(GoldenTest, MiniCheckpoint) {
  SKIP_WITHOUT_GOLDEN();
  Expected<Checkpoint> c = Checkpoint::open_dir(kGoldenDir + "/checkpoint");
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->num_tensors(), 762u);
  expect_tensor(c->find("layers.1.attn.wkv.weight"), DType::kF8E4M3, {64, 128});
  expect_tensor(c->find("layers.1.attn.wkv.scale"), DType::kF8E8M0, {2, 4});
  expect_tensor(c->find("layers.1.ffn.experts.0.w1.weight"), DType::kI8, {64, 64});

  // Every tensor lies inside the file and the ranges are disjoint (checked independently of the
  // reader's own validation by sorting the pointers here).
  const SafetensorsFile& f = c->files().at(0);
  std::vector<std::pair<const uint8_t*, size_t>> ranges;
  for (const TensorInfo& t : f.tensors()) ranges.emplace_back(t.data, t.num_bytes);
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    EXPECT_LE(ranges[i - 1].first + ranges[i - 1].second, ranges[i].first);
  }
  const auto file_size = std::filesystem::file_size(f.path());
  ASSERT_FALSE(ranges.empty());
  EXPECT_LE(static_cast<uint64_t>(ranges.back().first + ranges.back().second - ranges[0].first),
            file_size);

  // Scales are powers of two: ue8m0 bytes 255 (NaN) must not appear in a real checkpoint.
  const TensorInfo* s = c->find("layers.1.attn.wkv.scale");
  for (size_t i = 0; i < s->num_bytes; ++i) EXPECT_NE(s->data[i], 0xff);
}

TEST(GoldenTest, GoldenOutputs) {
  SKIP_WITHOUT_GOLDEN();
  Expected<SafetensorsFile> f = SafetensorsFile::open(kGoldenDir + "/golden.safetensors");
  ASSERT_TRUE(f.has_value()) << f.status().to_string();
  const TensorInfo* logits = f->find("seq0.full.logits");
  expect_tensor(logits, DType::kF32, {40, 512});
  expect_tensor(f->find("seq0.full.engram_hash"), DType::kI64, {40, 2, 4});
  EXPECT_FALSE(f->metadata().empty());
  size_t finite = 0;
  for (int64_t i = 0; i < logits->num_elements(); ++i) {
    float v;
    std::memcpy(&v, logits->data + 4 * i, 4);
    finite += std::isfinite(v) ? 1 : 0;
  }
  EXPECT_EQ(finite, static_cast<size_t>(logits->num_elements()));
}

}  // namespace
}  // namespace di::weights
