#include "backend/cpu/cpu_ops.h"

#include <algorithm>
#include <vector>

#include "kernels/ref/attention.h"
#include "kernels/ref/elementwise.h"
#include "kernels/ref/engram_hash.h"
#include "kernels/ref/gemm.h"
#include "kernels/ref/hyper_connection.h"
#include "kernels/ref/kv_codec.h"
#include "kernels/ref/quant.h"
#include "tensor/numeric.h"

namespace di::backend {

namespace {
// Output columns per task: enough work to amortize decoding one weight row per column.
constexpr int64_t kColumnGrain = 8;
}  // namespace

void CpuOps::linear(ConstRowsView x, const WeightView& w, RowsView y, bool round_bf16) const {
  if (w.format == WeightFormat::kFP8 || w.format == WeightFormat::kFP4) {
    const int64_t K = w.in_features;
    std::vector<float> values(static_cast<size_t>(x.rows * K));
    std::vector<float> scales(static_cast<size_t>(x.rows * (K / 32)));
    pool_.parallel_for(x.rows, 1, [&](int64_t b, int64_t e) {
      for (int64_t m = b; m < e; ++m) {
        kernels::quantize_row_fp8(x.row(m), K, 32, values.data() + m * K,
                                  scales.data() + m * (K / 32));
      }
    });
    kernels::QuantizedRows a{values.data(), scales.data(), x.rows, K};
    pool_.parallel_for(w.out_features, kColumnGrain,
                       [&](int64_t b, int64_t e) { kernels::block_scaled_gemm(a, w, y, b, e); });
    return;
  }
  pool_.parallel_for(w.out_features, kColumnGrain,
                     [&](int64_t b, int64_t e) { kernels::dense_gemm(x, w, y, round_bf16, b, e); });
}

void CpuOps::rms_norm(ConstRowsView x, const float* w, float eps, RowsView y) const {
  pool_.parallel_for(x.rows, 16, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) kernels::rms_norm_row(x.row(r), x.cols, w, eps, y.row(r));
  });
}

void CpuOps::fake_quant_fp8(RowsView x, int block) const {
  pool_.parallel_for(x.rows, 16, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) kernels::fake_quant_row_fp8(x.row(r), x.cols, block);
  });
}

void CpuOps::fake_quant_fp4(RowsView x, Fp4ScaleKind kind) const {
  pool_.parallel_for(x.rows, 16, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) kernels::fake_quant_row_fp4(x.row(r), x.cols, kind);
  });
}

void CpuOps::rope(RowsView x,
                  int num_heads,
                  int head_dim,
                  int rope_offset,
                  const int64_t* positions,
                  const RopeTable& table,
                  bool inverse) const {
  pool_.parallel_for(x.rows, 16, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      for (int h = 0; h < num_heads; ++h) {
        kernels::rope_row(x.row(r) + static_cast<int64_t>(h) * head_dim + rope_offset, positions[r],
                          table, inverse);
      }
    }
  });
}

void CpuOps::sparse_attention(const SparseAttentionArgs& a) const {
  const int64_t q_stride = static_cast<int64_t>(a.num_heads) * a.head_dim;
  pool_.parallel_for(a.num_queries, 1, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      kernels::sparse_attention_query(a.q + t * q_stride, a.num_heads, a.head_dim,
                                      a.keys + t * a.num_keys, a.num_keys, a.sink, a.softmax_scale,
                                      a.out + t * q_stride);
    }
  });
}

void CpuOps::write_kv(ConstRowsView rows,
                      KvFormat format,
                      const int32_t* slots,
                      uint8_t* pool) const {
  const int64_t stride = kv_row_stride(format, rows.cols);
  pool_.parallel_for(rows.rows, 16, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t slot = slots ? slots[r] : r;
      if (slot >= 0) kernels::encode_kv_row(rows.row(r), rows.cols, format, pool + slot * stride);
    }
  });
}

