#include "model/state_pool.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace di::model {
namespace {

ModelConfig golden_config() {
  std::ifstream in(std::string(DI_SHARED_DIR) + "/golden/v41-mini/checkpoint/config.json");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_model_config(ss.str()).value();
}

TEST(StatePool, SlotsAndPagesAreRecycled) {
  const backend::HostMemory host;
  auto c = golden_config();
  auto pool = StatePool::create(c, {2, 64, 8}, host).value();
  auto a = pool.create_sequence().value();
  auto b = pool.create_sequence().value();
  EXPECT_NE(a.slot, b.slot);
  auto third = pool.create_sequence();
  ASSERT_FALSE(third.has_value());
  EXPECT_EQ(third.status().code(), StatusCode::kResourceExhausted);
  ASSERT_TRUE(pool.reserve(a, 40).ok());
  EXPECT_EQ(a.streams[0].pages.size(), 3u);  // layer 1, ratio 2: 20 entries in pages of 8
  EXPECT_EQ(a.streams[1].pages.size(), 5u);  // layer 4, ratio 1: 40 entries
  // Distinct rows for distinct entries, and window rows wrap around the ring.
  EXPECT_NE(pool.compressed_kv_row_index(a, 1, 0), pool.compressed_kv_row_index(a, 1, 8));
  EXPECT_EQ(pool.window_row_index(a, 3, 2), pool.window_row_index(a, 3, 2 + c.window_size));
  EXPECT_NE(pool.window_row_index(a, 3, 2), pool.window_row_index(b, 3, 2));
  pool.release_sequence(a);
  auto again = pool.create_sequence();
  ASSERT_TRUE(again.has_value());
  pool.release_sequence(b);
  pool.release_sequence(*again);
}

TEST(StatePool, ReserveFailsCleanlyWhenFull) {
  const backend::HostMemory host;
  auto c = golden_config();
  auto pool = StatePool::create(c, {2, 32, 8}, host).value();
  auto a = pool.create_sequence().value();
  Status s = pool.reserve(a, 1000);
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(a.streams[0].pages.empty());  // nothing half-allocated
  c.max_seq_len = 16;
  auto small = StatePool::create(c, {1, 64, 8}, host).value();
  auto b = small.create_sequence().value();
  EXPECT_EQ(small.reserve(b, 17).code(), StatusCode::kOutOfRange);
  EXPECT_FALSE(StatePool::create(c, {0, 64, 8}, host).has_value());
}

}  // namespace
}  // namespace di::model
