// Rank-based BPE merging over byte tokens, with an O(n^2) path for short pieces (most words)
// and an O(n log n) heap + linked-list path for long ones.
#include "recipe/tokenizer/bpe_model.h"

#include <algorithm>
#include <climits>

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

// Per-thread working memory, so encoding a piece does not allocate.
struct BpeModel::Scratch {
  std::vector<int32_t> ids;
  std::vector<int32_t> ranks;   // small path: rank of merging ids[i], ids[i + 1]
  std::vector<int32_t> merged;  // small path: the id that merge produces
  std::vector<int> prev, next;  // heap path: linked list over positions
  struct Cand {
    int32_t rank;
    int pos;
    int32_t left, right, merged;  // the ids the merge was computed for (stale check)
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::vector<Cand> heap;
};

void BpeModel::encode_piece(std::string_view bytes, std::vector<int32_t>& out) const {
  thread_local Scratch sc;
  sc.ids.clear();
  for (const char ch : bytes) {
    const int32_t id = byte_token_[static_cast<uint8_t>(ch)];
    if (id >= 0) sc.ids.push_back(id);
  }
  if (sc.ids.size() > 1) {
    if (sc.ids.size() <= kSmallPiece) {
      merge_small(sc);
    } else {
      merge_heap(sc);
    }
  }
  out.insert(out.end(), sc.ids.begin(), sc.ids.end());
}

// ranks[i] is the rank of merging ids[i] and ids[i+1]; the lowest (leftmost on ties) goes first.
void BpeModel::merge_small(Scratch& sc) const {
  std::vector<int32_t>& ids = sc.ids;
  std::vector<int32_t>& ranks = sc.ranks;
  std::vector<int32_t>& merged = sc.merged;
  const auto update = [&](size_t i) {
    const Slot* s = find(ids[i], ids[i + 1]);
    ranks[i] = s == nullptr ? INT32_MAX : s->rank;
    merged[i] = s == nullptr ? -1 : s->merged;
  };
  size_t n = ids.size();
  ranks.resize(n - 1);
  merged.resize(n - 1);
  for (size_t i = 0; i + 1 < n; ++i) update(i);
  while (n > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < n; ++i) {
      if (ranks[i] < ranks[best]) best = i;
    }
    if (ranks[best] == INT32_MAX) break;
    ids[best] = merged[best];
    for (size_t i = best + 1; i + 1 < n; ++i) {
      ids[i] = ids[i + 1];
      if (i + 1 < n - 1) {
        ranks[i] = ranks[i + 1];
        merged[i] = merged[i + 1];
      }
    }
    --n;
    if (best > 0) update(best - 1);
    if (best + 1 < n) update(best);
  }
  ids.resize(n);
}

// Linked list of symbols plus a min-heap of candidate merges (rank, left position); entries made
// stale by earlier merges are detected and skipped.
void BpeModel::merge_heap(Scratch& sc) const {
  std::vector<int32_t>& ids = sc.ids;
  const int n = static_cast<int>(ids.size());
  auto& prev = sc.prev;
  auto& next = sc.next;
  prev.resize(n);
  next.resize(n);
  for (int i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  auto& heap = sc.heap;
  heap.clear();
  const auto cmp = [](const Scratch::Cand& a, const Scratch::Cand& b) { return a > b; };
  const auto push = [&](int i) {
    if (i < 0 || next[i] < 0) return;
    const Slot* s = find(ids[i], ids[next[i]]);
    if (s == nullptr) return;
    heap.push_back(Scratch::Cand{s->rank, i, ids[i], ids[next[i]], s->merged});
    std::push_heap(heap.begin(), heap.end(), cmp);
  };
  for (int i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), cmp);
    const Scratch::Cand c = heap.back();
    heap.pop_back();
    const int i = c.pos;
    // A merged-away position is unlinked (prev/next no longer point to it) and marked by ids -1.
    if (ids[i] != c.left || next[i] < 0 || ids[next[i]] != c.right) continue;
    const int j = next[i];
    ids[i] = c.merged;
    ids[j] = -1;
    next[i] = next[j];
    if (next[j] >= 0) prev[next[j]] = i;
    push(prev[i]);
    push(i);
  }
  int w = 0;
  for (int i = 0; i >= 0; i = next[i]) ids[w++] = ids[i];
  ids.resize(w);
}

}  // namespace di::recipe
