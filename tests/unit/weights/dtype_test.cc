#include "model/weights/dtype.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace di::weights {
namespace {

TEST(DTypeTest, NamesRoundTripAndAreDistinct) {
  std::set<std::string> names;
  for (DType d : kAllDTypes) {
    std::string name(dtype_name(d));
    EXPECT_TRUE(names.insert(name).second) << "duplicate name " << name;
    Expected<DType> parsed = parse_safetensors_dtype(name);
    ASSERT_TRUE(parsed.has_value()) << name << ": " << parsed.status().to_string();
    EXPECT_EQ(*parsed, d) << name;
  }
  EXPECT_EQ(names.size(), 12u);
}

TEST(DTypeTest, SpellingsAndSizesFollowTheSafetensorsFormat) {
  // The format's own spellings and widths (safetensors spec), not values read from the code.
  struct Case {
    const char* name;
    size_t size;
  };
  const Case cases[] = {{"BOOL", 1}, {"U8", 1},  {"I8", 1},      {"I16", 2},
                        {"I32", 4},  {"I64", 8}, {"F16", 2},     {"BF16", 2},
                        {"F32", 4},  {"F64", 8}, {"F8_E4M3", 1}, {"F8_E8M0", 1}};
  for (const Case& c : cases) {
    Expected<DType> d = parse_safetensors_dtype(c.name);
    ASSERT_TRUE(d.has_value()) << c.name;
    EXPECT_EQ(dtype_size(*d), c.size) << c.name;
    EXPECT_EQ(dtype_name(*d), c.name);
  }
}

TEST(DTypeTest, UnknownNamesAreErrors) {
  for (const char* bad : {"", "bf16", "F8_E5M2", "FP32", "F32 ", "I128"}) {
    Expected<DType> d = parse_safetensors_dtype(bad);
    ASSERT_FALSE(d.has_value()) << bad;
    EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace di::weights
