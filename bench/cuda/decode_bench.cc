// Decode weight-streaming kernels vs the byte floor (issue #6). Floor = bytes / copy bandwidth
// (1 GiB cudaMemcpyAsync D2D on a stream, read + write, measured here). Dense rows: bytes = weights
// + scales + bf16 activations in and out (the convention of kernels_bench.cc); each row times the
// GEMM kernel alone (launched as CudaOps::linear would: skinny_gemm_pick), every skinny tile
// variant, the previous decode kernel (block_scaled_gemm), and act_quant + skinny GEMM together.
// MoE rows: moe_routed's launches for T tokens; bytes = the distinct experts' FP4 weights and
// scales actually touched, plus x in and out; FLOPs = 2 T topk 3 dim inter over the bf16 peak
// (cuBLASLt 8192^3, measured here); the exact (CUDA-core) path up to 256 tokens, the tensor
// path (moe_grouped_tc.cu) also at 4,096. Timings are CUDA-graph replays of 20 launches (launch
// gaps as a captured decode step would have them); weights rotate through > 4x the L2 size.
#include "cuda/decode_bench.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/gemm_bf16_decode.h"
#include "backend/cuda/gemm_fp8.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/moe_grouped.h"
#include "cuda/bench_util.h"
#include "cuda/cublaslt_gemm.h"

namespace di::bench {

Expected<double> graph_us(int reps, const std::function<cudaError_t(int, cudaStream_t)>& fn) {
  constexpr int kLaunches = kGraphLaunches;
  cudaStream_t s = nullptr;
  DI_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaGraph_t g = nullptr;
  cudaGraphExec_t ge = nullptr;
  cudaEvent_t a = nullptr, b = nullptr;
  auto cleanup = [&]() {
    if (ge) (void)cudaGraphExecDestroy(ge);
    if (g) (void)cudaGraphDestroy(g);
    if (a) (void)cudaEventDestroy(a);
    if (b) (void)cudaEventDestroy(b);
    (void)cudaStreamDestroy(s);
  };
  cudaError_t e = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
  for (int i = 0; e == cudaSuccess && i < kLaunches; ++i) e = fn(i, s);
  cudaError_t end = cudaStreamEndCapture(s, &g);
  if (e == cudaSuccess) e = end;
  if (e == cudaSuccess) e = cudaGraphInstantiate(&ge, g, 0);
  if (e == cudaSuccess) e = cudaEventCreate(&a);
  if (e == cudaSuccess) e = cudaEventCreate(&b);
  if (e == cudaSuccess) e = cudaGraphLaunch(ge, s);
  double best = 1e30;
  for (int r = 0; e == cudaSuccess && r < reps; ++r) {
    e = cudaEventRecord(a, s);
    if (e == cudaSuccess) e = cudaGraphLaunch(ge, s);
    if (e == cudaSuccess) e = cudaEventRecord(b, s);
    if (e == cudaSuccess) e = cudaEventSynchronize(b);
    float ms = 0;
    if (e == cudaSuccess) e = cudaEventElapsedTime(&ms, a, b);
    best = std::min(best, 1e3 * ms / kLaunches);
  }
  cleanup();
  DI_CUDA_RETURN_IF_ERROR(e);
  return best;
}

namespace {

using backend::cuda::DeviceWeight;
using di::WeightFormat;

constexpr size_t kRotateBytes = size_t{256} << 20;

Expected<double> copy_bandwidth() {
  DeviceBuffers buf;
  const size_t n = size_t{1} << 30;
  DI_ASSIGN_OR_RETURN(uint8_t * a, buf.alloc<uint8_t>(n));
  DI_ASSIGN_OR_RETURN(uint8_t * b, buf.alloc<uint8_t>(n));
  DI_CUDA_RETURN_IF_ERROR(cudaMemset(a, 1, n));
  // Stream-ordered, as kernels_bench.cc measures it (a memcpy node in a graph ran on a copy
  // engine at about 2.7 TB/s in the first run: not the HBM rate).
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  DI_CUDA_RETURN_IF_ERROR(cudaEventCreate(&e0));
  DI_CUDA_RETURN_IF_ERROR(cudaEventCreate(&e1));
  float ms = 0;
  for (int i = 0; i < 3; ++i)
    DI_CUDA_RETURN_IF_ERROR(cudaMemcpy(b, a, n, cudaMemcpyDeviceToDevice));
  DI_CUDA_RETURN_IF_ERROR(cudaEventRecord(e0));
  for (int i = 0; i < 10; ++i) {
    DI_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice));
  }
  DI_CUDA_RETURN_IF_ERROR(cudaEventRecord(e1));
  DI_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(e1));
  DI_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, e0, e1));
  (void)cudaEventDestroy(e0);
  (void)cudaEventDestroy(e1);
  return 2.0 * static_cast<double>(n) * 10 / (ms * 1e-3);
}

