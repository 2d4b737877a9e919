// `cuda_kernels_bench --dense-f32` (dense_f32_bench.h). Floors from the same run: bytes (weights
// once, fp32 x and y) / copy bandwidth, and 2 x rows x out x in FLOPs / the measured rate of a
// rounded multiply then a rounded add (the bitwise kernels cannot fuse them; the FMA rate, about
// twice that, is printed too). Weights rotate through copies larger than L2.
#include "cuda/dense_f32_bench.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

#include "backend/cuda/hc_mix_rows.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/kv_cache_codec.h"
#include "cuda/bench_util.h"
#include "cuda/cublaslt_gemm.h"
#include "cuda/fp32_peak.h"
#include "tensor/numeric.h"

namespace di::bench {
namespace {

using backend::cuda::DenseTiledTile;
using backend::cuda::DeviceWeight;

struct Floors {
  double bytes_per_s = 0, mul_add_flops = 0;
};

struct Shape {
  const char* name;
  WeightFormat format;
  int64_t out, in;
  int groups;
};

// A 1M-value pattern repeated: host time stays small for the large activations.
std::vector<float> pattern(size_t n, uint32_t seed, float scale) {
  const std::vector<float> f = random_floats(size_t{1} << 20, seed);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = round_bf16(scale * f[i % f.size()]);
  return v;
}

Expected<std::vector<DeviceWeight>> weights(DeviceBuffers& buf, const Shape& s) {
  const size_t n = static_cast<size_t>(s.out * s.in);
  const size_t elem = s.format == WeightFormat::kBF16 ? 2 : 4;
  const int copies = static_cast<int>(std::max<size_t>(1, (size_t{256} << 20) / (elem * n) + 1));
  const std::vector<float> f = pattern(n, 1, 0.05f);
  std::vector<uint8_t> bytes(n * elem);
  for (size_t i = 0; i < n; ++i) {
    if (elem == 2) {
      const uint16_t h = float_to_bf16(f[i]);
      std::memcpy(bytes.data() + 2 * i, &h, 2);
    } else {
      std::memcpy(bytes.data() + 4 * i, &f[i], 4);
    }
  }
  std::vector<DeviceWeight> ws;
  for (int c = 0; c < copies; ++c) {
    DI_ASSIGN_OR_RETURN(uint8_t * d, buf.upload(bytes));
    ws.push_back({s.format, s.out, s.in, d, nullptr});
  }
  return ws;
}

// The kernel CudaOps took for these rows before dense_tiled (cuda_ops_impl.h), for the "old"
// column: the GEMV from 16K outputs, dense_staged below 2K outputs at <= 8 rows, else dense_gemm.
const char* old_kernel(const Shape& s, int64_t rows, const DeviceWeight& w) {
  if (s.out >= 16384 && backend::cuda::dense_gemv_applies(rows, w)) return "gemv";
  if (s.groups == 1 && s.out < 2048 && rows <= 8 && backend::cuda::dense_staged_applies(rows, w)) {
    return "staged";
  }
  return "8-lane";
}

cudaError_t run_old(
    const char* kernel, const float* x, int64_t rows, const DeviceWeight& w, int groups, float* y) {
  if (std::strcmp(kernel, "gemv") == 0) {
    return backend::cuda::dense_gemv(x, rows, w, groups, y, true, nullptr);
  }
  if (std::strcmp(kernel, "staged") == 0) {
    return backend::cuda::dense_staged(x, rows, w, y, true, nullptr);
  }
  return backend::cuda::dense_gemm_grouped(x, rows, w, groups, y, true, nullptr);
}

Status bench_shape(const Shape& s, const Floors& f) {
  DeviceBuffers buf;
  DI_ASSIGN_OR_RETURN(std::vector<DeviceWeight> ws, weights(buf, s));
  const int copies = static_cast<int>(ws.size());
  const int64_t cols = s.in * s.groups, max_rows = 4096;
  DI_ASSIGN_OR_RETURN(float* x, buf.upload(pattern(static_cast<size_t>(max_rows * cols), 2, 1)));
  DI_ASSIGN_OR_RETURN(float* y, buf.alloc<float>(static_cast<size_t>(max_rows * s.out)));
  const double welem = s.format == WeightFormat::kBF16 ? 2.0 : 4.0;
  // The lane tiles of hc_mix_rows (what `linear` takes for few outputs from 65 rows) read the
  // weights as fp32: widened copies, rotated like the originals.
  const bool lane_tiles =
      s.groups == 1 && backend::cuda::hc_mix_rows_supports(static_cast<int>(s.out));
  std::vector<float*> wf;
  if (lane_tiles) {
    for (const DeviceWeight& w : ws) {
      DI_ASSIGN_OR_RETURN(float* d, buf.alloc<float>(static_cast<size_t>(s.out * s.in)));
      if (s.format == WeightFormat::kBF16) {
        DI_CUDA_RETURN_IF_ERROR(backend::cuda::bf16_bits_to_f32(
            reinterpret_cast<const uint16_t*>(w.data), s.out * s.in, d, nullptr));
      } else {
        DI_CUDA_RETURN_IF_ERROR(cudaMemcpy(d, w.data,
                                           sizeof(float) * static_cast<size_t>(s.out * s.in),
                                           cudaMemcpyDeviceToDevice));
      }
      wf.push_back(d);
    }
  }
  for (int64_t rows : {1, 8, 16, 32, 64, 65, 128, 256, 1024, 4096}) {
    const double bytes = welem * s.out * s.in + 4.0 * rows * cols + 4.0 * rows * s.out;
    const double flops = 2.0 * rows * s.out * s.in;
    const double byte_ms = bytes / f.bytes_per_s * 1e3, flop_ms = flops / f.mul_add_flops * 1e3;
    const double floor_ms = std::max(byte_ms, flop_ms);
    const int iters = rows >= 1024 ? 5 : 20;
    const char* old = old_kernel(s, rows, ws[0]);
    DI_ASSIGN_OR_RETURN(double old_ms, mean_event_ms(iters, [&](int i) {
                          return run_old(old, x, rows, ws[i % copies], s.groups, y);
                        }));
    double tiled_ms[5] = {};
    const DenseTiledTile tiles[5] = {DenseTiledTile::kAuto, DenseTiledTile::kNarrow,
                                     DenseTiledTile::kTiny, DenseTiledTile::kSmall,
                                     DenseTiledTile::kLarge};
    for (int t = 0; t < 5; ++t) {
      DI_ASSIGN_OR_RETURN(tiled_ms[t], mean_event_ms(iters, [&](int i) {
                            return backend::cuda::dense_tiled(x, rows, ws[i % copies], s.groups, y,
                                                              true, nullptr, tiles[t]);
                          }));
    }
    std::printf(
        "| %s | %lld | %.4f (%s) | %.4f | %.4f / %.4f / %.4f / %.4f | %.4f (bytes %.4f, FLOPs "
        "%.4f) | %.3f | %.2f | %.1fx |\n",
        s.name, static_cast<long long>(rows), old_ms, old, tiled_ms[0], tiled_ms[1], tiled_ms[2],
        tiled_ms[3], tiled_ms[4], floor_ms, byte_ms, flop_ms, floor_ms / tiled_ms[0],
        flops / (tiled_ms[0] * 1e-3) / 1e12, old_ms / tiled_ms[0]);
    if (lane_tiles && rows >= 64) {
      DI_ASSIGN_OR_RETURN(const double lane_ms, mean_event_ms(iters, [&](int i) {
                            return backend::cuda::hc_mix_rows(x, rows, s.in, wf[i % copies],
                                                              static_cast<int>(s.out), y, nullptr,
                                                              true, nullptr);
                          }));
      // `linear` took dense_staged up to 8,192 outputs x rows before (else dense_tiled).
      double staged_ms = 0;
      if (rows * s.out <= 8192 && backend::cuda::dense_staged_applies(rows, ws[0])) {
        DI_ASSIGN_OR_RETURN(staged_ms, mean_event_ms(iters, [&](int i) {
                              return backend::cuda::dense_staged(x, rows, ws[i % copies], y, true,
                                                                 nullptr);
                            }));
      }
      std::printf(
          "| %s | %lld | lane tiles (hc_mix_rows) %.4f ms; staged %.4f ms | | | %.4f | %.3f | "
          "%.2f | |\n",
          s.name, static_cast<long long>(rows), lane_ms, staged_ms, floor_ms, floor_ms / lane_ms,
          flops / (lane_ms * 1e-3) / 1e12);
    }
  }
  return {};
}

}  // namespace

int dense_f32_bench() {
  auto run = []() -> Status {
    DI_ASSIGN_OR_RETURN(const MeasuredPeaks p, measure_copy_and_bf16_peaks());
    DI_ASSIGN_OR_RETURN(const Fp32Peaks fp, measure_fp32_peaks());
    const Floors f{p.bytes_per_s, fp.mul_add_flops};
    std::printf(
        "\ndense f32-activation products: copy %.0f GB/s (read+write), fp32 FMA %.1f TFLOP/s, "
        "multiply then add %.1f TFLOP/s (the FLOP floor's rate)\n",
        f.bytes_per_s / 1e9, fp.fma_flops / 1e12, fp.mul_add_flops / 1e12);
    std::printf(
        "| product | rows | old ms (kernel) | tiled auto ms | narrow / tiny / small / large ms | "
        "floor ms | floor/auto | auto TFLOP/s | old/auto |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|\n");
    const Shape shapes[] = {
        {"compressor wkv/wgate bf16 512x5120", WeightFormat::kBF16, 512, 5120, 1},
        {"indexer weights_proj bf16 32x5120", WeightFormat::kBF16, 32, 5120, 1},
        {"router bf16 16x5120", WeightFormat::kBF16, 16, 5120, 1},
        {"indexer weights_proj bf16 64x5120", WeightFormat::kBF16, 64, 5120, 1},
        {"indexer wk bf16 128x512", WeightFormat::kBF16, 128, 512, 1},
        {"hc_mixes fn f32 24x20480", WeightFormat::kF32, 24, 20480, 1},
        {"wo_a grouped bf16 8x1024x4096", WeightFormat::kBF16, 8192, 4096, 8},
    };
    for (const Shape& s : shapes) DI_RETURN_IF_ERROR(bench_shape(s, f));
    return {};
  };
  const Status s = run();
  if (!s.ok()) {
    std::fprintf(stderr, "dense f32 bench: %s\n", s.to_string().c_str());
    return 1;
  }
  return 0;
}

}  // namespace di::bench