void CpuOps::kv_attention(const KvAttentionArgs& a) const {
  const int64_t q_stride = static_cast<int64_t>(a.num_heads) * a.head_dim, D = a.head_dim;
  const int64_t s8 = kv_row_stride(KvFormat::kFp8, D), s4 = kv_row_stride(KvFormat::kFp4, D);
  const int64_t n_keys = static_cast<int64_t>(a.num_window) + a.num_compressed;
  pool_.parallel_for(a.num_queries, 1, [&](int64_t b, int64_t e) {
    // The query's keys decoded to fp32 (exactly the fake-quantized values), then the same
    // routine as sparse_attention: bitwise its result over fp32 rows.
    std::vector<float> rows(static_cast<size_t>(n_keys * D));
    std::vector<const float*> keys(static_cast<size_t>(n_keys));
    for (int64_t t = b; t < e; ++t) {
      for (int64_t j = 0; j < n_keys; ++j) {
        const bool window = j < a.num_window;
        const int32_t i = window ? a.window_index[t * a.num_window + j]
                                 : a.compressed_index[t * a.num_compressed + j - a.num_window];
        float* dst = rows.data() + j * D;
        keys[static_cast<size_t>(j)] = i < 0 ? nullptr : dst;
        if (i < 0) continue;
        if (!window) {
          kernels::decode_kv_row(a.compressed_pool + i * s4, D, KvFormat::kFp4, dst);
        } else if (i < a.window_pool_rows) {
          kernels::decode_kv_row(a.window_pool + i * s8, D, KvFormat::kFp8, dst);
        } else {
          kernels::decode_kv_row(a.fresh + (i - a.window_pool_rows) * s8, D, KvFormat::kFp8, dst);
        }
      }
      kernels::sparse_attention_query(a.q + t * q_stride, a.num_heads, a.head_dim, keys.data(),
                                      n_keys, a.sink, a.softmax_scale, a.out + t * q_stride);
    }
  });
}

void CpuOps::index_scores(const IndexScoreArgs& a) const {
  const int64_t q_stride = static_cast<int64_t>(a.num_heads) * a.head_dim;
  const int64_t per = a.entries_per_page;
  pool_.parallel_for(a.num_queries, 1, [&](int64_t b, int64_t e) {
    std::vector<const float*> keys;
    for (int64_t t = b; t < e; ++t) {
      const int64_t vis = std::min(a.num_visible[t], a.num_keys);
      keys.resize(static_cast<size_t>(vis));
      for (int64_t s = 0; s < vis; ++s) {
        const int64_t row = a.pages[a.page_offset[t] + s / per] * per + s % per;
        keys[static_cast<size_t>(s)] = a.key_pool + row * a.head_dim;
      }
      kernels::index_scores_query(a.q + t * q_stride, a.weights + t * a.num_heads, a.num_heads,
                                  a.head_dim, keys.data(), a.num_keys, vis,
                                  a.scores + t * a.num_keys);
    }
  });
}

void CpuOps::hc_mixes(ConstRowsView x,
                      const float* fn,
                      const float* scale,
                      const float* base,
                      int hc,
                      int sinkhorn_iters,
                      float hc_eps,
                      float norm_eps,
                      HcCoefficients* out) const {
  pool_.parallel_for(x.rows, 4, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      kernels::hc_mixes_token(x.row(r), x.cols, fn, scale, base, hc, sinkhorn_iters, hc_eps,
                              norm_eps, out + r);
    }
  });
}

void CpuOps::hc_collapse(ConstRowsView x, const float* pre, int hc, RowsView y) const {
  pool_.parallel_for(x.rows, 16, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      kernels::hc_collapse_token(x.row(r), pre + r * hc, hc, y.cols, y.row(r));
    }
  });
}

void CpuOps::hc_expand(ConstRowsView y,
                       ConstRowsView residual,
                       const HcCoefficients* coeff,
                       int hc,
                       RowsView out) const {
  const bool in_place = out.data == residual.data;
  pool_.parallel_for(y.rows, 16, [&](int64_t b, int64_t e) {
    std::vector<float> row;  // in place: the row's copies as they were, read by every output
    for (int64_t r = b; r < e; ++r) {
      const float* res = residual.row(r);
      if (in_place) {
        row.assign(res, res + residual.cols);
        res = row.data();
      }
      kernels::hc_expand_token(y.row(r), res, coeff[r], hc, y.cols, out.row(r));
    }
  });
}

void CpuOps::moe_route(ConstRowsView x,
                       const WeightView& gate,
                       const float* bias,
                       const RouteParams& params,
                       int32_t* experts,
                       float* weights) const {
  std::vector<float> raw(static_cast<size_t>(x.rows * params.num_experts));
  RowsView raw_view{raw.data(), x.rows, params.num_experts};
  linear(x, gate, raw_view, /*round_bf16=*/false);
  for (int64_t r = 0; r < x.rows; ++r) {
    kernels::moe_route_row(raw_view.row(r), bias, params, experts + r * params.topk,
                           weights + r * params.topk);
  }
}