struct Shape {
  const char* name;
  WeightFormat format;
  int64_t out, in;
};

Status bench_dense(const Shape& sh, const std::vector<int64_t>& rows_list, int reps, double bw) {
  DeviceBuffers buf;
  const bool fp8 = sh.format == WeightFormat::kFP8;
  const size_t wbytes = static_cast<size_t>(fp8 ? sh.out * sh.in : sh.out * sh.in / 2);
  const size_t sbytes =
      static_cast<size_t>(fp8 ? ((sh.out + 31) / 32) * (sh.in / 32) : sh.out * (sh.in / 32));
  const int copies = static_cast<int>(std::max<size_t>(2, kRotateBytes / wbytes + 1));
  std::vector<DeviceWeight> ws;
  const auto host_w = random_bytes(wbytes, 10, false);
  const auto host_s = random_bytes(sbytes, 20, true);
  for (int c = 0; c < copies; ++c) {
    DI_ASSIGN_OR_RETURN(uint8_t * d, buf.upload(host_w));
    DI_ASSIGN_OR_RETURN(uint8_t * sc, buf.upload(host_s));
    ws.push_back({sh.format, sh.out, sh.in, d, sc});
  }
  const int64_t max_rows = *std::max_element(rows_list.begin(), rows_list.end());
  DI_ASSIGN_OR_RETURN(float* x,
                      buf.upload(random_floats(static_cast<size_t>(max_rows * sh.in), 3)));
  DI_ASSIGN_OR_RETURN(float* q, buf.alloc<float>(static_cast<size_t>(max_rows * sh.in)));
  DI_ASSIGN_OR_RETURN(float* s, buf.alloc<float>(static_cast<size_t>(max_rows * sh.in / 32)));
  DI_ASSIGN_OR_RETURN(float* y, buf.alloc<float>(static_cast<size_t>(max_rows * sh.out)));
  namespace bc = backend::cuda;
  for (int64_t m : rows_list) {
    DI_CUDA_RETURN_IF_ERROR(bc::quantize_fp8(x, m, sh.in, q, s, nullptr));
    const double bytes = static_cast<double>(wbytes + sbytes) + 2.0 * m * sh.in + 2.0 * m * sh.out;
    const double floor_us = bytes / bw * 1e6;
    const int pick = bc::skinny_gemm_pick(m, ws[0]);
    std::string notes = "variants (8/16/32 cols x 1, 2 CTAs/SM):";
    double best_variant = 1e30;
    for (int v = 0; v < bc::kSkinnyVariants; ++v) {
      DI_ASSIGN_OR_RETURN(double us, graph_us(reps, [&](int i, cudaStream_t st) {
                            return bc::skinny_gemm_variant(v, q, s, m, ws[i % copies], y, st);
                          }));
      char b[32];
      std::snprintf(b, sizeof b, " %.1f%s", us, v == pick ? "*" : "");
      notes += b;
      best_variant = std::min(best_variant, us);
    }
    // (The previous kernel queries occupancy while launching; if capture refuses that: -1.)
    auto old = graph_us(reps, [&](int i, cudaStream_t st) {
      return bc::block_scaled_gemm(q, s, m, ws[i % copies], y, st);
    });
    const double old_us = old ? *old : -1.0;
    (void)cudaGetLastError();
    DI_ASSIGN_OR_RETURN(double pick_us, graph_us(reps, [&](int i, cudaStream_t st) {
                          return bc::skinny_gemm(q, s, m, ws[i % copies], y, st);
                        }));
    DI_ASSIGN_OR_RETURN(double linear_us, graph_us(reps, [&](int i, cudaStream_t st) {
                          cudaError_t e = bc::quantize_fp8(x, m, sh.in, q, s, st);
                          if (e != cudaSuccess) return e;
                          return bc::skinny_gemm(q, s, m, ws[i % copies], y, st);
                        }));
    char extra[160];
    std::snprintf(extra, sizeof extra,
                  "; best %.2f of floor; previous decode kernel %.1f us; "
                  "act_quant + GEMM %.1f us",
                  floor_us / best_variant, old_us, linear_us);
    std::printf("| %s %s %lldx%lld | %lld | %.1f | %.1f | %.2f | %s%s |\n", sh.name,
                fp8 ? "fp8" : "fp4", static_cast<long long>(sh.out), static_cast<long long>(sh.in),
                static_cast<long long>(m), pick_us, floor_us, floor_us / pick_us, notes.c_str(),
                extra);
  }
  return {};
}

