// Malformed files, built byte by byte: each must give the documented status code and a message
// that names the file and (when there is one) the tensor.
#include <gtest/gtest.h>

#include "model/weights/safetensors_file.h"
#include "model/weights/safetensors_parse.h"
#include "unit/weights/test_files.h"

namespace di::weights {
namespace {

using testing::contains;
using testing::raw_safetensors;
using testing::TempDir;

class SafetensorsErrorsTest : public ::testing::Test {
 protected:
  // Writes `bytes` to a fresh file and opens it, expecting failure with `code`; checks that the
  // message names the file and `tensor` (if not empty). Returns the message.
  std::string expect_error(const std::vector<uint8_t>& bytes,
                           StatusCode code,
                           const std::string& tensor) {
    const std::string path = dir_.file("case" + std::to_string(counter_++) + ".safetensors");
    testing::write_bytes(path, bytes);
    Expected<SafetensorsFile> f = SafetensorsFile::open(path);
    EXPECT_FALSE(f.has_value());
    if (f.has_value()) return "";
    const Status& st = f.status();
    EXPECT_EQ(st.code(), code) << st.to_string();
    EXPECT_TRUE(contains(st.message(), path)) << st.message();
    if (!tensor.empty()) {
      EXPECT_TRUE(contains(st.message(), "'" + tensor + "'")) << st.message();
    }
    return st.message();
  }

  TempDir dir_;
  int counter_ = 0;
};

// A valid one-tensor file (F32 [2,3] = 24 bytes) to mutate.
std::string one_tensor(const std::string& dtype,
                       const std::string& shape,
                       const std::string& offs) {
  return R"({"w":{"dtype":")" + dtype + R"(","shape":)" + shape + R"(,"data_offsets":)" + offs +
         "}}";
}

TEST_F(SafetensorsErrorsTest, BaselineIsValid) {
  const std::string path = dir_.file("ok.safetensors");
  testing::write_bytes(
      path, raw_safetensors(one_tensor("F32", "[2,3]", "[0,24]"), std::vector<uint8_t>(24)));
  Expected<SafetensorsFile> f = SafetensorsFile::open(path);
  ASSERT_TRUE(f.has_value()) << f.status().to_string();
  EXPECT_NE(f->find("w"), nullptr);
}

TEST_F(SafetensorsErrorsTest, ShorterThanEightBytes) {
  expect_error({}, StatusCode::kDataLoss, "");
  expect_error({1, 0, 0, 0}, StatusCode::kDataLoss, "");
}

TEST_F(SafetensorsErrorsTest, HeaderLengthBeyondFileOrLimit) {
  std::vector<uint8_t> bytes = raw_safetensors("{}", {});
  bytes[0] = 3;  // Claims a 3-byte header, file holds 2.
  expect_error(bytes, StatusCode::kDataLoss, "");
  std::vector<uint8_t> huge = raw_safetensors("{}", {});
  huge[3] = 0x10;  // 256 MiB + 2.
  std::string msg = expect_error(huge, StatusCode::kInvalidArgument, "");
  EXPECT_TRUE(contains(msg, "100 MiB")) << msg;
  std::vector<uint8_t> max = raw_safetensors("{}", {});
  for (int i = 0; i < 8; ++i) max[i] = 0xff;
  expect_error(max, StatusCode::kInvalidArgument, "");
}

TEST_F(SafetensorsErrorsTest, TruncatedFile) {
  std::vector<uint8_t> bytes =
      raw_safetensors(one_tensor("F32", "[2,3]", "[0,24]"), std::vector<uint8_t>(24));
  bytes.resize(bytes.size() - 1);
  std::string msg = expect_error(bytes, StatusCode::kDataLoss, "w");
  EXPECT_TRUE(contains(msg, "truncated")) << msg;
}

TEST_F(SafetensorsErrorsTest, BadJson) {
  expect_error(raw_safetensors(R"({"w":{"dtype":"F32",)", {}), StatusCode::kInvalidArgument, "");
  expect_error(raw_safetensors("", {}), StatusCode::kInvalidArgument, "");
  expect_error(raw_safetensors("[1,2]", {}), StatusCode::kInvalidArgument, "");
  expect_error(raw_safetensors("{} {}", {}), StatusCode::kInvalidArgument, "");
  expect_error(raw_safetensors("\"\xff\"", {}), StatusCode::kInvalidArgument, "");
}

TEST_F(SafetensorsErrorsTest, BadDType) {
  std::string msg =
      expect_error(raw_safetensors(one_tensor("F33", "[2,3]", "[0,24]"), std::vector<uint8_t>(24)),
                   StatusCode::kInvalidArgument, "w");
  EXPECT_TRUE(contains(msg, "F33")) << msg;
  expect_error(raw_safetensors(R"({"w":{"dtype":5,"shape":[],"data_offsets":[0,4]}})",
                               std::vector<uint8_t>(4)),
               StatusCode::kInvalidArgument, "w");
}

TEST_F(SafetensorsErrorsTest, BadShape) {
  for (const char* shape : {"[2,-3]", "[2,3.0]", "[2,\"3\"]", "{}", "[true]", "[[2]]",
                            "[4294967296,4294967296]", "[9223372036854775808]"}) {
    SCOPED_TRACE(shape);
    expect_error(raw_safetensors(one_tensor("F32", shape, "[0,24]"), std::vector<uint8_t>(24)),
                 StatusCode::kInvalidArgument, "w");
  }
}

TEST_F(SafetensorsErrorsTest, OffsetsOutOfRange) {
  // begin > end.
  expect_error(raw_safetensors(one_tensor("F32", "[0]", "[24,0]"), std::vector<uint8_t>(24)),
               StatusCode::kOutOfRange, "w");
  // Right size but past the end of the data section.
  std::string msg = expect_error(
      raw_safetensors(one_tensor("F32", "[2,3]", "[1000,1024]"), std::vector<uint8_t>(24)),
      StatusCode::kDataLoss, "w");
  EXPECT_TRUE(contains(msg, "out of range")) << msg;
  // Malformed offsets.
  for (const char* offs : {"[0]", "[0,24,24]", "[-1,23]", "[0,\"24\"]", "{}", "[0,24.0]"}) {
    SCOPED_TRACE(offs);
    expect_error(raw_safetensors(one_tensor("F32", "[2,3]", offs), std::vector<uint8_t>(24)),
                 StatusCode::kInvalidArgument, "w");
  }
}

TEST_F(SafetensorsErrorsTest, SizeMismatch) {
  std::string msg =
      expect_error(raw_safetensors(one_tensor("F32", "[2,3]", "[0,23]"), std::vector<uint8_t>(24)),
                   StatusCode::kInvalidArgument, "w");
  EXPECT_TRUE(contains(msg, "24")) << msg;
  expect_error(raw_safetensors(one_tensor("BF16", "[2,3]", "[0,24]"), std::vector<uint8_t>(24)),
               StatusCode::kInvalidArgument, "w");
}

TEST_F(SafetensorsErrorsTest, Overlap) {
  const std::string header = R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},)"
                             R"("b":{"dtype":"U8","shape":[4],"data_offsets":[7,11]}})";
  std::string msg = expect_error(raw_safetensors(header, std::vector<uint8_t>(16)),
                                 StatusCode::kInvalidArgument, "b");
  EXPECT_TRUE(contains(msg, "'a'")) << msg;
  // Containment, with the outer tensor sorting last by name.
  const std::string nested = R"({"z":{"dtype":"U8","shape":[16],"data_offsets":[0,16]},)"
                             R"("a":{"dtype":"U8","shape":[2],"data_offsets":[4,6]}})";
  expect_error(raw_safetensors(nested, std::vector<uint8_t>(16)), StatusCode::kInvalidArgument, "");
}

