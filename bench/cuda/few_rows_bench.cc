// The batch-1 step's FP8 products at 1 and 8 rows on every few-row variant (issue #6, row14):
// the bf16 wgmma kernel's decode tiles (block_scaled_gemm_wgmma_bf16 variants 3 and 5-10: ring
// depth, four blocks in flight) and the decode kernel's four spreads
// (gemm_bf16_decode.cu), each as CudaOps::linear runs it (act_quant + product, graph replays of 20
// launches, weights rotating through more than the L2). All variants give the same bits (their
// tests); only time differs. Floor = (weight bytes + scale bytes) / 4.2 TB/s, the convention of the
// step's kernel table (docs/benchmarks.md). `profile`: one plain launch of each instead, for ncu.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/gemm_bf16_decode.h"
#include "backend/cuda/kernels.h"
#include "cuda/bench_util.h"
#include "cuda/decode_bench.h"

namespace di::bench {
namespace {

namespace bc = backend::cuda;

// out2 > 0: a pair of products on the same activations in one decode launch
// (CudaOps::linear_pair: the shared w1 and w3, wq_a and wkv), timed on the decode kernel only.
struct FewRowShape {
  const char* name;
  int64_t out, in, out2;
};

// The step's FP8 products at one row (V4.1 shapes), largest first.
constexpr FewRowShape kShapes[] = {{"engram wkv", 25600, 6144, 0},
                                   {"wq_b", 32768, 1280, 0},
                                   {"dspark main_proj", 5120, 10240, 0},
                                   {"wo_b", 5120, 8192, 0},
                                   {"shared w2", 5120, 2304, 0},
                                   {"shared w1", 2304, 5120, 0},
                                   {"wq_a", 1280, 5120, 0},
                                   {"indexer wq_b", 4096, 1280, 0},
                                   {"square", 5120, 5120, 0},
                                   {"shared w1+w3", 2304, 5120, 2304},
                                   {"wq_a+wkv", 1280, 5120, 512}};
constexpr int kTileVariants[] = {3, 5, 6, 7, 8, 9, 10};
// For ncu: the present picks and the candidates, on the four largest products.
constexpr int kProfileVariants[] = {3, 5, 8, 9, 10, 103, 104};
constexpr int kProfileShapes = 4;
constexpr double kFloorBandwidth = 4.2e12;  // bytes/s

Status bench_shape(const FewRowShape& sh, bool profile) {
  DeviceBuffers buf;
  const size_t wbytes = static_cast<size_t>(sh.out * sh.in);
  const size_t sbytes = static_cast<size_t>(((sh.out + 31) / 32) * (sh.in / 32));
  const int copies =
      profile ? 1 : static_cast<int>(std::max<size_t>(2, (size_t{256} << 20) / wbytes + 1));
  const auto host_w = random_bytes(wbytes, 10, false);
  const auto host_s = random_bytes(sbytes, 20, true);
  DI_ASSIGN_OR_RETURN(uint8_t * raw, buf.upload(host_w));
  // Weight copies (and the pair's second weight: the first rows of the same bytes).
  auto upload = [&](int64_t out) -> Expected<bc::DeviceWeight> {
    DI_ASSIGN_OR_RETURN(
        uint8_t * d,
        buf.alloc<uint8_t>(static_cast<size_t>(bc::wgmma_bf16_layout_bytes(out, sh.in))));
    DI_CUDA_RETURN_IF_ERROR(bc::wgmma_bf16_permute(raw, out, sh.in, d, nullptr));
    DI_ASSIGN_OR_RETURN(uint8_t * sc, buf.upload(host_s));
    return bc::DeviceWeight{WeightFormat::kFP8, out, sh.in, d, sc};
  };
  std::vector<bc::DeviceWeight> ws, ws2;
  for (int c = 0; c < copies; ++c) {
    DI_ASSIGN_OR_RETURN(bc::DeviceWeight w, upload(sh.out));
    ws.push_back(w);
    if (sh.out2 == 0) continue;
    DI_ASSIGN_OR_RETURN(bc::DeviceWeight w2, upload(sh.out2));
    ws2.push_back(w2);
  }
  if (!bc::wgmma_bf16_applies(ws[0])) return {};
  constexpr int64_t kMaxRows = 8;
  DI_ASSIGN_OR_RETURN(float* x,
                      buf.upload(random_floats(static_cast<size_t>(kMaxRows * sh.in), 3)));
  DI_ASSIGN_OR_RETURN(uint16_t * xb, buf.alloc<uint16_t>(static_cast<size_t>(kMaxRows * sh.in)));
  DI_ASSIGN_OR_RETURN(float* y, buf.alloc<float>(static_cast<size_t>(kMaxRows * sh.out)));
  DI_ASSIGN_OR_RETURN(float* y2, buf.alloc<float>(static_cast<size_t>(kMaxRows * sh.out2 + 1)));
  DI_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  // product(v, rows, copy, stream): tile variants as they are, decode variants as 100 + v,
  // -1 = CudaOps' pick.
  auto product = [&](int v, int64_t m, int c, cudaStream_t st) {
    const bc::DeviceWeight& w = ws[static_cast<size_t>(c)];
    cudaError_t e = bc::quantize_fp8_bf16(x, m, sh.in, xb, st);
    if (e != cudaSuccess) return e;
    if (sh.out2 > 0) {
      return bc::block_scaled_gemm_bf16_decode_pair(xb, m, w, y, ws2[static_cast<size_t>(c)], y2,
                                                    st, v < 0 ? 0 : v - 100);
    }
    if (v < 0) {
      return bc::bf16_decode_preferred(m, w) ? bc::block_scaled_gemm_bf16_decode(xb, m, w, y, st)
                                             : bc::block_scaled_gemm_wgmma_bf16(xb, m, w, y, st);
    }
    if (v >= 100) return bc::block_scaled_gemm_bf16_decode(xb, m, w, y, st, v - 100);
    return bc::block_scaled_gemm_wgmma_bf16(v, xb, m, w, y, st);
  };
  std::vector<int> variants;
  if (sh.out2 == 0) variants.assign(std::begin(kTileVariants), std::end(kTileVariants));
  for (int v = 1; v <= bc::kBf16DecodeVariants; ++v) variants.push_back(100 + v);
  if (profile) {
    for (int v : kProfileVariants) {
      if (v >= 100 && !bc::bf16_decode_applies(1, ws[0])) continue;
      DI_CUDA_RETURN_IF_ERROR(product(v, 1, 0, nullptr));
    }
    DI_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
    return {};
  }
  const double bytes = static_cast<double>(wbytes + sbytes) *
                       (1.0 + static_cast<double>(sh.out2) / static_cast<double>(sh.out));
  const double floor_us = bytes / kFloorBandwidth * 1e6;
  for (const int64_t m : {int64_t{1}, kMaxRows}) {
    auto time = [&](int v) {
      return graph_us(5, [&](int i, cudaStream_t st) { return product(v, m, i % copies, st); });
    };
    DI_ASSIGN_OR_RETURN(double pick_us, time(-1));
    std::string notes;
    for (int v : variants) {
      if (v >= 100 && !bc::bf16_decode_applies(m, ws[0])) continue;
      DI_ASSIGN_OR_RETURN(double us, time(v));
      char b[48];
      std::snprintf(b, sizeof b, " %s%d %.1f", v >= 100 ? "d" : "t", v % 100, us);
      notes += b;
    }
    std::printf("| %s %lldx%lld | %lld | %.1f | %.1f | %.2f |%s |\n", sh.name,
                static_cast<long long>(sh.out + sh.out2), static_cast<long long>(sh.in),
                static_cast<long long>(m), pick_us, floor_us, floor_us / pick_us, notes.c_str());
  }
  return {};
}

}  // namespace

Status run_few_rows_bench(bool profile) {
  if (!profile) {
    std::printf(
        "\nFP8 products at few rows, act_quant included, us per launch (graph replay); floor = "
        "(weights + scales) / 4.2 TB/s; tN = wgmma tile variant N, dN = decode kernel variant "
        "N\n\n| product | rows | pick us | floor us | floor/pick | variants |\n"
        "|---|---|---|---|---|---|\n");
  }
  int n = 0;
  for (const FewRowShape& sh : kShapes) {
    if (profile && n++ == kProfileShapes) break;
    DI_RETURN_IF_ERROR(bench_shape(sh, profile));
  }
  return {};
}

}  // namespace di::bench