// The tensor path's FP8 products at few rows on sm_90, act_quant included (as CudaOps::linear
// runs them): the bf16 wgmma kernel's tile for M (block_scaled_gemm_wgmma_bf16) next to the
// decode kernel that CudaOps picks for <= 8 rows and < 4,224 outputs (gemm_bf16_decode.cu, the
// same bits), both on the lane-order weight layout.
Status bench_tensor_decode(const Shape& sh,
                           const std::vector<int64_t>& rows_list,
                           int reps,
                           double bw) {
  DeviceBuffers buf;
  const size_t wbytes = static_cast<size_t>(sh.out * sh.in);
  const size_t sbytes = static_cast<size_t>(((sh.out + 31) / 32) * (sh.in / 32));
  const size_t pbytes = static_cast<size_t>(backend::cuda::wgmma_bf16_layout_bytes(sh.out, sh.in));
  const int copies = static_cast<int>(std::max<size_t>(2, kRotateBytes / wbytes + 1));
  const auto host_w = random_bytes(wbytes, 10, false);
  const auto host_s = random_bytes(sbytes, 20, true);
  DI_ASSIGN_OR_RETURN(uint8_t * raw, buf.upload(host_w));
  std::vector<DeviceWeight> ws;
  for (int c = 0; c < copies; ++c) {
    DI_ASSIGN_OR_RETURN(uint8_t * d, buf.alloc<uint8_t>(pbytes));
    DI_CUDA_RETURN_IF_ERROR(backend::cuda::wgmma_bf16_permute(raw, sh.out, sh.in, d, nullptr));
    DI_ASSIGN_OR_RETURN(uint8_t * sc, buf.upload(host_s));
    ws.push_back({sh.format, sh.out, sh.in, d, sc});
  }
  if (!backend::cuda::wgmma_bf16_applies(ws[0])) return {};
  const int64_t max_rows = *std::max_element(rows_list.begin(), rows_list.end());
  DI_ASSIGN_OR_RETURN(float* x,
                      buf.upload(random_floats(static_cast<size_t>(max_rows * sh.in), 3)));
  DI_ASSIGN_OR_RETURN(uint16_t * xb, buf.alloc<uint16_t>(static_cast<size_t>(max_rows * sh.in)));
  DI_ASSIGN_OR_RETURN(float* y, buf.alloc<float>(static_cast<size_t>(max_rows * sh.out)));
  DI_CUDA_RETURN_IF_ERROR(backend::cuda::quantize_fp8_bf16(x, max_rows, sh.in, xb, nullptr));
  namespace bc = backend::cuda;
  for (int64_t m : rows_list) {
    const double bytes = static_cast<double>(wbytes + sbytes) + 2.0 * m * sh.in + 4.0 * m * sh.out;
    const double floor_us = bytes / bw * 1e6;
    DI_ASSIGN_OR_RETURN(double wg_us, graph_us(reps, [&](int i, cudaStream_t st) {
                          cudaError_t e = bc::quantize_fp8_bf16(x, m, sh.in, xb, st);
                          if (e != cudaSuccess) return e;
                          return bc::block_scaled_gemm_wgmma_bf16(xb, m, ws[i % copies], y, st);
                        }));
    // The decode tile (variant 3, 8 stages) against deeper pipelines (5: 16 stages, 6: 12).
    double tile_us[3] = {-1, -1, -1};
    for (int j = 0; j < 3 && m <= 8; ++j) {
      const int v = j == 0 ? 3 : j == 1 ? 6 : 5;
      DI_ASSIGN_OR_RETURN(tile_us[j], graph_us(reps, [&](int i, cudaStream_t st) {
                            cudaError_t e = bc::quantize_fp8_bf16(x, m, sh.in, xb, st);
                            if (e != cudaSuccess) return e;
                            return bc::block_scaled_gemm_wgmma_bf16(v, xb, m, ws[i % copies], y,
                                                                    st);
                          }));
    }
    double dec_us[bc::kBf16DecodeVariants + 1] = {-1, -1, -1, -1};
    for (int v = 0; v <= bc::kBf16DecodeVariants; ++v) {
      if (!bc::bf16_decode_applies(m, ws[0])) break;
      DI_ASSIGN_OR_RETURN(dec_us[v], graph_us(reps, [&](int i, cudaStream_t st) {
                            cudaError_t e = bc::quantize_fp8_bf16(x, m, sh.in, xb, st);
                            if (e != cudaSuccess) return e;
                            return bc::block_scaled_gemm_bf16_decode(xb, m, ws[i % copies], y, st,
                                                                     v);
                          }));
    }
    std::printf(
        "| %s fp8 %lldx%lld (tensor) | %lld | %.1f | %.1f | %.2f | act_quant + wgmma tile %.1f us "
        "(%.2f); "
        "decode kernel 8 / 16 warps / K split %.1f / %.1f / %.1f; tile 8 / 12 / 16 stages %.1f / "
        "%.1f / "
        "%.1f; "
        "CudaOps takes the %s |\n",
        sh.name, static_cast<long long>(sh.out), static_cast<long long>(sh.in),
        static_cast<long long>(m), dec_us[0], floor_us, floor_us / dec_us[0], wg_us,
        floor_us / wg_us, dec_us[1], dec_us[2], dec_us[3], tile_us[0], tile_us[1], tile_us[2],
        bc::bf16_decode_preferred(m, ws[0]) ? "decode kernel" : "wgmma tile");
  }
  return {};
}

