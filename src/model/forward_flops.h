// The arithmetic of a forward, for the benchmarks' FLOP floors (issue #6: "FLOPs / measured
// peak"): the multiply-adds (2 FLOPs each) the reference's products and attention take for a set
// of rows, split by the tensor-core rate the hardware can run them at without changing the
// numbers: FP8 for the products on FP8 weights and FP4 experts (e2m1 values are e4m3-exact), BF16
// for the products on BF16 / F32 weights and for attention (its queries are bf16). A floor from
// it, fp8 / FP8 peak + bf16 / BF16 peak, is a lower bound on the time: every product is counted
// at the faster rate it could take. Counted as `bench step`'s byte floor reads
// (cli/bench_context.h): the backbone, the head for each row that needs logits, and of the draft
// head only the products a target step runs (its main projection and KV); the compressor's index
// keys once per compressed entry; attention over the window and the selected compressed entries,
// and the indexer over every entry of an index source.
#pragma once

#include <cstdint>

#include "model/checkpoint_layout.h"
#include "model/config.h"

namespace di::model {

// Whether a step of the target model (a prefill or decode forward, no drafting) reads the tensor
// as a whole: not the embedding or the Engram tables (a few gathered rows), not the draft head's
// own layers except what seeding its windows runs (its main projection and each layer's KV).
bool read_by_target_step(const TensorSpec& spec);

struct ForwardFlops {
  double fp8 = 0;   // FLOPs at the FP8 tensor rate
  double bf16 = 0;  // FLOPs at the BF16 tensor rate
  double total() const { return fp8 + bf16; }
  // The time at these peaks (FLOP/s); 0 when a peak is unknown (<= 0).
  double seconds(double fp8_peak, double bf16_peak) const {
    if (fp8_peak <= 0 || bf16_peak <= 0) return 0;
    return fp8 / fp8_peak + bf16 / bf16_peak;
  }
};

// One decode step: `batch` rows, each after `context` positions (its attention sees those and
// its own), logits for every row.
ForwardFlops decode_step_flops(const ModelConfig& config, int64_t batch, int64_t context);

// A prefill of `prompt_len` positions per sequence after `context` positions of state, for
// `batch` sequences, logits for the last row of each.
ForwardFlops prefill_flops(const ModelConfig& config,
                           int64_t batch,
                           int64_t prompt_len,
                           int64_t context);

}  // namespace di::model
