#include "util/status.h"

#include <gtest/gtest.h>

namespace di {
namespace {

Expected<int> parse_positive(int v) {
  if (v <= 0) return invalid_argument("value must be positive, got " + std::to_string(v));
  return v;
}

Status use_parse(int v, int* out) {
  DI_ASSIGN_OR_RETURN(*out, parse_positive(v));
  return Status();
}

TEST(Status, CarriesCodeAndMessage) {
  Status s = invalid_argument("bad flag --x");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.to_string(), "INVALID_ARGUMENT: bad flag --x");
  EXPECT_EQ(s.with_context("config.json").message(), "config.json: bad flag --x");
}

TEST(Expected, PropagatesThroughMacros) {
  int out = 0;
  EXPECT_TRUE(use_parse(3, &out).ok());
  EXPECT_EQ(out, 3);
  Status s = use_parse(-1, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(out, 3);
}

}  // namespace
}  // namespace di