// Routed experts at V4.1 shapes for `tokens` tokens with uniformly random top-k routing.
// `variants`: the tensor path's tile variants timed after its pick (in the notes); exact: the
// CUDA-core path too, up to 256 tokens.
Status bench_moe(const std::vector<int64_t>& token_list,
                 int reps,
                 double bw,
                 double flops,
                 const std::vector<int>& variants,
                 int E = 384,
                 bool exact = true,
                 bool with_pick = true) {
  namespace bc = backend::cuda;
  const int topk = 6;
  const int64_t dim = 5120, inter = 2304;
  const size_t mat_bytes = static_cast<size_t>(inter * dim / 2);
  const size_t mat_scale = static_cast<size_t>(inter * dim / 32);
  DeviceBuffers buf;
  // One arena for all 3 x 384 matrices (6.8 GB), filled from one random block by device copies.
  const size_t per_expert = 3 * (mat_bytes + mat_scale);
  DI_ASSIGN_OR_RETURN(uint8_t * arena, buf.alloc<uint8_t>(per_expert * E));
  const auto block = random_bytes(mat_bytes, 31, false);
  const auto sblock = random_bytes(mat_scale, 37, true);
  DI_ASSIGN_OR_RETURN(uint8_t * dblock, buf.upload(block));
  DI_ASSIGN_OR_RETURN(uint8_t * dsblock, buf.upload(sblock));
  std::vector<const uint8_t*> data[3], scale[3];
  for (int e = 0; e < E; ++e) {
    for (int k = 0; k < 3; ++k) {
      uint8_t* d = arena + e * per_expert + k * (mat_bytes + mat_scale);
      DI_CUDA_RETURN_IF_ERROR(cudaMemcpy(d, dblock, mat_bytes, cudaMemcpyDeviceToDevice));
      DI_CUDA_RETURN_IF_ERROR(
          cudaMemcpy(d + mat_bytes, dsblock, mat_scale, cudaMemcpyDeviceToDevice));
      data[k].push_back(d);
      scale[k].push_back(d + mat_bytes);
    }
  }
  bc::MoeRoutedArgs a;
  bc::ExpertMatrices* mats[3] = {&a.w1, &a.w3, &a.w2};
  for (int k = 0; k < 3; ++k) {
    DI_ASSIGN_OR_RETURN(const uint8_t** dd, buf.upload(data[k]));
    DI_ASSIGN_OR_RETURN(const uint8_t** ds, buf.upload(scale[k]));
    mats[k]->data = dd;
    mats[k]->scale = ds;
  }
  std::mt19937 rng(41);
  for (int64_t T : token_list) {
    constexpr int kTables = 8;  // routings rotate so that repeated launches read other experts
    std::vector<int32_t*> ex(kTables);
    std::vector<float*> wt(kTables);
    double touched = 0;
    for (int r = 0; r < kTables; ++r) {
      std::vector<int32_t> ids;
      std::vector<float> w;
      std::set<int> distinct;
      for (int64_t t = 0; t < T; ++t) {
        std::vector<int32_t> perm(E);
        std::iota(perm.begin(), perm.end(), 0);
        std::shuffle(perm.begin(), perm.end(), rng);
        for (int k = 0; k < topk; ++k) {
          ids.push_back(perm[static_cast<size_t>(k)]);
          w.push_back(0.25f);
          distinct.insert(perm[static_cast<size_t>(k)]);
        }
      }
      touched += static_cast<double>(distinct.size()) / kTables;
      DI_ASSIGN_OR_RETURN(ex[r], buf.upload(ids));
      DI_ASSIGN_OR_RETURN(wt[r], buf.upload(w));
    }
    DI_ASSIGN_OR_RETURN(float* x, buf.upload(random_floats(static_cast<size_t>(T * dim), 43)));
    DI_ASSIGN_OR_RETURN(float* shared, buf.upload(random_floats(static_cast<size_t>(T * dim), 47)));
    DI_ASSIGN_OR_RETURN(float* out, buf.alloc<float>(static_cast<size_t>(T * dim)));
    DI_ASSIGN_OR_RETURN(uint8_t * scratch,
                        buf.alloc<uint8_t>(bc::moe_routed_scratch_bytes(T, topk, E, dim, inter)));
    a.x = x;
    a.tokens = T;
    a.dim = dim;
    a.inter = inter;
    a.topk = topk;
    a.num_experts = E;
    a.swiglu_limit = 10.0f;
    a.shared = shared;
    a.out = out;
    const double bytes = touched * static_cast<double>(per_expert) + 4.0 * T * dim * 2;
    const double byte_us = bytes / bw * 1e6;
    const double flop_us = 2.0 * T * topk * 3 * dim * inter / flops * 1e6;
    const double floor_us = std::max(byte_us, flop_us);
    for (const bool tc : {false, true}) {
      if (!tc && (T > 256 || !exact)) continue;  // the CUDA-core path at prefill: seconds a graph
      a.tensor_cores = tc;
      std::string notes = tc ? "variants" : "CUDA cores (moe_routed_pick)";
      double pick_us = 0;
      // The CUDA-core variants' sweep is in session 6's table; only the tensor path sweeps here.
      std::vector<int> vs;
      if (with_pick || !tc) vs.push_back(-1);
      if (tc) vs.insert(vs.end(), variants.begin(), variants.end());
      // Every variant's output after the same replays, against the first one's (bitwise).
      std::vector<float> first_out, this_out(static_cast<size_t>(T * dim));
      int differing = 0;
      for (const int v : vs) {
        a.tile_variant = v;
        DI_ASSIGN_OR_RETURN(double us, graph_us(reps, [&](int i, cudaStream_t st) {
                              bc::MoeRoutedArgs c = a;
                              c.experts = ex[i % kTables];
                              c.weights = wt[i % kTables];
                              return bc::moe_routed(c, scratch, st);
                            }));
        DI_CUDA_RETURN_IF_ERROR(cudaMemcpy(this_out.data(), out, this_out.size() * sizeof(float),
                                           cudaMemcpyDeviceToHost));
        if (first_out.empty()) {
          first_out = this_out;
        } else if (std::memcmp(first_out.data(), this_out.data(),
                               this_out.size() * sizeof(float)) != 0) {
          ++differing;
        }
        if (v < 0) {
          pick_us = us;
        } else {
          char b[48];
          std::snprintf(b, sizeof b, " %d: %.1f (%.0f TF/s)", v, us,
                        2.0 * T * topk * 3 * dim * inter / us / 1e6);
          notes += b;
        }
      }
      if (vs.size() > 1) notes += differing ? "; OUTPUTS DIFFER" : "; outputs bitwise equal";
      std::printf(
          "| moe_routed fp4 E=%d top-6 5120/2304, %s | %lld | %.1f | %.1f | %.2f | byte floor "
          "%.1f, FLOP floor %.1f us (%.0f TFLOP/s); %.1f experts touched (%.0f MB); %s |\n",
          E, tc ? "tensor" : "exact", static_cast<long long>(T), pick_us, floor_us,
          floor_us / pick_us, byte_us, flop_us, 2.0 * T * topk * 3 * dim * inter / pick_us / 1e6,
          touched, bytes / 1e6, notes.c_str());
    }
  }
  return {};
}

