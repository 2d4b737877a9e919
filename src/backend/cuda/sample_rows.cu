// Ops::sample_rows on the device: one CTA per row walks the row a few times (max, then the top-k
// and top-p cuts as 8-bit radix selects over order_key, then the Gumbel race). Every quantity
// compared is exact or computed by sample_math.h's IEEE-exact operations (-fmad=false), and every
// reduction breaks ties by index, so the token is bitwise the host sampler's.
#include <cuda_runtime.h>

#include "backend/cuda/sample_rows.h"
#include "kernels/ref/sample_math.h"

namespace di::backend::cuda {

namespace {

namespace ks = kernels::sample;

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int kBins = 256;
constexpr float kNegInf = -__builtin_huge_valf();

struct Shared {
  unsigned long long hist[kBins];
  unsigned long long warp_sum[kBins / 32];
  float red_v[kWarps];
  int64_t red_i[kWarps];
  double red_d[kWarps];
  int red_n[kWarps];
  uint32_t sel;
  unsigned long long above;
};

__device__ __forceinline__ float processed(const float* row, const uint32_t* mask, int64_t i) {
  if (mask != nullptr && ((mask[i >> 5] >> (i & 31)) & 1u) == 0) return kNegInf;
  return row[i];
}

// The first index of the largest value (std::max_element; -inf counts) and the finite count.
__device__ void row_max(const float* row,
                        const uint32_t* mask,
                        int64_t cols,
                        Shared& sh,
                        float& mx,
                        int64_t& arg,
                        int& finite) {
  float v = kNegInf;
  int64_t idx = cols;
  int n = 0;
  for (int64_t i = threadIdx.x; i < cols; i += kThreads) {
    const float a = processed(row, mask, i);
    n += a != kNegInf;
    if (idx == cols || a > v) {
      v = a;
      idx = i;
    }
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_down_sync(0xffffffffu, v, o);
    const int64_t oi = __shfl_down_sync(0xffffffffu, idx, o);
    n += __shfl_down_sync(0xffffffffu, n, o);
    if (oi < cols && (idx >= cols || ov > v || (ov == v && oi < idx))) {
      v = ov;
      idx = oi;
    }
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    sh.red_v[warp] = v;
    sh.red_i[warp] = idx;
    sh.red_n[warp] = n;
  }
  __syncthreads();
  mx = sh.red_v[0];
  arg = sh.red_i[0];
  finite = sh.red_n[0];
  for (int w = 1; w < kWarps; ++w) {
    const float bv = sh.red_v[w];
    const int64_t bi = sh.red_i[w];
    finite += sh.red_n[w];
    if (bi < cols && (arg >= cols || bv > mx || (bv == mx && bi < arg))) {
      mx = bv;
      arg = bi;
    }
  }
  if (arg >= cols) arg = 0;
  __syncthreads();
}

// The key at which the mass (count, or fixed-point weight when `weighted`) of the finite tokens
// with key >= lo, accumulated from the largest key down, first reaches `target` (target_is_share:
// target * the level-0 total). Four 8-bit levels; each picks the bin where the running sum
// crosses, by a suffix scan of the 256 bins.
__device__ uint32_t radix_cut(const float* row,
                              const uint32_t* mask,
                              int64_t cols,
                              uint32_t lo,
                              bool weighted,
                              float mx,
                              float temperature,
                              double target,
                              bool target_is_share,
                              Shared& sh) {
  uint32_t prefix = 0;
  unsigned long long above = 0;
  for (int level = 0; level < 4; ++level) {
    const int shift = 24 - 8 * level;
    const uint32_t hi_mask = level == 0 ? 0u : (0xffffffffu << (shift + 8));
    for (int b = threadIdx.x; b < kBins; b += kThreads) sh.hist[b] = 0;
    __syncthreads();
    // A thread sums its run of equal bins in a register and adds it once: at the top levels
    // nearly every logit falls in one or two bins (same sign and exponent), and one shared
    // atomic per element there serialized the whole CTA (4.1 ms per step at batch 256).
    uint32_t run_bin = 0;
    unsigned long long run = 0;
    for (int64_t i = threadIdx.x; i < cols; i += kThreads) {
      const float v = processed(row, mask, i);
      if (v == kNegInf) continue;
      const uint32_t k = ks::order_key(v);
      if (k < lo || (k & hi_mask) != prefix) continue;
      const unsigned long long w = weighted ? ks::weight(ks::scaled(v, mx, temperature)) : 1ull;
      const uint32_t bin = (k >> shift) & 255u;
      if (bin != run_bin) {
        if (run != 0) atomicAdd(&sh.hist[run_bin], run);
        run_bin = bin;
        run = 0;
      }
      run += w;
    }
    if (run != 0) atomicAdd(&sh.hist[run_bin], run);
    __syncthreads();
    // Suffix sums: thread t < 256 holds bin 255 - t; inclusive warp scans, then warp offsets.
    const int t = threadIdx.x, lane = t % 32, warp = t / 32;
    unsigned long long s = 0;
    if (t < kBins) {
      s = sh.hist[kBins - 1 - t];
      for (int o = 1; o < 32; o <<= 1) {
        const unsigned long long u = __shfl_up_sync(0xffffffffu, s, o);
        if (lane >= o) s += u;
      }
      if (lane == 31) sh.warp_sum[warp] = s;
    }
    __syncthreads();
    if (t < kBins) {
      for (int w = 0; w < warp; ++w) s += sh.warp_sum[w];
      // s = mass of bins >= b, b = 255 - t; the mass of bins > b is s - hist[b].
      const int b = kBins - 1 - t;
      if (level == 0 && target_is_share && t == kBins - 1) sh.above = s;  // the total
      sh.hist[b] = s;  // in place: each thread read its own bin before
    }
    __syncthreads();
    if (level == 0 && target_is_share) {
      target = target * static_cast<double>(sh.above);
      target_is_share = false;
    }
    __syncthreads();
    if (t < kBins) {
      const int b = kBins - 1 - t;
      const unsigned long long incl = sh.hist[b];
      const unsigned long long excl = b == kBins - 1 ? 0ull : sh.hist[b + 1];
      if (static_cast<double>(above + incl) >= target &&
          !(static_cast<double>(above + excl) >= target)) {
        sh.sel = static_cast<uint32_t>(b);
        sh.above = above + excl;
      }
    }
    __syncthreads();
    prefix |= sh.sel << shift;
    above = sh.above;
    __syncthreads();
  }
  return prefix;
}

__global__ void __launch_bounds__(kThreads, 1)
    sample_kernel(float* x, int64_t cols, SampleRowsDevice a, int32_t* out) {
  __shared__ Shared sh;
  const ks::RowParams p = a.params[blockIdx.x];
  if (p.skip) {
    if (threadIdx.x == 0) out[blockIdx.x] = -1;
    return;
  }
  float* row = x + static_cast<int64_t>(blockIdx.x) * cols;
  // Penalty entries are distinct tokens (one thread each); bias entries apply in order.
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
  const uint32_t* mask = p.mask >= 0 ? a.masks + p.mask * ks::mask_words(cols) : nullptr;
  float mx;
  int64_t first_max;
  int finite;
  row_max(row, mask, cols, sh, mx, first_max, finite);
  if (p.temperature == 0.0f || mx == kNegInf) {
    if (threadIdx.x == 0) out[blockIdx.x] = static_cast<int32_t>(first_max);
    return;
  }
  uint32_t cut = 0;
  if (p.top_k > 0 && p.top_k < finite) {
    cut = radix_cut(row, mask, cols, 0, false, mx, p.temperature, static_cast<double>(p.top_k),
                    false, sh);
  }
  if (p.top_p < 1.0f) {
    const uint32_t c = radix_cut(row, mask, cols, cut, true, mx, p.temperature,
                                 static_cast<double>(p.top_p), true, sh);
    cut = c > cut ? c : cut;
  }
  // The race: the largest d + gumbel among the kept tokens, the lowest index on ties.
  const double min_w = static_cast<double>(p.min_p) * ks::kWeightOne;
  double best = -__longlong_as_double(0x7ff0000000000000ll);
  int64_t idx = cols;
  for (int64_t i = threadIdx.x; i < cols; i += kThreads) {
    const float v = processed(row, mask, i);
    if (v == kNegInf || ks::order_key(v) < cut) continue;
    const double d = ks::scaled(v, mx, p.temperature);
    if (p.min_p > 0.0f && !(static_cast<double>(ks::weight(d)) >= min_w)) continue;
    if (d < ks::kRaceSkip) continue;
    const double score = d + ks::gumbel(p.key, static_cast<uint32_t>(i));
    if (idx == cols || score > best) {
      best = score;
      idx = i;
    }
  }
  for (int o = 16; o > 0; o >>= 1) {
    const double ob = __shfl_down_sync(0xffffffffu, best, o);
    const int64_t oi = __shfl_down_sync(0xffffffffu, idx, o);
    if (oi < cols && (idx >= cols || ob > best || (ob == best && oi < idx))) {
      best = ob;
      idx = oi;
    }
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    sh.red_d[warp] = best;
    sh.red_i[warp] = idx;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    double bb = sh.red_d[0];
    int64_t bi = sh.red_i[0];
    for (int w = 1; w < kWarps; ++w) {
      const int64_t oi = sh.red_i[w];
      if (oi < cols && (bi >= cols || sh.red_d[w] > bb || (sh.red_d[w] == bb && oi < bi))) {
        bb = sh.red_d[w];
        bi = oi;
      }
    }
    out[blockIdx.x] = static_cast<int32_t>(bi < cols ? bi : first_max);
  }
}

}  // namespace

cudaError_t sample_rows(
    float* x, int64_t rows, int64_t cols, const SampleRowsDevice& a, int32_t* out, cudaStream_t s) {
  if (rows <= 0) return rows == 0 ? cudaSuccess : cudaErrorInvalidValue;
  if (cols <= 0) return cudaErrorInvalidValue;
  sample_kernel<<<static_cast<unsigned>(rows), kThreads, 0, s>>>(x, cols, a, out);
  return cudaGetLastError();
}

}  // namespace di::backend::cuda
