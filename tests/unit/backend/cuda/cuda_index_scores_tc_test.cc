// The tensor-core indexer scores (index_scores_tc.cu) against CpuOps, bitwise: FP4-quantized q and
// keys as the model makes them, adversarial rows at the exactness bound (largest and smallest
// exponents, partial sums just under 2^24 units), rows past it (the CUDA-core recomputation),
// arbitrary fp32 rows, paged keys, ragged visible counts, and batch invariance.
#include <numeric>

#include "backend/cuda/kernels.h"
#include "cuda_test_util.h"
#include "kernels/ref/quant.h"

namespace di::backend::testing {
namespace {

enum class Rows_ { kFp4, kBound, kPastBound, kFp32 };

// A scoring problem: q [nq, heads, dim], weights [nq, heads], a pool of 16-entry pages read
// through shuffled per-query page tables.
struct Problem {
  int64_t nq = 0, nk = 0;
  int heads = 0, dim = 0;
  static constexpr int kPer = 16;
  Rows q, w, pool;
  ManagedVector<int32_t> pages;
  ManagedVector<int64_t> page_offset, visible;

  IndexScoreArgs args(float* scores) const {
    IndexScoreArgs a;
    a.q = q.data();
    a.weights = w.data();
    a.num_queries = nq;
    a.num_heads = heads;
    a.head_dim = dim;
    a.key_pool = pool.data();
    a.pages = pages.data();
    a.num_pages = static_cast<int64_t>(pages.size());
    a.page_offset = page_offset.data();
    a.entries_per_page = kPer;
    a.num_keys = nk;
    a.num_visible = visible.data();
    a.scores = scores;
    return a;
  }
};

// +-{1, 1.5} x 2^e with e in {top, top - spread}: two significant bits like an FP4 value; the
// row's exponents span exactly `spread` (element 5 low, element 6 high, whatever the draw).
void two_bit_row(float* x, int n, int top, int spread, std::mt19937& rng) {
  std::uniform_int_distribution<int> pick(0, 99);
  for (int i = 0; i < n; ++i) {
    const int r = pick(rng);
    const bool low = i == 5 || (i != 6 && r < 15);
    const float m = (r % 4 != 0 || i == 5) ? 1.5f : 1.0f;
    // Mostly positive: partial sums grow towards the bound instead of cancelling.
    const float sign = (i != 5 && r >= 97) ? -1.0f : 1.0f;
    x[i] = sign * std::ldexp(m, low ? top - spread : top);
  }
}

// The largest m with 9 * dim * 2^m < 2^24: index_scores_tc.cu's exactness bound on the span.
int span_limit(int dim) {
  int m = 0;
  while (9.0 * dim * std::ldexp(1.0, m + 1) < 16777216.0) ++m;
  return m;
}

Problem make_problem(int64_t nq,
                     int64_t nk,
                     int heads,
                     int dim,
                     Rows_ kind,
                     uint32_t seed,
                     int top_q = 0,
                     int top_k = 0) {
  Problem p;
  p.nq = nq;
  p.nk = nk;
  p.heads = heads;
  p.dim = dim;
  const int64_t pages_per_query = (nk + Problem::kPer - 1) / Problem::kPer;
  const int64_t pool_pages = pages_per_query + 5;
  p.q = random_rows(static_cast<size_t>(nq * heads * dim), seed);
  // Small weights at the bound: a head sum of 64 dot products near 2^126 stays finite.
  const bool bound = kind == Rows_::kBound || kind == Rows_::kPastBound;
  p.w = random_rows(static_cast<size_t>(nq * heads), seed + 1, bound ? 0x1p-12f : 0.25f);
  p.pool = random_rows(static_cast<size_t>(pool_pages * Problem::kPer * dim), seed + 2);
  std::mt19937 rng(seed + 3);
  const int limit = span_limit(dim);
  auto fill = [&](float* x, int64_t rows, int top, bool is_q) {
    for (int64_t r = 0; r < rows; ++r) {
      float* row = x + r * dim;
      if (kind == Rows_::kFp4) {
        // Block magnitudes up to 2^2 apart inside a row, as RoPE'd and normed rows can be.
        std::uniform_int_distribution<int> oct(-1, 1);
        for (int b = 0; b < dim / 32; ++b) {
          const float s = std::ldexp(1.0f, oct(rng));
          for (int i = 0; i < 32; ++i) row[b * 32 + i] *= s;
        }
        kernels::fake_quant_row_fp4(row, dim, Fp4ScaleKind::kUe8m0Block32);
      } else if (bound) {
        // q rows span limit / 2 octaves, keys the rest (+1 past the bound).
        const int q_spread = limit / 2;
        const int spread = is_q ? q_spread : limit - q_spread + (kind == Rows_::kPastBound ? 1 : 0);
        two_bit_row(row, dim, top, spread, rng);
      }
    }
  };
  fill(p.q.data(), nq * heads, top_q, true);
  fill(p.pool.data(), pool_pages * Problem::kPer, top_k, false);
  for (int64_t t = 0; t < nq; ++t) {
    std::vector<int32_t> order(static_cast<size_t>(pool_pages));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    p.page_offset.push_back(static_cast<int64_t>(p.pages.size()));
    p.pages.insert(p.pages.end(), order.begin(), order.begin() + pages_per_query);
    // Ragged: full, none, a few, partial tiles, and more than the row width.
    const int64_t choices[] = {nk, 0, 3, nk / 2 + 7, nk + 40, nk - 1};
    p.visible.push_back(std::clamp<int64_t>(choices[t % 6], 0, nk + 40));
  }
  return p;
}

// Runs the launcher directly (device-visible managed memory) and returns the fallback count.
uint64_t run_tc(const Problem& p, Rows& out, int keys_per_cta) {
  ManagedVector<unsigned long long> fallbacks(1, 0);
  cuda::PagedKeys keys;
  keys.pool = p.pool.data();
  keys.pages = p.pages.data();
  keys.page_offset = p.page_offset.data();
  keys.per = Problem::kPer;
  EXPECT_EQ(
      cuda::index_scores_tc(p.q.data(), p.w.data(), p.nq, p.heads, p.dim, keys, p.nk,
                            p.visible.data(), out.data(), nullptr, keys_per_cta, fallbacks.data()),
      cudaSuccess);
  sync();
  return fallbacks[0];
}

class CudaIndexScoresTc : public CudaOpsTest {
 protected:
  // Bitwise against CpuOps; returns the fallback fraction of the visible (key, head) pairs.
  double check(const Problem& p, int keys_per_cta, const char* what) {
    Rows cpu(static_cast<size_t>(p.nq * p.nk)), gpu(cpu.size(), NAN);
    cpu_.index_scores(p.args(cpu.data()));
    const uint64_t fell = run_tc(p, gpu, keys_per_cta);
    expect_bitwise(gpu, cpu, what);
    int64_t pairs = 0;
    for (int64_t t = 0; t < p.nq; ++t) pairs += std::min(p.visible[t], p.nk) * p.heads;
    return pairs > 0 ? static_cast<double>(fell) / static_cast<double>(pairs) : 0.0;
  }
};

TEST_F(CudaIndexScoresTc, Fp4RowsMatchCpuBitwise) {
  struct Case {
    int64_t nq, nk;
    int heads, dim;
  };
  for (const Case& c : {Case{7, 1000, 64, 128}, Case{6, 90, 8, 32}, Case{6, 200, 20, 64},
                        Case{3, 1, 64, 128}, Case{2, 17, 1, 128}}) {
    const Problem p = make_problem(c.nq, c.nk, c.heads, c.dim, Rows_::kFp4, 81);
    for (int kpc : {0, 64, 512}) {
      const double fb = check(p, kpc, "fp4 rows");
      EXPECT_LT(fb, 0.05) << "most FP4 pairs should take the MMA";
    }
  }
}

TEST_F(CudaIndexScoresTc, RowsAtTheExactBoundTakeTheMmaAndMatchBitwise) {
  // Top exponents: moderate, the largest without overflow (Tq + Tk = 118, partial sums up to
  // 288 x 2^118), and the smallest with a normal unit (Eq + Ek - 2 = -126).
  for (int dim : {128, 64, 32}) {
    const int limit = span_limit(dim);
    const int low_sum = -124 + limit;  // top_q + top_k such that Eq + Ek = -124
    for (auto [tq, tk] :
         {std::pair{3, -2}, std::pair{60, 58}, std::pair{low_sum / 2, low_sum - low_sum / 2}}) {
      const Problem p = make_problem(6, 300, 64, dim, Rows_::kBound, 91 + dim, tq, tk);
      EXPECT_EQ(check(p, 0, "rows at the bound"), 0.0)
          << "dim " << dim << " top " << tq << "," << tk;
    }
  }
}

TEST_F(CudaIndexScoresTc, RowsPastTheBoundAreRecomputedAndMatchBitwise) {
  const Problem p = make_problem(6, 300, 64, 128, Rows_::kPastBound, 95, 3, -2);
  EXPECT_EQ(check(p, 0, "rows past the bound"), 1.0);
  const Problem f = make_problem(6, 130, 16, 128, Rows_::kFp32, 96);  // arbitrary fp32
  EXPECT_EQ(check(f, 0, "fp32 rows"), 1.0);
}

TEST_F(CudaIndexScoresTc, AQueryAloneEqualsItInABatch) {
  const Problem p = make_problem(12, 700, 64, 128, Rows_::kFp4, 97);
  Rows batch(static_cast<size_t>(p.nq * p.nk), NAN);
  run_tc(p, batch, 0);
  for (int64_t t : {0, 3, 11}) {
    Problem one;
    one.nq = 1;
    one.nk = p.nk;
    one.heads = p.heads;
    one.dim = p.dim;
    const size_t qn = static_cast<size_t>(p.heads * p.dim);
    one.q.assign(p.q.begin() + t * qn, p.q.begin() + (t + 1) * qn);
    one.w.assign(p.w.begin() + t * p.heads, p.w.begin() + (t + 1) * p.heads);
    one.pool = p.pool;
    one.pages = p.pages;
    one.page_offset.assign(1, p.page_offset[t]);
    one.visible.assign(1, p.visible[t]);
    for (int kpc : {64, 256}) {
      Rows alone(static_cast<size_t>(p.nk), NAN);
      run_tc(one, alone, kpc);
      Rows row(batch.begin() + t * p.nk, batch.begin() + (t + 1) * p.nk);
      expect_bitwise(alone, row, "query alone vs in the batch");
    }
  }
}

TEST_F(CudaIndexScoresTc, CudaOpsTakesTheTensorKernelBitwise) {
  // Through the Ops interface (the model's call), V4.1's indexer shape.
  const Problem p = make_problem(9, 513, 64, 128, Rows_::kFp4, 99);
  Rows cpu(static_cast<size_t>(p.nq * p.nk)), gpu(cpu.size(), NAN);
  cpu_.index_scores(p.args(cpu.data()));
  gpu_->index_scores(p.args(gpu.data()));
  expect_bitwise(gpu, cpu, "CudaOps index_scores");
}

}  // namespace
}  // namespace di::backend::testing