// The bf16 tensor rate the FLOP floors divide by: cuBLASLt at 8192^3, as kernels_bench.cc.
Expected<double> bf16_peak() {
  const int64_t s = 8192;
  DI_ASSIGN_OR_RETURN(double ms, time_cublaslt_gemm(LtType::kBF16, s, s, s, 20));
  return 2.0 * s * s * s / (ms * 1e-3);
}

}  // namespace

Status run_profile_launches() {
  // One plain launch each of the square FP8 GEMM at 1 and 8 rows (skinny) and at 4096 rows (the
  // tensor path, both weight layouts), for a profiler.
  DeviceBuffers buf;
  const int64_t n = 5120, k = 5120;
  DI_ASSIGN_OR_RETURN(uint8_t * w, buf.upload(random_bytes(static_cast<size_t>(n * k), 1, false)));
  DI_ASSIGN_OR_RETURN(uint8_t * sc,
                      buf.upload(random_bytes(static_cast<size_t>(n * k / 1024), 2, true)));
  DI_ASSIGN_OR_RETURN(float* x, buf.upload(random_floats(static_cast<size_t>(8 * k), 3)));
  DI_ASSIGN_OR_RETURN(float* q, buf.alloc<float>(static_cast<size_t>(8 * k)));
  DI_ASSIGN_OR_RETURN(float* s, buf.alloc<float>(static_cast<size_t>(8 * k / 32)));
  DI_ASSIGN_OR_RETURN(float* y, buf.alloc<float>(static_cast<size_t>(8 * n)));
  const DeviceWeight dw{WeightFormat::kFP8, n, k, w, sc};
  DI_CUDA_RETURN_IF_ERROR(backend::cuda::quantize_fp8(x, 8, k, q, s, nullptr));
  for (int64_t m : {1, 8}) {
    DI_CUDA_RETURN_IF_ERROR(backend::cuda::skinny_gemm(q, s, m, dw, y, nullptr));
  }
  // The tensor path's prefill GEMM at 4096 rows, in its layout and on the row-major weights.
  const int64_t mp = 4096;
  DI_ASSIGN_OR_RETURN(float* xp, buf.upload(random_floats(static_cast<size_t>(mp * k), 4)));
  DI_ASSIGN_OR_RETURN(uint16_t * xb, buf.alloc<uint16_t>(static_cast<size_t>(mp * k)));
  DI_ASSIGN_OR_RETURN(float* yp, buf.alloc<float>(static_cast<size_t>(mp * n)));
  DI_ASSIGN_OR_RETURN(uint8_t * wp, buf.alloc<uint8_t>(static_cast<size_t>(n * k)));
  DI_CUDA_RETURN_IF_ERROR(backend::cuda::wgmma_bf16_permute(w, n, k, wp, nullptr));
  DI_CUDA_RETURN_IF_ERROR(backend::cuda::quantize_fp8_bf16(xp, mp, k, xb, nullptr));
  if (backend::cuda::wgmma_bf16_applies(dw)) {
    const DeviceWeight dwp{WeightFormat::kFP8, n, k, wp, sc};
    DI_CUDA_RETURN_IF_ERROR(backend::cuda::block_scaled_gemm_wgmma_bf16(xb, mp, dwp, yp, nullptr));
    DI_CUDA_RETURN_IF_ERROR(
        backend::cuda::block_scaled_gemm_wgmma_bf16_rowmajor(xb, mp, dw, yp, nullptr));
  }
  // The fp8 path's persistent kernel (gemm_fp8.cu) at 4096 rows.
  DI_ASSIGN_OR_RETURN(uint8_t * qa, buf.alloc<uint8_t>(static_cast<size_t>(mp * k)));
  DI_ASSIGN_OR_RETURN(float* qs, buf.alloc<float>(static_cast<size_t>(mp * k / 32)));
  DI_CUDA_RETURN_IF_ERROR(backend::cuda::quantize_fp8_e4m3(xp, mp, k, qa, qs, nullptr));
  if (backend::cuda::wgmma_gemm_applies(qa, qs, dw)) {
    DI_CUDA_RETURN_IF_ERROR(backend::cuda::block_scaled_gemm_fp8(backend::cuda::fp8_mode_variant(k),
                                                                 qa, qs, mp, dw, yp, nullptr));
  }
  DI_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  return {};
}

