// Rank-based BPE merging over byte tokens, with an O(n^2) path for short pieces (most words)
// and an O(n log n) heap + linked-list path for long ones.
#include "recipe/tokenizer/bpe_model.h"

#include <climits>
#include <queue>

namespace di::recipe {
namespace {

constexpr size_t kSmallPiece = 48;  // bytes; below this the quadratic scan is faster

uint64_t pair_key(int32_t a, int32_t b) {
  return ((static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b)) + 1;
}

uint64_t mix(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdull;
  k ^= k >> 33;
  return k;
}

}  // namespace

BpeModel::BpeModel() {
  for (auto& t : byte_token_) t = -1;
  slots_.assign(1024, Slot{0, 0, 0});
  mask_ = slots_.size() - 1;
}

void BpeModel::grow() {
  std::vector<Slot> old;
  old.swap(slots_);
  slots_.assign(old.size() * 2, Slot{0, 0, 0});
  mask_ = slots_.size() - 1;
  for (const Slot& s : old) {
    if (s.key == 0) continue;
    uint64_t i = mix(s.key) & mask_;
    while (slots_[i].key != 0) i = (i + 1) & mask_;
    slots_[i] = s;
  }
}

void BpeModel::add_merge(int32_t a, int32_t b, int32_t rank, int32_t merged) {
  if ((num_merges_ + 1) * 2 > slots_.size()) grow();
  const uint64_t key = pair_key(a, b);
  uint64_t i = mix(key) & mask_;
  while (slots_[i].key != 0 && slots_[i].key != key) i = (i + 1) & mask_;
  if (slots_[i].key == 0) ++num_merges_;
  slots_[i] = Slot{key, rank, merged};
}

const BpeModel::Slot* BpeModel::find(int32_t a, int32_t b) const {
  const uint64_t key = pair_key(a, b);
  uint64_t i = mix(key) & mask_;
  while (true) {
    const Slot& s = slots_[i];
    if (s.key == key) return &s;
    if (s.key == 0) return nullptr;
    i = (i + 1) & mask_;
  }
}

void BpeModel::encode_piece(std::string_view bytes, std::vector<int32_t>& out) const {
  std::vector<int32_t> ids;
  ids.reserve(bytes.size());
  for (const char ch : bytes) {
    const int32_t id = byte_token_[static_cast<uint8_t>(ch)];
    if (id >= 0) ids.push_back(id);
  }
  if (ids.size() > 1) {
    if (ids.size() <= kSmallPiece) {
      std::vector<int32_t> ranks;
      merge_small(ids, ranks);
    } else {
      merge_heap(ids);
    }
  }
  out.insert(out.end(), ids.begin(), ids.end());
}

// ranks[i] is the rank of merging ids[i] and ids[i+1]; the lowest (leftmost on ties) goes first.
void BpeModel::merge_small(std::vector<int32_t>& ids, std::vector<int32_t>& ranks) const {
  const auto rank_of = [&](size_t i) {
    const Slot* s = find(ids[i], ids[i + 1]);
    return s == nullptr ? INT32_MAX : s->rank;
  };
  ranks.resize(ids.size() - 1);
  for (size_t i = 0; i + 1 < ids.size(); ++i) ranks[i] = rank_of(i);
  while (!ranks.empty()) {
    size_t best = 0;
    for (size_t i = 1; i < ranks.size(); ++i) {
      if (ranks[i] < ranks[best]) best = i;
    }
    if (ranks[best] == INT32_MAX) break;
    ids[best] = find(ids[best], ids[best + 1])->merged;
    ids.erase(ids.begin() + static_cast<ptrdiff_t>(best) + 1);
    ranks.erase(ranks.begin() + static_cast<ptrdiff_t>(best));
    if (best > 0) ranks[best - 1] = rank_of(best - 1);
    if (best < ranks.size()) ranks[best] = rank_of(best);
  }
}

// Linked list of symbols plus a min-heap of candidate merges (rank, left position); entries made
// stale by earlier merges are detected and skipped.
void BpeModel::merge_heap(std::vector<int32_t>& ids) const {
  const int n = static_cast<int>(ids.size());
  std::vector<int> prev(n), next(n);
  std::vector<bool> alive(n, true);
  for (int i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  struct Cand {
    int32_t rank;
    int pos;
    int32_t left, right;  // the ids the merge was computed for (stale check)
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
  const auto push = [&](int i) {
    if (i < 0 || next[i] < 0) return;
    const Slot* s = find(ids[i], ids[next[i]]);
    if (s != nullptr) heap.push(Cand{s->rank, i, ids[i], ids[next[i]]});
  };
  for (int i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    const Cand c = heap.top();
    heap.pop();
    const int i = c.pos;
    if (!alive[i] || next[i] < 0 || ids[i] != c.left || ids[next[i]] != c.right) continue;
    const int j = next[i];
    ids[i] = find(ids[i], ids[j])->merged;
    alive[j] = false;
    next[i] = next[j];
    if (next[j] >= 0) prev[next[j]] = i;
    push(prev[i]);
    push(i);
  }
  std::vector<int32_t> merged;
  for (int i = 0; i >= 0; i = next[i]) merged.push_back(ids[i]);
  ids.swap(merged);
}

}  // namespace di::recipe
