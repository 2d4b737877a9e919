#include "model/weights/checkpoint.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>

#include "model/weights/safetensors_writer.h"
#include "unit/weights/test_files.h"

namespace di::weights {
namespace {

using testing::contains;
using testing::random_bytes;
using testing::TempDir;

// Writes a shard holding `names`, each a U8 tensor of random bytes; returns name -> bytes.
std::map<std::string, std::vector<uint8_t>> write_shard(const std::string& path,
                                                        const std::vector<std::string>& names,
                                                        uint32_t seed) {
  std::map<std::string, std::vector<uint8_t>> out;
  SafetensorsWriter w;
  for (const std::string& n : names) {
    std::vector<uint8_t> bytes = random_bytes(16 + seed % 7, seed);
    ++seed;
    w.add_bytes(n, DType::kU8, {static_cast<int64_t>(bytes.size())}, bytes);
    out[n] = bytes;
  }
  Status st = w.write(path);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return out;
}

void expect_bytes(const Checkpoint& c, const std::map<std::string, std::vector<uint8_t>>& want) {
  for (const auto& [name, bytes] : want) {
    const TensorInfo* t = c.find(name);
    ASSERT_NE(t, nullptr) << name;
    ASSERT_EQ(t->num_bytes, bytes.size()) << name;
    EXPECT_EQ(std::memcmp(t->data, bytes.data(), bytes.size()), 0) << name;
  }
}

TEST(CheckpointTest, ShardedViaIndex) {
  TempDir dir;
  auto a = write_shard(dir.file("model-00001-of-00002.safetensors"), {"x.b", "x.a"}, 1);
  auto b = write_shard(dir.file("model-00002-of-00002.safetensors"), {"y", "w"}, 10);
  // A stray file not named by the index must be ignored.
  write_shard(dir.file("stray.safetensors"), {"x.a"}, 20);
  std::map<std::string, std::string> shard_of;
  for (const auto& [n, _] : a) shard_of[n] = "model-00001-of-00002.safetensors";
  for (const auto& [n, _] : b) shard_of[n] = "model-00002-of-00002.safetensors";
  ASSERT_TRUE(write_index_json(dir.path(), shard_of).ok());

  Expected<Checkpoint> c = Checkpoint::open_dir(dir.path());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->num_tensors(), 4u);
  EXPECT_EQ(c->names(), (std::vector<std::string>{"w", "x.a", "x.b", "y"}));
  EXPECT_EQ(c->files().size(), 2u);
  expect_bytes(*c, a);
  expect_bytes(*c, b);
  EXPECT_TRUE(contains(c->find("y")->file, "model-00002-of-00002"));
  EXPECT_EQ(c->find("stray"), nullptr);

  const TensorInfo* before = c->find("x.a");
  Checkpoint moved = std::move(c).value();
  EXPECT_EQ(moved.find("x.a"), before);
}

TEST(CheckpointTest, SingleFileAndGlobFallbacks) {
  TempDir single;
  auto s = write_shard(single.file("model.safetensors"), {"p", "q"}, 3);
  write_shard(single.file("other.safetensors"), {"p"}, 4);  // Ignored: model.safetensors wins.
  Expected<Checkpoint> c1 = Checkpoint::open_dir(single.path());
  ASSERT_TRUE(c1.has_value()) << c1.status().to_string();
  EXPECT_EQ(c1->num_tensors(), 2u);
  expect_bytes(*c1, s);

  TempDir glob;
  auto g1 = write_shard(glob.file("b.safetensors"), {"m"}, 5);
  auto g2 = write_shard(glob.file("a.safetensors"), {"n"}, 6);
  Expected<Checkpoint> c2 = Checkpoint::open_dir(glob.path());
  ASSERT_TRUE(c2.has_value()) << c2.status().to_string();
  EXPECT_EQ(c2->names(), (std::vector<std::string>{"m", "n"}));
  ASSERT_EQ(c2->files().size(), 2u);
  EXPECT_TRUE(contains(c2->files()[0].path(), "a.safetensors"));
  expect_bytes(*c2, g1);
  expect_bytes(*c2, g2);
}

TEST(CheckpointTest, DuplicateTensorAcrossShards) {
  TempDir dir;
  write_shard(dir.file("s1.safetensors"), {"dup", "u"}, 1);
  write_shard(dir.file("s2.safetensors"), {"dup", "v"}, 2);
  Expected<Checkpoint> c = Checkpoint::open_dir(dir.path());
  ASSERT_FALSE(c.has_value());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(c.status().message(), "'dup'")) << c.status().message();
  EXPECT_TRUE(contains(c.status().message(), dir.file("s1.safetensors"))) << c.status().message();
  EXPECT_TRUE(contains(c.status().message(), dir.file("s2.safetensors"))) << c.status().message();

