// The FLOP model of the benchmarks' floors (model/forward_flops.h) against counts written out
// here: the attention's by the window and the compressed entries, the products' by the tensors.
#include "model/forward_flops.h"

#include <gtest/gtest.h>

#include "model/checkpoint_layout.h"
#include "model/presets.h"

namespace di::model {
namespace {

ModelConfig v41_shaped() {
  PresetOptions o;
  o.num_layers = 2;
  o.num_experts = 16;
  auto c = preset_config("v41-shaped", o);
  EXPECT_TRUE(c.has_value());
  if (!c) return {};
  // Filled from the tokenizer when a checkpoint is written (init-model's values for its
  // synthetic tokenizer).
  c->engram_compressed_vocab_size = 32323;
  c->engram_num_embeddings = {97968};
  return *c;
}

TEST(ForwardFlops, DecodeScalesWithTheBatchAndEqualsAOneTokenPrefill) {
  const ModelConfig c = v41_shaped();
  const ForwardFlops one = decode_step_flops(c, 1, 4096), eight = decode_step_flops(c, 8, 4096);
  EXPECT_DOUBLE_EQ(eight.fp8, 8 * one.fp8);
  EXPECT_DOUBLE_EQ(eight.bf16, 8 * one.bf16);
  // A one-token prefill after 4096 positions is a decode step of one row.
  const ForwardFlops p = prefill_flops(c, 1, 1, 4096);
  EXPECT_DOUBLE_EQ(p.fp8, one.fp8);
  EXPECT_DOUBLE_EQ(p.bf16, one.bf16);
}

TEST(ForwardFlops, AttentionGrowsByTheWindowThenByTheSelectedEntries) {
  ModelConfig c = v41_shaped();
  // Without compression every layer attends to min(window, keys): 4 * heads * head_dim per key.
  for (int& r : c.compress_ratios) r = 0;
  const double per_key = 4.0 * c.n_heads * c.head_dim * c.n_layers;
  const double at10 = decode_step_flops(c, 1, 9).bf16, at11 = decode_step_flops(c, 1, 10).bf16;
  EXPECT_DOUBLE_EQ(at11 - at10, per_key);
  const double full = decode_step_flops(c, 1, c.window_size).bf16;
  EXPECT_DOUBLE_EQ(decode_step_flops(c, 1, 10 * c.window_size).bf16, full);  // window full
  // Layer 1 compressing by 2, an index source: past the window, 2 more positions add one entry
  // (4 h d while under index_topk) and one indexer score (2 * index heads * index dim).
  c.compress_ratios[1] = 2;
  ASSERT_TRUE(c.is_index_source(1));
  const int64_t k = 2 * c.window_size;  // keys seen: k + 1 = an odd count, then + 2
  const double a = decode_step_flops(c, 1, k).bf16, b = decode_step_flops(c, 1, k + 2).bf16;
  EXPECT_DOUBLE_EQ(b - a, 4.0 * c.n_heads * c.head_dim + 2.0 * c.index_n_heads * c.index_head_dim);
  // Past index_topk entries only the indexer grows.
  const int64_t far = 4 * c.index_topk;
  const double x = decode_step_flops(c, 1, far).bf16, y = decode_step_flops(c, 1, far + 2).bf16;
  EXPECT_DOUBLE_EQ(y - x, 2.0 * c.index_n_heads * c.index_head_dim);
}

TEST(ForwardFlops, ProductsCountEachTensorOncePerRowAndTopkOfTheExperts) {
  const ModelConfig c = v41_shaped();
  // Written out: 2 * out * in of every matrix a row multiplies, by its storage format.
  double fp8 = 0, bf16 = 0, head = 0;
  for (const TensorSpec& t : checkpoint_tensor_specs(c)) {
    if (t.shape.size() != 2 || t.kind == TensorKind::kEngramTable || t.name == "embed") continue;
    const std::string& n = t.name;
    if (n.find("markov_head") != std::string::npos ||
        n.find("confidence_head") != std::string::npos)
      continue;
    if (n.rfind("mtp.", 0) == 0 && n.find("main_proj") == std::string::npos &&
        n.find("attn.wkv") == std::string::npos)
      continue;
    double f = 2.0 * t.shape[0] * t.shape[1];
    if (n.find(".experts.") != std::string::npos)
      f = f * c.n_activated_experts / c.n_routed_experts;
    if (n.find("indexer.wk") != std::string::npos) f /= 2;  // layer 1 compresses by 2
    if (n == "head") {
      head += f;
    } else if (t.kind == TensorKind::kFp8Matrix || t.kind == TensorKind::kFp4Matrix) {
      fp8 += f;
    } else {
      bf16 += f;
    }
  }
  // Two rows of a 16-token prompt with no context: products for 32 rows, the head for 2.
  const ForwardFlops p = prefill_flops(c, 2, 16, 0);
  EXPECT_DOUBLE_EQ(p.fp8, 32 * fp8);
  // One row with nothing before it attends to itself alone in every layer (no compressed entry
  // yet): its bf16 part is the bf16 products, the head and 4 * heads * head_dim per layer.
  EXPECT_GT(head, 0);
  EXPECT_DOUBLE_EQ(decode_step_flops(c, 1, 0).bf16,
                   bf16 + head + 4.0 * c.n_heads * c.head_dim * c.n_layers);
  // The routed experts' share is topk / experts of their parameters: V4.1-shaped's 6 of 16.
  EXPECT_GT(fp8, 0);
}

}  // namespace
}  // namespace di::model
