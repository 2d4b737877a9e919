// CudaOps' backend memory (device buffers, copies, gathers) and the MoE combine's row ops against
// CpuOps, bitwise; and a whole Buffer round trip through device memory.
#include <chrono>
#include <numeric>
#include <random>
#include <thread>

#include "backend/checksum.h"
#include "cuda_test_util.h"

namespace di::backend::testing {
namespace {

TEST_F(CudaOpsTest, BuffersRoundTripThroughDeviceMemory) {
  const auto host = random_rows(6 * 40, 91);
  Buffer b(*gpu_, 6, 40);
  ASSERT_NE(b.data(), nullptr);
  b.from_host(host.data());
  expect_bitwise(b.to_host(), host, "upload + download");
  Buffer c(*gpu_, 6, 40);
  gpu_->copy(b.data(), c.data(), 240);
  expect_bitwise(c.to_host(), host, "device copy");
  gpu_->fill(c.data(), 0.0f, 240);
  expect_bitwise(c.to_host(), std::vector<float>(240, 0.0f), "fill");
  // Columns 5..14 of every row into a [6, 10] buffer (the grouped output projection's slice).
  Buffer s(*gpu_, 6, 10);
  gpu_->copy_2d(b.data() + 5, 40, s.data(), 10, 10, 6);
  std::vector<float> want;
  for (int r = 0; r < 6; ++r)
    want.insert(want.end(), host.begin() + r * 40 + 5, host.begin() + r * 40 + 15);
  expect_bitwise(s.to_host(), want, "copy_2d");
  // Columns 8..23 (whole float4s: the vector kernel) into a [6, 20] buffer at column 4.
  Buffer v(*gpu_, 6, 20);
  gpu_->fill(v.data(), -0.0f, 120);
  gpu_->copy_2d(b.data() + 8, 40, v.data() + 4, 20, 16, 6);
  want.clear();
  for (int r = 0; r < 6; ++r) {
    want.insert(want.end(), 4, -0.0f);
    want.insert(want.end(), host.begin() + r * 40 + 8, host.begin() + r * 40 + 24);
  }
  expect_bitwise(v.to_host(), want, "copy_2d, float4s");
  gpu_->fill(c.data() + 1, 0.25f, 237);
  want.assign(240, 0.0f);
  std::fill(want.begin() + 1, want.begin() + 238, 0.25f);
  expect_bitwise(c.to_host(), want, "fill with a value");
  EXPECT_GT(gpu_->host_syncs(), 0u);
}

// The idle clock (CudaOptions::time_idle): the device's idle time after a host wait runs from
// the end of the waited-for work to the next work issued (an allocation is not work), here host
// pauses of 30 ms; off by default.
TEST_F(CudaOpsTest, IdleClockTimesTheGapAfterAWait) {
  EXPECT_EQ(gpu_->device_idle_seconds(), 0.0);
  CudaOptions o = options();
  o.time_idle = true;
  auto timed = CudaOps::create(pool_, o);
  ASSERT_TRUE(timed.has_value()) << timed.status().to_string();
  CudaOps& ops = **timed;
  Buffer b(ops, 1, 4096);
  std::vector<float> host(4096);
  ops.fill(b.data(), 1.0f, 4096);
  ops.download(b.data(), host.data(), 4096);  // a wait: the clock starts at the fill's end
  EXPECT_EQ(ops.device_idle_seconds(), 0.0);
  const auto t0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  Buffer c(ops, 1, 4096);  // an allocation gives the device nothing to run: the gap goes on
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ops.fill(b.data(), 2.0f, 4096);  // the first work after the wait
  ops.download(b.data(), host.data(), 4096);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(ops.device_idle_seconds(), 0.029);
  EXPECT_LE(ops.device_idle_seconds(), wall + 0.001);
  EXPECT_EQ(host[4095], 2.0f);
  EXPECT_TRUE(ops.status().ok()) << ops.status().to_string();
}

// Uploads of every size class: up to 64 KB a kernel reads the mapped staging ring (whole 16-byte
// chunks, a tail, destinations 4-byte but not 16-byte aligned), above it a copy-engine transfer.
TEST_F(CudaOpsTest, UploadsOfAnySizeAndOffsetLand) {
  const int64_t max_count = 16385 + 3;
  const auto host = random_rows(static_cast<size_t>(max_count), 93);
  Buffer dst(*gpu_, 1, max_count + 8);
  for (int64_t count : {1, 3, 4, 5, 1000, 16383, 16384, 16385}) {
    for (int64_t offset : {0, 1, 2, 3}) {
      gpu_->fill(dst.data(), -1.0f, max_count + 8);
      gpu_->upload(host.data(), dst.data() + offset, count);
      std::vector<float> want(static_cast<size_t>(max_count + 8), -1.0f);
      std::copy(host.begin(), host.begin() + count, want.begin() + offset);
      const std::string what =
          "upload of " + std::to_string(count) + " floats at +" + std::to_string(offset);
      expect_bitwise(dst.to_host(), want, what.c_str());
    }
  }
}

// Op tracing's checksums computed on the device (any alignment and length, many records between
// two takes, one of them on a side line) equal the host's definition.
TEST_F(CudaOpsTest, ChecksumsOnTheDeviceEqualTheHostDefinition) {
  std::mt19937 rng(5);
  const size_t total = (size_t{1} << 20) + 64;
  ManagedVector<uint8_t> bytes(total);
  for (auto& b : bytes) b = static_cast<uint8_t>(rng());
  std::vector<uint64_t> want;
  int record = 0;
  for (size_t n :
       {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{9}, size_t{1000}, size_t{1} << 20}) {
    for (size_t offset : {0, 1, 3, 8}) {
      const bool side = record++ == 5 && gpu_->begin_side();
      ASSERT_TRUE(gpu_->record_checksum(bytes.data() + offset, n));
      if (side) gpu_->end_side();
      want.push_back(checksum_bytes(bytes.data() + offset, n));
    }
  }
  EXPECT_EQ(gpu_->take_checksums(), want);
  // A take clears: the next one starts from zero again.
  ASSERT_TRUE(gpu_->record_checksum(bytes.data(), 100));
  EXPECT_EQ(gpu_->take_checksums(), std::vector<uint64_t>{checksum_bytes(bytes.data(), 100)});
  EXPECT_TRUE(gpu_->take_checksums().empty());
}

// Token embeddings gathered on the device, hc copies, from BF16 and F32 tables: the CPU's bits.
TEST_F(CudaOpsTest, EmbedRowsMatchCpuBitwise) {
  const ManagedVector<int32_t> tokens = {5, 0, 99, 5, 42, 17, 63};  // backend memory
  const int64_t rows = static_cast<int64_t>(tokens.size());
  for (WeightFormat f : {WeightFormat::kBF16, WeightFormat::kF32}) {
    for (int copies : {1, 4}) {
      const RandomWeight table = random_weight(f, 100, 300, 31);
      Rows oc(static_cast<size_t>(rows * copies * 300)), og(oc.size(), NAN);
      cpu_.embed_rows(table.view, tokens.data(), copies, {oc.data(), rows, copies * 300});
      gpu_->embed_rows(table.view, tokens.data(), copies, {og.data(), rows, copies * 300});
      ASSERT_TRUE(gpu_->status().ok()) << gpu_->status().to_string();
      expect_bitwise(og, oc, "embed_rows");
    }
  }
}

// Engram rows decoded on the device: the CPU's bits for every finite e4m3 code and a spread of
// scales (subnormal results, repeated and out-of-order indices). The tables hold quantized finite
// values, so the NaN codes (0x7f, 0xff) and the NaN scale (255), whose payloads the two sides need
// not agree on, are left out.
TEST_F(CudaOpsTest, GatherFp8RowsMatchCpuBitwise) {
  const int64_t rows = 300, width = 256;
  std::vector<uint8_t> data(static_cast<size_t>(rows * width)),
      scale(static_cast<size_t>(rows * 8));
  for (size_t i = 0; i < data.size(); ++i) {
    data[i] = static_cast<uint8_t>((i * 131 + 7) % 256);
    if ((data[i] & 0x7f) == 0x7f) data[i] ^= 1;
  }
  for (size_t i = 0; i < scale.size(); ++i) scale[i] = static_cast<uint8_t>((i * 29) % 255);
  const Fp8RowTable table{data.data(), scale.data(), rows, width};
  const ManagedVector<int32_t> index = {299, 0, 17, 17, 150, 3};  // backend memory
  const int64_t n = static_cast<int64_t>(index.size());
  Rows oc(static_cast<size_t>(n * width)), og(oc.size(), -1.0f);
  cpu_.gather_fp8_rows(table, index.data(), {oc.data(), n, width});
  gpu_->gather_fp8_rows(table, index.data(), {og.data(), n, width});
  ASSERT_TRUE(gpu_->status().ok()) << gpu_->status().to_string();
  expect_bitwise(og, oc, "gather_fp8_rows");
}

// Engram bucket rows hashed on the device from tokens in backend memory: the CPU's ids for every
// row, with live, dead (negative compressed id) and out-of-map tokens, two look-back lengths and
// look-backs that are pad already.
TEST_F(CudaOpsTest, EngramHashRowsMatchCpu) {
  std::mt19937 rng(77);
  std::vector<int32_t> token_map(500);
  for (size_t i = 0; i < token_map.size(); ++i) {
    token_map[i] = i % 7 == 3 ? -1 : static_cast<int32_t>(rng() % 400);
  }
  for (int max_ngram : {2, 3, 5}) {
    const int heads = 4, back = max_ngram - 1, buckets = back * heads;
    std::vector<int64_t> mult(static_cast<size_t>(max_ngram)), primes(static_cast<size_t>(buckets)),
        offsets(primes.size());
    for (auto& m : mult) {
      m = static_cast<int64_t>((static_cast<uint64_t>(rng()) << 33) | (uint64_t{rng()} * 2 + 1));
    }
    for (size_t k = 0; k < primes.size(); ++k) {
      primes[k] = 1009 + static_cast<int64_t>(k) * 14;
      offsets[k] = static_cast<int64_t>(k) * 2000;
    }
    const ManagedVector<int32_t> tokens = {7, 3, 499, 500, -2, 12, 0, 250, 10, 3};
    const std::vector<int64_t> rows = {9, 0, 2, 3, 4, 6, 7, 1};  // 5 and 8 are left alone
    std::vector<int32_t> look_back(rows.size() * static_cast<size_t>(back));
    for (size_t i = 0; i < look_back.size(); ++i) {
      look_back[i] = i % 5 == 4 ? 17 : static_cast<int32_t>(rng() % 400);
    }
    EngramHashArgs a;
    a.tokens = tokens.data();
    a.rows = rows.data();
    a.num_rows = static_cast<int64_t>(rows.size());
    a.look_back = look_back.data();
    a.token_map = token_map.data();
    a.map_size = static_cast<int64_t>(token_map.size());
    a.max_ngram = max_ngram;
    a.heads = heads;
    a.multipliers = mult.data();
    a.primes = primes.data();
    a.offsets = offsets.data();
    a.pad = 17;
    ManagedVector<int32_t> want(tokens.size() * static_cast<size_t>(buckets), -5), got = want;
    a.out = want.data();
    cpu_.engram_hash_rows(a);
    a.out = got.data();
    gpu_->engram_hash_rows(a);
    ASSERT_TRUE(gpu_->status().ok()) << gpu_->status().to_string();
    sync();
    EXPECT_EQ(std::vector<int32_t>(got.begin(), got.end()),
              std::vector<int32_t>(want.begin(), want.end()))
        << "max_ngram " << max_ngram;
    EXPECT_EQ(want[5 * static_cast<size_t>(buckets)], -5);  // untouched row
  }
  // A look-back longer than the kernel holds is refused (on a backend of its own: the error
  // latches).
  auto other = CudaOps::create(pool_, options());
  ASSERT_TRUE(other.has_value()) << other.status().to_string();
  EngramHashArgs bad;
  bad.num_rows = 1;
  bad.max_ngram = 9;
  bad.heads = 1;
  bad.map_size = 1;
  (*other)->engram_hash_rows(bad);
  EXPECT_EQ((*other)->status().code(), StatusCode::kInvalidArgument);
}

// Deferred downloads: the host gets each copy once its ticket is waited for, while later work on
// the stream (a long chain of copies) has not finished; older tickets complete with a newer one.
TEST_F(CudaOpsTest, DeferredDownloadsArriveAtTheirWait) {
  const auto host = random_rows(4096, 93);
  Buffer a(*gpu_, 1, 4096), b(*gpu_, 1, 4096), big(*gpu_, 1024, 4096);
  a.from_host(host.data());
  gpu_->copy(a.data(), b.data(), 4096);
  std::vector<float> ga(4096, NAN), gb(4096, NAN), big_host(4096 * 1024, NAN);
  const uint64_t ta = gpu_->download_async(a.data(), ga.data(), 4096);
  const uint64_t tb = gpu_->download_async(b.data(), gb.data(), 4096);
  EXPECT_LT(ta, tb);
  for (int i = 0; i < 20; ++i) gpu_->fill(big.data(), static_cast<float>(i), big.size());
  gpu_->wait_download(ta);
  expect_bitwise(ga, host, "first deferred download");
  gpu_->wait_download(tb);
  expect_bitwise(gb, host, "second deferred download");
  // Larger than the staging ring: waited for at once.
  const uint64_t tl = gpu_->download_async(big.data(), big_host.data(), big.size());
  gpu_->wait_download(tl);
  expect_bitwise(big_host, std::vector<float>(big_host.size(), 19.0f), "large deferred download");
  // Many small ones wrap the ring; every one lands.
  std::vector<std::vector<float>> outs(600, std::vector<float>(1000, NAN));
  uint64_t last = 0;
  for (auto& o : outs) last = gpu_->download_async(a.data(), o.data(), 1000);
  gpu_->wait_download(last);
  for (const auto& o : outs) {
    expect_bitwise(o, std::vector<float>(host.begin(), host.begin() + 1000), "ring download");
  }
  ASSERT_TRUE(gpu_->status().ok()) << gpu_->status().to_string();
}

TEST_F(CudaOpsTest, RowGatherAndCombineMatchCpuBitwise) {
  const int64_t rows = 9, cols = 300;
  const auto src = random_rows(static_cast<size_t>(rows * cols), 92);
  const std::vector<int64_t> pick = {8, 0, 3, 3, 7};
  Rows gc(pick.size() * cols), gg(gc.size(), NAN);
  cpu_.gather_rows({src.data(), rows, cols}, pick.data(), {gc.data(), 5, cols});
  gpu_->gather_rows({src.data(), rows, cols}, pick.data(), {gg.data(), 5, cols});
  expect_bitwise(gg, gc, "gather_rows");
  // Rows through pointer tables (the compressor's carry rows, index keys), in one call.
  Rows rc(static_cast<size_t>(rows * cols), 0.0f), rg = rc;
  std::vector<const float*> from_c, from_g;
  std::vector<float*> to_c, to_g;
  for (int64_t i : {3, 0, 8, 5}) {
    from_c.push_back(src.data() + i * cols + 7);
    from_g.push_back(src.data() + i * cols + 7);
    to_c.push_back(rc.data() + (8 - i) * cols);
    to_g.push_back(rg.data() + (8 - i) * cols);
  }
  cpu_.copy_rows(from_c.data(), to_c.data(), 4, cols - 7);
  gpu_->copy_rows(from_g.data(), to_g.data(), 4, cols - 7);
  ASSERT_TRUE(gpu_->status().ok()) << gpu_->status().to_string();
  expect_bitwise(rg, rc, "copy_rows");

  // Three "experts" add their rows into an accumulator, then the shared part and one rounding.
  Rows ac(static_cast<size_t>(rows * cols), 0.0f), ag = ac;
  for (int e = 0; e < 3; ++e) {
    const auto ys = random_rows(4 * cols, 93 + e);
    const std::vector<int64_t> to = {e, 8 - e, 4, 2 * e + 1};
    cpu_.add_rows({ys.data(), 4, cols}, to.data(), {ac.data(), rows, cols});
    gpu_->add_rows({ys.data(), 4, cols}, to.data(), {ag.data(), rows, cols});
  }
  expect_bitwise(ag, ac, "add_rows");
  const auto shared = random_rows(static_cast<size_t>(rows * cols), 97);
  Rows oc(ac.size()), og(ac.size(), NAN);
  cpu_.add_round_bf16({ac.data(), rows, cols}, {shared.data(), rows, cols},
                      {oc.data(), rows, cols});
  gpu_->add_round_bf16({ag.data(), rows, cols}, {shared.data(), rows, cols},
                       {og.data(), rows, cols});
  expect_bitwise(og, oc, "add_round_bf16");
  cpu_.scale_round_bf16({oc.data(), rows, cols}, 0.0883883f);
  gpu_->scale_round_bf16({og.data(), rows, cols}, 0.0883883f);
  expect_bitwise(og, oc, "scale_round_bf16");
}

}  // namespace
}  // namespace di::backend::testing
