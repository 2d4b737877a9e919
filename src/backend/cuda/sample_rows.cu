// Ops::sample_rows on the device, one CTA per row (the row's token depends on that row only):
// processors in place, the max (pass 1), then, when a top-k or top-p cut applies, candidate
// buckets below the max (pass 2) and a copy of the tokens at or above the crossing bucket into
// shared memory (pass 3); the exact radix cuts and the Gumbel race then run on that short list.
// Rows whose list would overflow (huge k, flat rows, many ties) take the whole-row radix cuts.
// Every quantity compared is exact or computed by sample_math.h's IEEE-exact operations
// (-fmad=false), and every reduction breaks ties by index, so the token is bitwise the host
// sampler's (kernels/ref/sample_row.h).
#include <cuda_runtime.h>

#include "backend/cuda/grid_dependency.cuh"
#include "backend/cuda/sample_rows.h"
#include "backend/cuda/sample_select.cuh"
#include "kernels/ref/sample_math.h"

namespace di::backend::cuda {

namespace {

using namespace sample_detail;

// Penalty entries are distinct tokens (one thread each); bias entries apply in order.
__device__ void apply_processors(float* row, const ks::RowParams& p, const SampleRowsDevice& a) {
  const float rep = p.repetition_penalty;
  const bool additive = p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
  for (int e = threadIdx.x; e < p.penalty_count; e += kThreads) {
    const int32_t tok = a.penalty_tokens[p.penalty_begin + e];
    const int32_t count = a.penalty_counts[p.penalty_begin + e];
    float l = row[tok];
    if (rep != 1.0f) l = l > 0 ? l / rep : l * rep;
    if (additive && count > 0) {
      l -= p.frequency_penalty * static_cast<float>(count) + p.presence_penalty;
    }
    row[tok] = l;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int e = 0; e < p.bias_count; ++e) {
      row[a.bias_tokens[p.bias_begin + e]] += a.bias_values[p.bias_begin + e];
    }
  }
  __syncthreads();
}

// The race: the largest d + gumbel among the kept tokens (key >= cut, min-p, d >= -45), the
// lowest index on ties; `none` if no token is kept. The exact score costs a double division and
// two double logs, so most tokens are first screened out in float: the row's top token always
// competes (d = 0), so the winner scores at least s_top = gumbel(first max), and a token scores
// d - ln(t) with t = -ln(u) >= 1 - u = q; if q > exp(d - s_top) it scores under s_top and cannot
// win. The screen evaluates that test in float with 1e-3 of slack in the exponent: d in float
// is off by under 2e-5 wherever exp(d - s_top) can exceed the least q (2^-54), and q and expf
// by a few ulps. The two difference thresholds skip tokens whose d is certainly under -45 or
// whose weight is certainly under min-p (margins 0.5 and 0.01 in d).
template <class Src>
__device__ int64_t race(const Src& src,
                        uint32_t cut,
                        const ks::RowParams& p,
                        float mx,
                        int64_t first_max,
                        int64_t none,
                        Shared& sh) {
  const double t = static_cast<double>(p.temperature);
  const float inv_t = 1.0f / p.temperature;
  const float s_top = static_cast<float>(ks::gumbel(p.key, static_cast<uint32_t>(first_max)));
  const float screen = s_top - 1e-3f;
  const double skip_below = (ks::kRaceSkip - 0.5) * t;
  const double min_w = static_cast<double>(p.min_p) * ks::kWeightOne;
  const double min_below =
      p.min_p > 0.0f ? (ks::portable_log(static_cast<double>(p.min_p)) - 0.01) * t : kNegInfD;
  double best = kNegInfD;
  int64_t idx = none;
  src.for_each([&](int64_t i, float v) {
    if (v == kNegInf || ks::order_key(v) < cut) return;
    // u = (m + 0.5) 2^-53 rounds to at most (m + 1) 2^-53, so q >= (2^53 - m - 1) 2^-53.
    const uint64_t m = ks::mix64(p.key ^ static_cast<uint32_t>(i)) >> 11;
    const float q = static_cast<float>((1ull << 53) - m - 1) * 0x1.0p-53f;
    if (q > expf((v - mx) * inv_t - screen)) return;
    const double diff = static_cast<double>(v) - static_cast<double>(mx);
    if (diff < skip_below || diff < min_below) return;
    const double d = diff / t;  // ks::scaled(v, mx, temperature)
    if (p.min_p > 0.0f && !(static_cast<double>(ks::weight(d)) >= min_w)) return;
    if (d < ks::kRaceSkip) return;
    const double score = d + ks::gumbel(p.key, static_cast<uint32_t>(i));
    if (better(score, i, best, idx, none)) {
      best = score;
      idx = i;
    }
  });
  block_argmax(best, idx, none, sh.red_d, sh);
  return idx;
}

// The top-k and top-p cuts on `src` (the whole row, or a list holding every token the cuts can
// keep); `total` is the row's weight when the list came from weighted buckets (top-p alone).
template <class Src>
__device__ uint32_t cuts(const Src& src,
                         bool use_k,
                         bool use_p,
                         const ks::RowParams& p,
                         const Weigher& wf,
                         const unsigned long long* total,
                         Shared& sh) {
  uint32_t cut = 0;
  if (use_k) cut = radix_cut(src, 0, false, wf, static_cast<double>(p.top_k), false, sh);
  if (use_p) {
    const double share = static_cast<double>(p.top_p);
    const uint32_t c = total != nullptr ? radix_cut(src, cut, true, wf,
                                                    share * static_cast<double>(*total), false, sh)
                                        : radix_cut(src, cut, true, wf, share, true, sh);
    cut = c > cut ? c : cut;
  }
  return cut;
}

// kMinBlocks 2 (64 registers, a few spilled) keeps two rows per SM for large batches; 1 (about
// 100 registers, no spills) serves batches that leave SMs idle anyway.
template <int kMinBlocks>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    sample_kernel(float* x, int64_t cols, SampleRowsDevice a, int32_t* out) {
  pdl::enter_dependent_grid();
  __shared__ Shared sh;
  const ks::RowParams p = a.params[blockIdx.x];
  if (p.skip) {
    if (threadIdx.x == 0) out[blockIdx.x] = -1;
    return;
  }
  float* row = x + static_cast<int64_t>(blockIdx.x) * cols;
  apply_processors(row, p, a);
  const uint32_t* mask = p.mask >= 0 ? a.masks + p.mask * ks::mask_words(cols) : nullptr;
  const RowSrc src{row, mask, cols};

  // Pass 1: the first index of the largest value (std::max_element; -inf counts), finite count.
  float mx = kNegInf;
  int64_t first_max = cols;
  int finite = 0;
  src.for_each([&](int64_t i, float v) {
    finite += v != kNegInf;
    if (better(v, i, mx, first_max, cols)) {
      mx = v;
      first_max = i;
    }
  });
  for (int o = 16; o > 0; o >>= 1) finite += __shfl_down_sync(0xffffffffu, finite, o);
  if (threadIdx.x % 32 == 0) sh.red_n[threadIdx.x / 32] = finite;
  block_argmax(mx, first_max, cols, sh.red_v, sh);  // syncs: red_n is complete after it
  finite = 0;
  for (int w = 0; w < kWarps; ++w) finite += sh.red_n[w];
  if (first_max >= cols) first_max = 0;
  if (p.temperature == 0.0f || mx == kNegInf) {
    if (threadIdx.x == 0) out[blockIdx.x] = static_cast<int32_t>(first_max);
    return;
  }

  const bool use_k = p.top_k > 0 && p.top_k < finite;
  const bool use_p = p.top_p < 1.0f;
  const Weigher wf{mx, p.temperature, (-23.0 - 0.5) * static_cast<double>(p.temperature)};
  int64_t token = cols;
  bool done = false;
  if ((use_k || use_p) && mx != -kNegInf) {
    // Passes 2 and 3: the short list. With top-k the buckets count tokens (the list then holds
    // every token the top-k cut keeps, hence every one top-p can keep); with top-p alone they
    // weigh them (the list holds every token at or above the top-p cut).
    const Bucketer bucket{!use_k, ks::order_key(mx), mx, 64.0f / p.temperature};
    unsigned long long total = 0;
    const double target = use_k ? static_cast<double>(p.top_k) : static_cast<double>(p.top_p);
    const int crossing = bucket_crossing(src, bucket, !use_k, wf, target, total, sh);
    if (crossing >= 0) {
      const int n = compact(src, bucket, crossing, sh);
      if (n <= kCap) {
        const CandSrc list{sh.u.cand.v, sh.u.cand.i, n};
        const uint32_t cut = cuts(list, use_k, use_p, p, wf, use_k ? nullptr : &total, sh);
        token = race(list, cut, p, mx, first_max, cols, sh);
        done = true;
      }
    }
  }
  if (!done) {
    const uint32_t cut = cuts(src, use_k, use_p, p, wf, nullptr, sh);
    token = race(src, cut, p, mx, first_max, cols, sh);
  }
  if (threadIdx.x == 0) out[blockIdx.x] = static_cast<int32_t>(token < cols ? token : first_max);
}

}  // namespace

cudaError_t sample_rows(float* x,
                        int64_t rows,
                        int64_t cols,
                        const SampleRowsDevice& a,
                        int32_t* out,
                        cudaStream_t s,
                        int rows_per_sm) {
  if (rows <= 0) return rows == 0 ? cudaSuccess : cudaErrorInvalidValue;
  if (cols <= 0) return cudaErrorInvalidValue;
  // Both variants draw the same bits; the choice only sets how many rows share an SM.
  if (rows_per_sm == 0) {
    int sms = 0, dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
      return cudaGetLastError();
    }
    rows_per_sm = rows > sms ? 2 : 1;
  }
  if (rows_per_sm == 2) {
    pdl::launch_dependent(sample_kernel<2>, dim3(static_cast<unsigned>(rows)), dim3(kThreads), 0, s,
                          x, cols, a, out);
  } else {
    pdl::launch_dependent(sample_kernel<1>, dim3(static_cast<unsigned>(rows)), dim3(kThreads), 0, s,
                          x, cols, a, out);
  }
  return cudaGetLastError();
}

}  // namespace di::backend::cuda