  // The same through an index.
  ASSERT_TRUE(
      write_index_json(
          dir.path(), {{"dup", "s1.safetensors"}, {"u", "s1.safetensors"}, {"v", "s2.safetensors"}})
          .ok());
  Expected<Checkpoint> ci = Checkpoint::open_dir(dir.path());
  ASSERT_FALSE(ci.has_value());
  EXPECT_EQ(ci.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(ci.status().message(), "'dup'")) << ci.status().message();
}

TEST(CheckpointTest, IndexNamingMissingShard) {
  TempDir dir;
  write_shard(dir.file("s1.safetensors"), {"a"}, 1);
  ASSERT_TRUE(
      write_index_json(dir.path(), {{"a", "s1.safetensors"}, {"b", "gone.safetensors"}}).ok());
  Expected<Checkpoint> c = Checkpoint::open_dir(dir.path());
  ASSERT_FALSE(c.has_value());
  EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(contains(c.status().message(), "gone.safetensors")) << c.status().message();
  EXPECT_TRUE(contains(c.status().message(), kIndexFileName)) << c.status().message();
}

TEST(CheckpointTest, IndexNamingTensorAbsentFromShard) {
  TempDir dir;
  write_shard(dir.file("s1.safetensors"), {"a"}, 1);
  write_shard(dir.file("s2.safetensors"), {"b"}, 2);
  // "b" is really in s2, the index claims s1.
  ASSERT_TRUE(
      write_index_json(dir.path(),
                       {{"a", "s1.safetensors"}, {"b", "s1.safetensors"}, {"c", "s2.safetensors"}})
          .ok());
  Expected<Checkpoint> c = Checkpoint::open_dir(dir.path());
  ASSERT_FALSE(c.has_value());
  EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(contains(c.status().message(), "'b'") || contains(c.status().message(), "'c'"))
      << c.status().message();
  EXPECT_TRUE(contains(c.status().message(), "s1.safetensors") ||
              contains(c.status().message(), "s2.safetensors"))
      << c.status().message();
}

TEST(CheckpointTest, BadIndexAndDirectories) {
  TempDir dir;
  testing::write_bytes(dir.file(kIndexFileName), {'{', 'x'});
  Expected<Checkpoint> c = Checkpoint::open_dir(dir.path());
  ASSERT_FALSE(c.has_value());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(c.status().message(), kIndexFileName));

  // Shard names may not leave the directory.
  ASSERT_TRUE(write_index_json(dir.path(), {{"a", "../s1.safetensors"}}).ok());
  EXPECT_EQ(Checkpoint::open_dir(dir.path()).status().code(), StatusCode::kInvalidArgument);

  TempDir empty;
  EXPECT_EQ(Checkpoint::open_dir(empty.path()).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(Checkpoint::open_dir(empty.file("nope")).status().code(), StatusCode::kNotFound);
}

TEST(CheckpointTest, CorruptShardNamesTheShard) {
  TempDir dir;
  testing::write_bytes(dir.file("model.safetensors"), {1, 2, 3});
  Expected<Checkpoint> c = Checkpoint::open_dir(dir.path());
  ASSERT_FALSE(c.has_value());
  EXPECT_EQ(c.status().code(), StatusCode::kDataLoss);
  EXPECT_TRUE(contains(c.status().message(), dir.file("model.safetensors")));
}

}  // namespace
}  // namespace di::weights
