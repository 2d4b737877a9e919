// Op tracing (TracingOps, `--trace-ops`) over the CPU backend: the checksum's definition against a
// plain loop written out here, and a trace's lines against the outputs they describe.
#include "backend/tracing_ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backend/checksum.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/select.h"
#include "op_test_util.h"

namespace di::backend {
namespace {

// splitmix64 of (index, word) summed over little-endian 8-byte words, written out plainly.
uint64_t plain_checksum(const std::vector<uint8_t>& bytes) {
  auto mix = [](uint64_t index, uint64_t word) {
    uint64_t z = word + 0x9E3779B97F4A7C15ull * (index + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  uint64_t sum = mix(~uint64_t{0}, bytes.size());
  for (size_t i = 0; i < bytes.size(); i += 8) {
    uint64_t word = 0;
    for (size_t b = 0; b < 8 && i + b < bytes.size(); ++b) {
      word |= uint64_t{bytes[i + b]} << (8 * b);
    }
    sum += mix(i / 8, word);
  }
  return sum;
}

TEST(Checksum, MatchesThePlainDefinitionAndSeesEveryByte) {
  std::mt19937 rng(7);
  for (size_t n : {0u, 1u, 7u, 8u, 9u, 37u, 1000u}) {
    std::vector<uint8_t> v(n);
    for (auto& b : v) b = static_cast<uint8_t>(rng());
    const uint64_t c = checksum_bytes(v.data(), v.size());
    EXPECT_EQ(c, plain_checksum(v)) << n;
    for (size_t i = 0; i < n; ++i) {  // every byte counts
      v[i] ^= 1;
      EXPECT_NE(checksum_bytes(v.data(), v.size()), c) << n << " byte " << i;
      v[i] ^= 1;
    }
    if (n >= 16) {  // swapped words count
      std::swap_ranges(v.begin(), v.begin() + 8, v.begin() + 8);
      if (!std::equal(v.begin(), v.begin() + 8, v.begin() + 8)) {
        EXPECT_NE(checksum_bytes(v.data(), v.size()), c);
      }
    }
    v.push_back(0);  // so does the length, even with a zero byte
    EXPECT_NE(checksum_bytes(v.data(), v.size()), c) << n;
  }
}

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

std::string hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// A norm, a product and an argmax traced on the CPU; `bump` changes one input value.
std::vector<std::string> trace_small_run(const std::string& path, float bump) {
  ThreadPool pool(2);
  auto traced = TracingOps::create(std::make_unique<CpuOps>(pool), path);
  EXPECT_TRUE(traced.has_value()) << traced.status().to_string();
  if (!traced) return {};
  const Ops& ops = **traced;
  std::vector<float> x = testing::random_vector(3 * 64, 1), w = testing::random_vector(64, 2),
                     wl = testing::random_vector(5 * 64, 3), norm(3 * 64), y(3 * 5);
  x[70] += bump;
  ops.rms_norm(ConstRowsView(x.data(), 3, 64), w.data(), 1e-6f, RowsView{norm.data(), 3, 64});
  const WeightView lw{WeightFormat::kF32, 5, 64, reinterpret_cast<const uint8_t*>(wl.data()),
                      nullptr};
  ops.linear(ConstRowsView(norm.data(), 3, 64), lw, RowsView{y.data(), 3, 5}, true);
  int32_t tokens[3] = {};
  ops.argmax_rows(ConstRowsView(y.data(), 3, 5), tokens);
  EXPECT_TRUE(static_cast<const TracingOps&>(ops).flush().ok());
  auto lines = lines_of(path);
  // Each line: record, op, output, bytes, checksum of exactly those bytes.
  // (The argmax into host memory is the backend's argmax, then a download.)
  EXPECT_EQ(lines.size(), 4u);
  if (lines.size() == 4) {
    EXPECT_EQ(lines[0], "0 rms_norm y 768 " + hex(checksum_bytes(norm.data(), 768)));
    EXPECT_EQ(lines[1], "1 linear y 60 " + hex(checksum_bytes(y.data(), 60)));
    EXPECT_EQ(lines[2], "2 argmax_rows tokens 12 " + hex(checksum_bytes(tokens, 12)));
    EXPECT_EQ(lines[3], "3 download host 12 " + hex(checksum_bytes(tokens, 12)));
  }
  return lines;
}

TEST(TracingOps, RecordsEachOutputAndTheFirstDifferenceShowsWhereRunsSplit) {
  const auto dir = std::filesystem::temp_directory_path();
  const std::string a = (dir / "di_trace_a.txt").string(), b = (dir / "di_trace_b.txt").string(),
                    c = (dir / "di_trace_c.txt").string();
  const auto first = trace_small_run(a, 0.0f);
  EXPECT_EQ(trace_small_run(b, 0.0f), first);  // the CPU is deterministic
  const auto bumped = trace_small_run(c, 0.5f);
  ASSERT_EQ(bumped.size(), first.size());
  EXPECT_NE(bumped[0], first[0]);  // row 1 of the norm's output changes first
  std::filesystem::remove(a);
  std::filesystem::remove(b);
  std::filesystem::remove(c);
}

TEST(TracingOps, AnUnwritablePathIsAnErrorNamingTheFlag) {
  ThreadPool pool(1);
  BackendOptions o;
  o.trace_ops = "/nonexistent-dir/trace.txt";
  auto ops = make_backend(pool, o);
  ASSERT_FALSE(ops.has_value());
  EXPECT_NE(ops.status().to_string().find("--trace-ops"), std::string::npos)
      << ops.status().to_string();
}

}  // namespace
}  // namespace di::backend
