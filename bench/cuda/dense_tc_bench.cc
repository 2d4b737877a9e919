// `cuda_kernels_bench --dense-tc`: the tensor path's dense BF16 products at 1-256 rows with the
// row-group, the shared-tile and (sm_90) the wgmma kernel (the same bits; kAuto picks by rows and
// outputs), against floors measured in the same run: bytes (weights + bf16 x + fp32 y) / copy
// bandwidth and 2 x rows x out x in FLOPs / cuBLASLt's bf16 rate. Weights rotate through copies
// larger than L2.
#include "cuda/dense_tc_bench.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/dense_bf16_wgmma.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/kv_cache_codec.h"
#include "cuda/bench_util.h"
#include "cuda/cublaslt_gemm.h"
#include "tensor/numeric.h"

namespace di::bench {
namespace {

using backend::cuda::DenseTcKernel;
using backend::cuda::DeviceWeight;

template <class F>
Expected<double> mean_ms(int iters, F&& fn) {
  return mean_event_ms(iters, std::forward<F>(fn));
}

using Floors = MeasuredPeaks;

// bf16 bits of normal values, a 1M-element pattern repeated (host time stays small at 1.3 GB).
std::vector<uint16_t> bf16_values(size_t n, uint32_t seed) {
  const std::vector<float> f = random_floats(size_t{1} << 20, seed);
  std::vector<uint16_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = float_to_bf16(0.05f * f[i % f.size()]);
  return v;
}

Status bench_shape(const char* name,
                   int64_t out,
                   int64_t in,
                   int groups,
                   const Floors& f,
                   const std::vector<int64_t>& row_counts = {1, 8, 16, 32, 64, 128, 256}) {
  DeviceBuffers buf;
  const size_t welems = static_cast<size_t>(out * in);
  const int copies = static_cast<int>(std::max<size_t>(1, (size_t{256} << 20) / (2 * welems) + 1));
  std::vector<DeviceWeight> ws;
  {
    const std::vector<uint16_t> h = bf16_values(welems, 1);
    for (int c = 0; c < copies; ++c) {
      DI_ASSIGN_OR_RETURN(uint16_t * d, buf.upload(h));
      ws.push_back({WeightFormat::kBF16, out, in, reinterpret_cast<const uint8_t*>(d), nullptr});
    }
  }
  const int64_t max_rows = *std::max_element(row_counts.begin(), row_counts.end());
  const int64_t cols = groups * in;
  DI_ASSIGN_OR_RETURN(uint16_t * x,
                      buf.upload(bf16_values(static_cast<size_t>(max_rows * cols), 2)));
  DI_ASSIGN_OR_RETURN(float* y, buf.alloc<float>(static_cast<size_t>(max_rows * out)));
  // The warp-specialised head kernel reads x in the k32-logical order (converted per call by the
  // engine from the fp32 hidden state; timed separately below).
  const bool wspec = backend::cuda::dense_bf16_ws_supports(ws[0], groups);
  uint16_t* xl = nullptr;
  float* xf = nullptr;
  if (wspec) {
    const std::vector<uint16_t> xh = bf16_values(static_cast<size_t>(max_rows * cols), 2);
    std::vector<float> xfh(xh.size());
    for (size_t i = 0; i < xh.size(); ++i) xfh[i] = bf16_to_float(xh[i]);
    DI_ASSIGN_OR_RETURN(xl, buf.alloc<uint16_t>(xh.size()));
    DI_ASSIGN_OR_RETURN(xf, buf.upload(xfh));
    DI_CUDA_RETURN_IF_ERROR(backend::cuda::bf16_to_k32_logical(x, max_rows, cols, xl, nullptr));
  }
  for (int64_t rows : row_counts) {
    const double bytes = 2.0 * welems + 2.0 * rows * cols + 4.0 * rows * out;
    const double flops = 2.0 * rows * out * in;
    const double byte_ms = bytes / f.bytes_per_s * 1e3, flop_ms = flops / f.bf16_flops * 1e3;
    const double floor_ms = std::max(byte_ms, flop_ms);
    for (auto [kernel, label] : {std::pair{DenseTcKernel::kRowGroups, "row groups"},
                                 {DenseTcKernel::kSharedTile, "shared tile"},
                                 {DenseTcKernel::kSharedTileWide, "shared tile, 64 rows"},
                                 {DenseTcKernel::kWgmma, "wgmma"},
                                 {DenseTcKernel::kWgmmaWide, "wgmma, 128 rows"},
                                 {DenseTcKernel::kWgmmaDrain, "wgmma, drained per stage"},
                                 {DenseTcKernel::kAuto, "auto"}}) {
      if ((kernel == DenseTcKernel::kWgmma || kernel == DenseTcKernel::kWgmmaWide ||
           kernel == DenseTcKernel::kWgmmaDrain) &&
          !backend::cuda::dense_bf16_wgmma_available()) {
        continue;
      }
      const int iters = rows >= 64 && kernel == DenseTcKernel::kRowGroups ? 5 : 20;
      DI_ASSIGN_OR_RETURN(double ms, mean_ms(iters, [&](int i) {
                            return backend::cuda::dense_bf16_tc(x, rows, ws[i % copies], groups, y,
                                                                true, nullptr, kernel);
                          }));
      std::printf("| %s M=%lld %s | %.4f | %.4f (bytes %.4f, FLOPs %.4f) | %.3f | %.0f | %.1f |\n",
                  name, static_cast<long long>(rows), label, ms, floor_ms, byte_ms, flop_ms,
                  floor_ms / ms, bytes / (ms * 1e-3) / 1e9, flops / (ms * 1e-3) / 1e12);
    }
    if (!wspec || rows < 32) continue;
    // The fp32 -> bf16 conversions alone: the old path's (natural order) and the new one's.
    for (const bool logical : {false, true}) {
      DI_ASSIGN_OR_RETURN(
          double ms, mean_ms(20, [&](int) {
            return logical ? backend::cuda::f32_to_bf16_k32_logical(xf, rows, cols, xl, nullptr)
                           : backend::cuda::f32_to_bf16_bits(xf, rows * cols, xl, nullptr);
          }));
      const double conv_bytes = 6.0 * rows * cols;
      std::printf("| %s M=%lld x conversion, %s | %.4f | %.4f (bytes) | %.3f | %.0f | |\n", name,
                  static_cast<long long>(rows), logical ? "k32-logical" : "natural order", ms,
                  conv_bytes / f.bytes_per_s * 1e3, conv_bytes / f.bytes_per_s * 1e3 / ms,
                  conv_bytes / (ms * 1e-3) / 1e9);
    }
    struct Ws {
      int tile;
      bool convert;
      const char* label;
    };
    for (const Ws& v : {Ws{128, false, "warp-specialised, 128 rows"},
                        Ws{256, false, "warp-specialised, 256 rows"},
                        Ws{0, true, "warp-specialised + fp32 x conversion"}}) {
      const char* label = v.label;
      if (v.tile == 256 && backend::cuda::dense_bf16_tc_k_parts(ws[0]) > 1) continue;
      DI_ASSIGN_OR_RETURN(double ms, mean_ms(20, [&](int i) {
                            if (v.convert) {
                              const cudaError_t e = backend::cuda::f32_to_bf16_k32_logical(
                                  xf, rows, cols, xl, nullptr);
                              if (e != cudaSuccess) return e;
                            }
                            return backend::cuda::dense_bf16_wgmma_ws(
                                xl, rows, ws[i % copies], groups, y, true, nullptr, v.tile);
                          }));
      std::printf("| %s M=%lld %s | %.4f | %.4f (bytes %.4f, FLOPs %.4f) | %.3f | %.0f | %.1f |\n",
                  name, static_cast<long long>(rows), label, ms, floor_ms, byte_ms, flop_ms,
                  floor_ms / ms, bytes / (ms * 1e-3) / 1e9, flops / (ms * 1e-3) / 1e12);
    }
  }
  return {};
}

}  // namespace

int dense_tc_bench() {
  auto run = []() -> Status {
    DI_ASSIGN_OR_RETURN(const Floors f, measure_copy_and_bf16_peaks());
    std::printf(
        "\ndense bf16 tensor path: copy %.0f GB/s (read+write), cuBLASLt bf16 %.0f TFLOP/s "
        "(8192^3)\n",
        f.bytes_per_s / 1e9, f.bf16_flops / 1e12);
    std::printf("| product | ms | floor ms | floor/time | GB/s | TFLOP/s |\n");
    std::printf("|---|---|---|---|---|---|\n");
    DI_RETURN_IF_ERROR(bench_shape("head 129280x5120", 129280, 5120, 1, f,
                                   {1, 8, 16, 32, 64, 80, 96, 128, 192, 256, 512}));
    DI_RETURN_IF_ERROR(bench_shape("wo_a 8x1024x4096", 8192, 4096, 8, f,
                                   {1, 8, 16, 32, 64, 128, 256, 1024, 4096}));
    // The compressor's wkv / wgate (fp32 CUDA-core kernels today: --dense-f32 times them).
    DI_RETURN_IF_ERROR(
        bench_shape("compressor 512x5120", 512, 5120, 1, f, {1, 2, 8, 16, 64, 256, 1024, 4096}));
    return {};
  };
  const Status s = run();
  if (!s.ok()) {
    std::fprintf(stderr, "dense tc bench: %s\n", s.to_string().c_str());
    return 1;
  }
  return 0;
}

}  // namespace di::bench