Status run_moe_bench(int mode, int variant) {
  const bool sweep = mode == 1;
  // One token, 16 experts: one graph of the pick or of `variant` (for a profiler; no floors).
  if (mode == 6 && variant < 0) return bench_moe({1}, 1, 1e12, 1e12, {}, 16, false);
  if (mode == 6) return bench_moe({1}, 1, 1e12, 1e12, {variant}, 16, false, false);
  DI_ASSIGN_OR_RETURN(double bw, copy_bandwidth());
  DI_ASSIGN_OR_RETURN(double flops, bf16_peak());
  if (mode == 3) return bench_moe({4096}, 1, bw, flops, {}, 16, false);
  if (mode == 7) {
    // Decode sizes, the single-group tile variants side by side (3: tile, 10: the decode
    // product, 11: 10 with the up product's K split over two warp groups).
    std::printf(
        "\nrouted experts at decode sizes, variants: copy %.0f GB/s; us per launch\n\n"
        "| kernel | tokens | us | floor us | floor/time | notes |\n"
        "|---|---|---|---|---|---|\n",
        bw / 1e9);
    DI_RETURN_IF_ERROR(bench_moe({1, 2, 4, 8}, 5, bw, flops, {3, 10, 11}, 16, false));
    return bench_moe({1, 8}, 5, bw, flops, {3, 10, 11}, 384, false);
  }
  if (mode == 5) {
    // Decode sizes (the batch-1 to batch-8 steps' routed experts): the pick.
    std::printf(
        "\nrouted experts at decode sizes: copy %.0f GB/s (read+write); us per launch (graph "
        "replay)\n\n| kernel | tokens | us | floor us | floor/time | notes |\n"
        "|---|---|---|---|---|---|\n",
        bw / 1e9);
    DI_RETURN_IF_ERROR(bench_moe({1, 2, 4, 8}, 5, bw, flops, {}, 16, false));
    return bench_moe({1, 2, 4, 8}, 5, bw, flops, {}, 384, false);
  }
  std::printf(
      "\nrouted experts: copy %.0f GB/s (read+write), bf16 %.0f TFLOP/s; us per launch (graph "
      "replay)\n\n",
      bw / 1e9, flops / 1e12);
  std::printf(
      "| kernel | tokens | us | floor us | floor/time | notes |\n|---|---|---|---|---|---|\n");
  std::vector<int> all;
  if (sweep) {
    for (int v = 0; v < backend::cuda::kMoeTcVariants; ++v) all.push_back(v);
  }
  if (mode != 4) DI_RETURN_IF_ERROR(bench_moe({1, 8, 64, 256, 4096}, 5, bw, flops, all));
  // Many rows per expert (the wgmma kernels, variants 6-8 and 12, against the 32-row mma.sync
  // variant 2): one timed graph of 20 launches each.
  std::printf(
      "\n| kernel | tokens | us | floor us | floor/time | notes |\n|---|---|---|---|---|---|\n");
  for (const int E : {16, 384}) {
    DI_RETURN_IF_ERROR(
        bench_moe({256, 1024, 4096, 16384}, 1, bw, flops, {2, 6, 12, 7, 8}, E, false));
  }
  return {};
}

