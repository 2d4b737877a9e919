// Ops::sample_rows on the device, one team per row (the row's token depends on that row only):
// one CTA, or for batches that leave SMs idle a cluster of 2-16 CTAs that each read a slice of
// the row (sample_team.cuh). Processors in place, the max (pass 1), then, when a top-k or top-p
// cut applies, candidate buckets below the max (pass 2) and a copy of the tokens at or above the
// crossing bucket into shared memory (pass 3, gathered in rank 0); the exact radix cuts and the
// Gumbel race then run on that short list in rank 0. Under top-p alone a list that would
// overflow (flat rows) shrinks to the crossing bucket's tokens, which fix the cut; the race then
// runs over the row. Other rows whose list would overflow (huge k, many ties) take the
// whole-row radix cuts and race, over the whole team.
// Every quantity compared is exact or computed by sample_math.h's IEEE-exact operations
// (-fmad=false), and every reduction breaks ties by index, so the token is bitwise the host
// sampler's (kernels/ref/sample_row.h).
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/grid_dependency.cuh"
#include "backend/cuda/grid_dependency_cluster.cuh"
#include "backend/cuda/sample_rows.h"
#include "backend/cuda/sample_select.cuh"
#include "kernels/ref/sample_math.h"

namespace di::backend::cuda {

namespace {

using namespace sample_detail;

// Penalty entries are distinct tokens (one thread of the team each); bias entries apply in order
// (rank 0's first thread), after every penalty.
template <int kRanks>
__device__ void apply_processors(float* row,
                                 const ks::RowParams& p,
                                 const SampleRowsDevice& a,
                                 const Team<kRanks>& team) {
  if (p.penalty_count == 0 && p.bias_count == 0) return;
  const float rep = p.repetition_penalty;
  const bool additive = p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
  for (int e = team.rank * kThreads + threadIdx.x; e < p.penalty_count; e += kRanks * kThreads) {
    const int32_t tok = a.penalty_tokens[p.penalty_begin + e];
    const int32_t count = a.penalty_counts[p.penalty_begin + e];
    float l = row[tok];
    if (rep != 1.0f) l = l > 0 ? l / rep : l * rep;
    if (additive && count > 0) {
      l -= p.frequency_penalty * static_cast<float>(count) + p.presence_penalty;
    }
    row[tok] = l;
  }
  team.sync();
  if (team.rank == 0 && threadIdx.x == 0) {
    for (int e = 0; e < p.bias_count; ++e) {
      row[a.bias_tokens[p.bias_begin + e]] += a.bias_values[p.bias_begin + e];
    }
  }
  team.sync();
}

// The race: the largest d + gumbel among the kept tokens (key >= cut, min-p, d >= -45), the
// lowest index on ties; `none` if no token is kept. The exact score costs a double division and
// two double logs, so most tokens are first screened out in float: the row's top token always
// competes (d = 0), so the winner scores at least s_top = gumbel(first max), and a token scores
// d - ln(t) with t = -ln(u) >= 1 - u = q; if q > exp(d - s_top) it scores under s_top and cannot
// win. The screen evaluates that test in float with 1e-3 of slack in the exponent: d in float
// is off by under 2e-5 wherever exp(d - s_top) can exceed the least q (2^-54), and q and expf
// by a few ulps. The two difference thresholds skip tokens whose d is certainly under -45 or
// whose weight is certainly under min-p (margins 0.5 and 0.01 in d). Every rank of the team
// returns the winner over the team's slices.
template <class Src, int kRanks>
__device__ int64_t race(const Src& src,
                        uint32_t cut,
                        const ks::RowParams& p,
                        float mx,
                        int64_t first_max,
                        int64_t none,
                        const Team<kRanks>& team,
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
  if constexpr (kRanks > 1) {
    if (threadIdx.x == 0) {
      sh.part[kSlotRace].d = best;
      sh.part[kSlotRace].i = idx;
    }
    team.sync();
    TeamPart q{};
    const bool has = team.load(&sh.part[kSlotRace], q);
    best = has ? q.d : kNegInfD;
    idx = has ? q.i : none;
    warp_argmax(best, idx, none);
    team.sync();  // the slots are read: a rank may now exit
  }
  return idx;
}

// The top-k and top-p cuts on `src` (the team's slices of the row, or a list holding every
// token the cuts can keep); `total` is the row's weight when the list came from weighted buckets
// (top-p alone).
template <class Src, int kRanks>
__device__ uint32_t cuts(const Src& src,
                         bool use_k,
                         bool use_p,
                         const ks::RowParams& p,
                         const Weigher& wf,
                         const unsigned long long* total,
                         const Team<kRanks>& team,
                         Shared& sh) {
  uint32_t cut = 0;
  if (use_k) cut = radix_cut(src, 0, false, wf, static_cast<double>(p.top_k), false, team, sh);
  if (use_p) {
    const double share = static_cast<double>(p.top_p);
    const uint32_t c =
        total != nullptr
            ? radix_cut(src, cut, true, wf, share * static_cast<double>(*total), false, team, sh)
            : radix_cut(src, cut, true, wf, share, true, team, sh);
    cut = c > cut ? c : cut;
  }
  return cut;
}

// kMinBlocks 2 (64 registers, a few spilled) keeps two rows per SM for large batches; 1 (about
// 100 registers, no spills) serves batches that leave SMs idle anyway. Grid: one team of kRanks
// CTAs (a cluster) per row.
template <int kMinBlocks, int kRanks>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    sample_kernel(float* x, int64_t cols, SampleRowsDevice a, int32_t* out) {
  pdl::enter_dependent_grid();
  __shared__ Shared sh;
  const Team<kRanks> team = Team<kRanks>::here();
  const int64_t r = blockIdx.x / kRanks;
  const ks::RowParams p = a.params[r];
  if (p.skip) {
    if (team.rank == 0 && threadIdx.x == 0) out[r] = -1;
    return;
  }
  float* row = x + r * cols;
  apply_processors(row, p, a, team);
  const uint32_t* mask = p.mask >= 0 ? a.masks + p.mask * ks::mask_words(cols) : nullptr;
  RowSrc src{row, mask, 0, cols};
  team.slice(cols, src.begin, src.end);

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
  if constexpr (kRanks > 1) {
    if (threadIdx.x == 0) {
      sh.part[kSlotMax].v = mx;
      sh.part[kSlotMax].i = first_max;
      sh.part[kSlotMax].n = finite;
    }
    team.sync();
    TeamPart q{};
    const bool has = team.load(&sh.part[kSlotMax], q);
    mx = has ? q.v : kNegInf;
    first_max = has ? q.i : cols;
    finite = warp_sum(has ? q.n : 0);
    warp_argmax(mx, first_max, cols);
  }
  if (first_max >= cols) first_max = 0;
  if (p.temperature == 0.0f || mx == kNegInf) {
    team.sync();  // the slots are read: a rank may now exit
    if (team.rank == 0 && threadIdx.x == 0) out[r] = static_cast<int32_t>(first_max);
    return;
  }

  const bool use_k = p.top_k > 0 && p.top_k < finite;
  const bool use_p = p.top_p < 1.0f;
  const Weigher wf{mx, p.temperature, (-23.0 - 0.5) * static_cast<double>(p.temperature)};
  if ((use_k || use_p) && mx != -kNegInf) {
    // Passes 2 and 3: the short list. With top-k the buckets count tokens (the list then holds
    // every token the top-k cut keeps, hence every one top-p can keep); with top-p alone they
    // weigh them (the list holds every token at or above the top-p cut).
    const Bucketer bucket{!use_k, ks::order_key(mx), mx, 64.0f / p.temperature};
    unsigned long long total = 0;
    const double target = use_k ? static_cast<double>(p.top_k) : static_cast<double>(p.top_p);
    const Crossing crossing = bucket_crossing(src, bucket, !use_k, wf, target, total, team, sh);
    if (crossing.index >= 0) {
      int n = compact(src, bucket, 0, crossing.index, team, sh);
      if (n <= kCap) {
        if (team.rank != 0) return;  // rank 0 holds the list; no one reads this rank any more
        const Team<1> alone;
        const CandSrc list{sh.u.cand.v, sh.u.cand.i, n};
        const uint32_t cut = cuts(list, use_k, use_p, p, wf, use_k ? nullptr : &total, alone, sh);
        const int64_t token = race(list, cut, p, mx, first_max, cols, alone, sh);
        if (threadIdx.x == 0) out[r] = static_cast<int32_t>(token < cols ? token : first_max);
        return;
      }
      if (!use_k) {
        // Top-p alone with more tokens above the cut than the list holds (flat rows): the cut
        // lies in the crossing bucket and every token of the buckets before it is kept, so the
        // exact cut needs only that bucket's tokens, after the mass of the buckets before it.
        // The race then runs over the whole row.
        n = compact(src, bucket, crossing.index, crossing.index, team, sh);
        if (n <= kCap) {
          if (team.rank == 0) {
            const CandSrc list{sh.u.cand.v, sh.u.cand.i, n};
            const double goal = static_cast<double>(p.top_p) * static_cast<double>(total);
            const uint32_t cut =
                radix_cut(list, 0, true, wf, goal, false, Team<1>{}, sh, crossing.above);
            if (threadIdx.x == 0) sh.part[kSlotCut].u = cut;
          }
          team.sync();
          const uint32_t cut = static_cast<uint32_t>(team.of(&sh.part[kSlotCut], 0)->u);
          const int64_t token = race(src, cut, p, mx, first_max, cols, team, sh);
          if (team.rank == 0 && threadIdx.x == 0) {
            out[r] = static_cast<int32_t>(token < cols ? token : first_max);
          }
          return;
        }
      }
    }
  }
  const uint32_t cut = cuts(src, use_k, use_p, p, wf, nullptr, team, sh);
  const int64_t token = race(src, cut, p, mx, first_max, cols, team, sh);
  if (team.rank == 0 && threadIdx.x == 0) {
    out[r] = static_cast<int32_t>(token < cols ? token : first_max);
  }
}

template <int kMinBlocks, int kRanks>
cudaError_t launch(
    float* x, int64_t rows, int64_t cols, const SampleRowsDevice& a, int32_t* out, cudaStream_t s) {
  const dim3 grid(static_cast<unsigned>(rows * kRanks));
  if constexpr (kRanks == 1) {
    return pdl::launch_dependent(sample_kernel<kMinBlocks, 1>, grid, dim3(kThreads), 0, s, x, cols,
                                 a, out);
  } else {
    if constexpr (kRanks > 8) {
      const cudaError_t e = cudaFuncSetAttribute(sample_kernel<kMinBlocks, kRanks>,
                                                 cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
      if (e != cudaSuccess) return e;
    }
    return pdl::launch_dependent_cluster(sample_kernel<kMinBlocks, kRanks>, grid, dim3(kThreads), 0,
                                         s, kRanks, x, cols, a, out);
  }
}

}  // namespace

cudaError_t sample_rows(float* x,
                        int64_t rows,
                        int64_t cols,
                        const SampleRowsDevice& a,
                        int32_t* out,
                        cudaStream_t s,
                        SampleLaunch how) {
  if (rows <= 0) return rows == 0 ? cudaSuccess : cudaErrorInvalidValue;
  if (cols <= 0 || cols > INT32_MAX) return cudaErrorInvalidValue;
  // Every team size and variant draws the same bits; the choice only sets how many SMs a row
  // uses (ranks) and how many rows share an SM (rows_per_sm, for teams of one).
  switch (how.ranks) {
    case 16:
      return launch<1, 16>(x, rows, cols, a, out, s);
    case 8:
      return launch<1, 8>(x, rows, cols, a, out, s);
    case 4:
      return launch<1, 4>(x, rows, cols, a, out, s);
    case 2:
      return launch<1, 2>(x, rows, cols, a, out, s);
    case 1:
      break;
    default:
      return cudaErrorInvalidValue;
  }
  int rows_per_sm = how.rows_per_sm;
  if (rows_per_sm == 0) {
    int sms = 0, dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
      return cudaGetLastError();
    }
    rows_per_sm = rows > sms ? 2 : 1;
  }
  return rows_per_sm == 2 ? launch<2, 1>(x, rows, cols, a, out, s)
                          : launch<1, 1>(x, rows, cols, a, out, s);
}

namespace {
template <int kRanks>
int max_active_teams() {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(kRanks);
  config.blockDim = dim3(kThreads);
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeClusterDimension;
  attribute.val.clusterDim.x = kRanks;
  attribute.val.clusterDim.y = 1;
  attribute.val.clusterDim.z = 1;
  config.attrs = &attribute;
  config.numAttrs = 1;
  if constexpr (kRanks > 8) {
    if (cudaFuncSetAttribute(sample_kernel<1, kRanks>,
                             cudaFuncAttributeNonPortableClusterSizeAllowed, 1) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
  }
  int n = 0;
  if (cudaOccupancyMaxActiveClusters(&n, sample_kernel<1, kRanks>, &config) != cudaSuccess) {
    (void)cudaGetLastError();  // e.g. a device without clusters: no team of this size
    return 0;
  }
  return n;
}
}  // namespace

cudaError_t sample_limits(SampleLimits* limits) {
  int dev = 0, major = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e == cudaSuccess) {
    e = cudaDeviceGetAttribute(&limits->sms, cudaDevAttrMultiProcessorCount, dev);
  }
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  if (e != cudaSuccess) return e;
  limits->max_teams[0] = limits->sms;
  const bool clusters = major >= 9;
  limits->max_teams[1] = clusters ? max_active_teams<2>() : 0;
  limits->max_teams[2] = clusters ? max_active_teams<4>() : 0;
  limits->max_teams[3] = clusters ? max_active_teams<8>() : 0;
  limits->max_teams[4] = clusters ? max_active_teams<16>() : 0;
  return cudaSuccess;
}

int sample_ranks(int64_t rows, const SampleLimits& limits) {
  // The largest team such that every row's team runs at once and the teams fit on the SMs.
  for (int level = 4; level >= 1; --level) {
    const int ranks = 1 << level;
    if (rows * ranks <= limits.sms && rows <= limits.max_teams[level]) return ranks;
  }
  return 1;
}

}  // namespace di::backend::cuda