void CpuOps::swiglu(ConstRowsView gate,
                    ConstRowsView up,
                    const float* row_weight,
                    float limit,
                    RowsView out) const {
  pool_.parallel_for(gate.rows, 16, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      kernels::swiglu_row(gate.row(r), up.row(r), gate.cols, row_weight ? row_weight[r] : 1.0f,
                          limit, out.row(r));
    }
  });
}

void CpuOps::engram_gate(
    RowsView x, ConstRowsView kv, const float* qk_weight, int hc, float eps) const {
  const int64_t dim = x.cols / hc;
  pool_.parallel_for(x.rows, 4, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      kernels::engram_gate_row(x.row(r), kv.row(r), qk_weight, hc, dim, eps);
    }
  });
}

void CpuOps::softmax_pool(const float* const* kv,
                          const float* const* score,
                          int64_t groups,
                          int group,
                          int64_t dim,
                          float* out) const {
  for (int64_t g = 0; g < groups; ++g)
    kernels::softmax_pool_channels(kv[g], score[g], group, dim, out + g * dim);
}

void CpuOps::gather_fp8_rows(const Fp8RowTable& table, const int32_t* index, RowsView out) const {
  const float* e4m3 = e4m3_table();
  const int64_t w = table.width;
  for (int64_t r = 0; r < out.rows; ++r) {
    const int64_t t = index[r];
    const uint8_t* v = table.data + t * w;
    const uint8_t* sc = table.scale + t * (w / 32);
    float* dst = out.row(r);
    for (int64_t d = 0; d < w; ++d) dst[d] = round_bf16(e4m3[v[d]] * e8m0_to_float(sc[d / 32]));
  }
}

void CpuOps::engram_hash_rows(const EngramHashArgs& a) const {
  const int64_t buckets = static_cast<int64_t>(a.max_ngram - 1) * a.heads;
  std::vector<int64_t> shifted(static_cast<size_t>(std::max(a.max_ngram, 1)));
  for (int64_t i = 0; i < a.num_rows; ++i) {
    const int64_t r = a.rows[i];
    const int32_t t = a.tokens[r];
    const int32_t c = t >= 0 && t < a.map_size ? a.token_map[t] : -1;
    shifted[0] = c < 0 ? a.pad : c;
    for (int s = 1; s < a.max_ngram; ++s) {
      shifted[static_cast<size_t>(s)] = c < 0 ? a.pad : a.look_back[i * (a.max_ngram - 1) + s - 1];
    }
    kernels::engram::hash_position(shifted.data(), a.max_ngram, a.heads, a.multipliers, a.primes,
                                   a.offsets, a.out + r * buckets);
  }
}

void CpuOps::embed_rows(const WeightView& table,
                        const int32_t* tokens,
                        int copies,
                        RowsView out) const {
  const int64_t dim = table.in_features;
  for (int64_t r = 0; r < out.rows; ++r) {
    float* dst = out.row(r);
    const int64_t t = tokens[r];
    if (table.format == WeightFormat::kBF16) {
      const uint16_t* e = reinterpret_cast<const uint16_t*>(table.data) + t * dim;
      for (int64_t d = 0; d < dim; ++d) dst[d] = bf16_to_float(e[d]);
    } else {
      const float* e = reinterpret_cast<const float*>(table.data) + t * dim;
      std::copy_n(e, dim, dst);
    }
    for (int k = 1; k < copies; ++k) std::copy_n(dst, dim, dst + k * dim);
  }
}

void CpuOps::add_rows(ConstRowsView src, const int64_t* rows, RowsView dst) const {
  for (int64_t i = 0; i < src.rows; ++i) {
    float* d = dst.row(rows[i]);
    const float* s = src.row(i);
    for (int64_t c = 0; c < src.cols; ++c) d[c] += s[c];
  }
}

void CpuOps::add_round_bf16(ConstRowsView a, ConstRowsView b, RowsView out) const {
  const int64_t n = a.rows * a.cols;
  for (int64_t i = 0; i < n; ++i) out.data[i] = round_bf16(a.data[i] + b.data[i]);
}

void CpuOps::scale_round_bf16(RowsView x, float scale) const {
  const int64_t n = x.rows * x.cols;
  for (int64_t i = 0; i < n; ++i) x.data[i] = round_bf16(x.data[i] * scale);
}

}  // namespace di::backend
