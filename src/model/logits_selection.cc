// Model::forward's backend token choice for the rows that do not copy their logits: argmax rows
// alone take Ops::argmax_rows; once a row samples, one Ops::sample_rows serves every such row
// (argmax rows as temperature 0 with nothing applied: the same first largest index).
#include <algorithm>

#include "kernels/ref/sample_math.h"
#include "model/model.h"

namespace di::model {

void select_tokens(const backend::Ops& ops, RowsView logits, LogitsSelection& selection) {
  const size_t n = selection.full.size();
  selection.argmax.assign(n, -1);
  selection.device_tokens = backend::Buffer(ops, static_cast<int64_t>(std::max<size_t>(n, 1)), 1);
  int32_t* tokens = reinterpret_cast<int32_t*>(selection.device_tokens.data());
  // The tokens stay in backend memory (a deferred selection's next forward embeds them there);
  // the host's copy is waited for now or in Model::wait_tokens.
  auto bring_back = [&] {
    float* host = reinterpret_cast<float*>(selection.argmax.data());
    const int64_t count = static_cast<int64_t>(n);
    if (selection.defer) {
      selection.download_ticket = ops.download_async(selection.device_tokens.data(), host, count);
    } else {
      ops.download(selection.device_tokens.data(), host, count);
    }
  };
  if (std::none_of(selection.full.begin(), selection.full.end(),
                   [](uint8_t k) { return k == kLogitsSample; })) {
    ops.argmax_rows_to(logits, tokens);
    bring_back();
    return;
  }
  std::vector<kernels::sample::RowParams> params(n);
  for (size_t i = 0; i < n; ++i) {
    if (selection.full[i] == kLogitsFull) params[i].skip = 1;
    if (selection.full[i] == kLogitsSample) params[i] = selection.params[i];
  }
  kernels::sample::RowsArgs a;
  a.params = params.data();
  a.penalty_tokens = selection.penalty_tokens.data();
  a.penalty_counts = selection.penalty_counts.data();
  a.num_penalties = static_cast<int64_t>(selection.penalty_tokens.size());
  a.bias_tokens = selection.bias_tokens.data();
  a.bias_values = selection.bias_values.data();
  a.num_bias = static_cast<int64_t>(selection.bias_tokens.size());
  if (selection.fill_masks) selection.fill_masks(selection.masks);
  a.masks = selection.masks.data();
  a.num_masks = logits.cols > 0 ? static_cast<int64_t>(selection.masks.size()) /
                                      kernels::sample::mask_words(logits.cols)
                                : 0;
  ops.sample_rows_to(logits, a, tokens);
  bring_back();
}

}  // namespace di::model
