// Pending tokens (model.h): a forward embeds and hashes tokens that an earlier forward chose on the
// backend, so the host can issue step k + 1 before step k's tokens are downloaded (the device then
// never waits for the host between decode steps). The host-known rest of each pending row's
// Engram window is hashed on the backend with the host hasher's arithmetic
// (kernels/ref/engram_hash.h), so the rows are the ones a host-fed step computes.
#include <algorithm>

#include "model/model.h"

namespace di::model {

Buffer Model::upload_token_ids(const ForwardContext& ctx) const {
  Buffer ids(*ops_, std::max<int64_t>(static_cast<int64_t>(ctx.tokens.size()), 1), 1);
  ops_->upload(reinterpret_cast<const float*>(ctx.tokens.data()), ids.data(),
               static_cast<int64_t>(ctx.tokens.size()));
  if (ctx.pending_rows.empty()) return ids;
  std::vector<const float*> src;
  std::vector<float*> dst;
  for (size_t c = 0; c < ctx.chunks.size(); ++c) {
    if (!ctx.chunks[c].pending) continue;
    src.push_back(reinterpret_cast<const float*>(ctx.chunks[c].pending));
    dst.push_back(ids.row(ctx.chunk_row_begin[c]));
  }
  ops_->copy_rows(src.data(), dst.data(), static_cast<int64_t>(src.size()), 1);
  return ids;
}

void Model::hash_pending_rows(int layer, const ForwardContext& ctx, const Buffer& index_d) const {
  const int l = config_.engram_index(layer);
  backend::EngramHashArgs a;
  a.tokens = token_ids(ctx);
  a.rows = ctx.pending_rows.data();
  a.num_rows = static_cast<int64_t>(ctx.pending_rows.size());
  a.look_back = ctx.pending_look_back.data();
  a.token_map = token_map_.data();
  a.map_size = static_cast<int64_t>(token_map_.size());
  a.max_ngram = hasher_->max_ngram_size();
  a.heads = hasher_->n_heads();
  a.multipliers = hasher_->multipliers(l).data();
  a.primes = hasher_->primes(l).data();
  a.offsets = hasher_->offsets(l).data();
  a.pad = hasher_->pad();
  a.out = reinterpret_cast<int32_t*>(index_d.data());
  ops_->engram_hash_rows(a);
}

Status Model::wait_tokens(LogitsSelection& selection) const {
  if (selection.defer) ops_->wait_download(selection.download_ticket);
  return ops_->status();
}

Status Model::commit_token(SequenceState& seq, int32_t token) const {
  if (token < 0 || token >= config_.vocab_size) {
    return invalid_argument("commit_token: token id " + std::to_string(token) + " outside [0, " +
                            std::to_string(config_.vocab_size) + ")");
  }
  if (!hasher_) return Status();
  return engram::NgramHasher::resolve_pending(seq.engram_history,
                                              token_map_[static_cast<size_t>(token)]);
}

}  // namespace di::model