TEST_F(SafetensorsErrorsTest, EmptyTensorsAndGapsAreNotOverlaps) {
  const std::string header = R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                             R"("e1":{"dtype":"F32","shape":[0],"data_offsets":[2,2]},)"
                             R"("e2":{"dtype":"F32","shape":[0,5],"data_offsets":[2,2]},)"
                             R"("b":{"dtype":"U8","shape":[4],"data_offsets":[8,12]}})";
  const std::string path = dir_.file("gaps.safetensors");
  testing::write_bytes(path, raw_safetensors(header, std::vector<uint8_t>(16)));
  Expected<SafetensorsFile> f = SafetensorsFile::open(path);
  ASSERT_TRUE(f.has_value()) << f.status().to_string();
  ASSERT_EQ(f->tensors().size(), 4u);
  EXPECT_EQ(f->tensors().front().name, "a");
  EXPECT_EQ(f->tensors().back().name, "b");
}

// Hostile nesting must be an error, not a stack overflow in parsing or in freeing the JSON tree.
TEST_F(SafetensorsErrorsTest, DeeplyNestedJson) {
  constexpr size_t kDepth = 1'000'000;
  const std::string deep = std::string(kDepth, '[') + std::string(kDepth, ']');
  expect_error(raw_safetensors(deep, {}), StatusCode::kInvalidArgument, "");
  expect_error(raw_safetensors(R"({"w":)" + deep + "}", {}), StatusCode::kInvalidArgument, "w");
  expect_error(raw_safetensors(std::string(kDepth, '['), {}), StatusCode::kInvalidArgument, "");
}

TEST_F(SafetensorsErrorsTest, DuplicateTensorInHeader) {
  const std::string header = R"({"w":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                             R"("w":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})";
  expect_error(raw_safetensors(header, std::vector<uint8_t>(8)), StatusCode::kInvalidArgument, "w");
}

TEST_F(SafetensorsErrorsTest, BadMetadata) {
  expect_error(raw_safetensors(R"({"__metadata__":{"k":1}})", {}), StatusCode::kInvalidArgument,
               "");
  expect_error(raw_safetensors(R"({"__metadata__":["k"]})", {}), StatusCode::kInvalidArgument, "");
  std::string msg = expect_error(raw_safetensors(R"({"__metadata__":{"k":"v","n":null}})", {}),
                                 StatusCode::kInvalidArgument, "");
  EXPECT_TRUE(contains(msg, "__metadata__")) << msg;
}

TEST_F(SafetensorsErrorsTest, MissingFileAndDirectory) {
  Expected<SafetensorsFile> f = SafetensorsFile::open(dir_.file("absent.safetensors"));
  ASSERT_FALSE(f.has_value());
  EXPECT_EQ(f.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(contains(f.status().message(), "absent.safetensors"));
  Expected<SafetensorsFile> d = SafetensorsFile::open(dir_.path());
  ASSERT_FALSE(d.has_value());
  EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument);
}

// The parser works on any buffer (this is what the fuzzer drives); data pointers land inside it.
TEST(SafetensorsParseTest, ParsesFromABufferWithoutTouchingData) {
  std::vector<uint8_t> bytes =
      raw_safetensors(one_tensor("F32", "[2,3]", "[0,24]"), std::vector<uint8_t>(24, 0xab));
  Expected<ParsedSafetensors> p = parse_safetensors(bytes.data(), bytes.size(), "buf");
  ASSERT_TRUE(p.has_value()) << p.status().to_string();
  ASSERT_EQ(p->tensors.size(), 1u);
  EXPECT_EQ(p->tensors[0].data, bytes.data() + 8 + p->header_bytes);
  EXPECT_EQ(p->tensors[0].file, "buf");
}

}  // namespace
}  // namespace di::weights