Status run_decode_bench(bool quick) {
  const int reps = quick ? 2 : 5;
  DI_ASSIGN_OR_RETURN(double bw, copy_bandwidth());
  std::printf(
      "\ndecode kernels: copy %.0f GB/s (read+write); times in us per launch (graph "
      "replay); * = the variant skinny_gemm picks\n\n",
      bw / 1e9);
  std::printf(
      "| kernel | rows | us | floor us | floor/time | notes |\n|---|---|---|---|---|---|\n");
  const std::vector<Shape> shapes = {{"wq_a", WeightFormat::kFP8, 1280, 5120},
                                     {"wq_b", WeightFormat::kFP8, 32768, 1280},
                                     {"wkv", WeightFormat::kFP8, 512, 5120},
                                     {"wo_a group", WeightFormat::kFP8, 1024, 4096},
                                     {"wo_b", WeightFormat::kFP8, 5120, 8192},
                                     {"shared w1/w3", WeightFormat::kFP8, 2304, 5120},
                                     {"shared w2", WeightFormat::kFP8, 5120, 2304},
                                     {"indexer wq_b", WeightFormat::kFP8, 4096, 1280},
                                     {"square", WeightFormat::kFP8, 5120, 5120},
                                     {"dspark main_proj", WeightFormat::kFP8, 5120, 10240},
                                     {"engram wkv", WeightFormat::kFP8, 25600, 6144},
                                     {"expert w1", WeightFormat::kFP4, 2304, 5120},
                                     {"expert w2", WeightFormat::kFP4, 5120, 2304}};
  for (const Shape& sh : shapes) {
    if (sh.format == WeightFormat::kFP8) {
      DI_RETURN_IF_ERROR(bench_tensor_decode(sh, {1, 2, 4, 8}, reps, bw));
    }
  }
  for (const Shape& sh : shapes) {
    const bool wide = std::string(sh.name) == "square";
    DI_RETURN_IF_ERROR(bench_dense(
        sh, wide ? std::vector<int64_t>{1, 2, 4, 8, 16, 32, 64} : std::vector<int64_t>{1, 2, 4, 8},
        reps, bw));
  }
  std::printf(
      "\n| kernel | tokens | us | floor us | floor/time | notes |\n|---|---|---|---|---|---|\n");
  DI_ASSIGN_OR_RETURN(double flops, bf16_peak());
  std::printf("\nbf16 peak (cuBLASLt 8192^3): %.0f TFLOP/s\n", flops / 1e12);
  return bench_moe({1, 8, 64, 256, 4096}, reps, bw, flops, {});
}

}  // namespace di::bench
