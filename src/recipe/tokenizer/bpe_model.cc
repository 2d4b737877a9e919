// Rank-based BPE merging over byte tokens, with an O(n^2) path for short pieces (most words)
// and an O(n log n) heap + linked-list path for long ones.
#include "recipe/tokenizer/bpe_model.h"

#include <algorithm>
#include <climits>

#include "recipe/tokenizer/utf8.h"

namespace di::recipe {
namespace {

constexpr size_t kSmallPiece = 64;  // bytes; below this the quadratic scan is faster

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

void BpeModel::add_merge(int32_t a, int32_t b, int32_t rank, int32_t merged, bool b_starts_char) {
  if ((num_merges_ + 1) * 2 > slots_.size()) grow();
  const uint64_t key = pair_key(a, b);
  uint64_t i = mix(key) & mask_;
  while (slots_[i].key != 0 && slots_[i].key != key) i = (i + 1) & mask_;
  if (slots_[i].key == 0) ++num_merges_;
  slots_[i] = Slot{key, rank, merged};
  // Lower bounds (a duplicate that is later replaced may leave them lower: still safe).
  const auto need = static_cast<size_t>(std::max(a, b)) + 1;
  if (min_rank_as_left_.size() < need) {
    min_rank_as_left_.resize(need, INT32_MAX);
    min_rank_as_right_.resize(need, INT32_MAX);
  }
  if (b_starts_char) min_rank_as_left_[a] = std::min(min_rank_as_left_[a], rank);
  min_rank_as_right_[b] = std::min(min_rank_as_right_[b], rank);
}

void BpeModel::finalize() {
  const auto left_bound = [&](int32_t id) {
    return static_cast<size_t>(id) < min_rank_as_left_.size() ? min_rank_as_left_[id] : INT32_MAX;
  };
  const auto right_bound = [&](int32_t id) {
    return static_cast<size_t>(id) < min_rank_as_right_.size() ? min_rank_as_right_[id] : INT32_MAX;
  };
  byte_pairs_.clear();
  bool all_bytes = true;
  for (const int32_t t : byte_token_) all_bytes = all_bytes && t >= 0;
  if (all_bytes) {
    byte_pairs_.resize(256 * 256);
    for (int x = 0; x < 256; ++x) {
      for (int y = 0; y < 256; ++y) {
        const Slot* s = find(byte_token_[x], byte_token_[y]);
        if (s != nullptr) byte_pairs_[(x << 8) | y] = PairMerge{s->rank, s->merged};
      }
    }
  }
  chars_.assign(0x10000, CharInfo{});
  for (uint32_t cp = 0; cp < 0x10000; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    uint8_t bytes[3];
    int n = 0;
    if (cp < 0x80) {
      bytes[n++] = static_cast<uint8_t>(cp);
    } else if (cp < 0x800) {
      bytes[n++] = static_cast<uint8_t>(0xC0 | (cp >> 6));
      bytes[n++] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    } else {
      bytes[n++] = static_cast<uint8_t>(0xE0 | (cp >> 12));
      bytes[n++] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
      bytes[n++] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    }
    std::vector<int32_t> ids;
    for (int k = 0; k < n; ++k) {
      if (byte_token_[bytes[k]] < 0) break;
      ids.push_back(byte_token_[bytes[k]]);
    }
    if (static_cast<int>(ids.size()) != n) continue;
    // Standalone BPE. Safe (see char_level_start) if in every non-final state, merges touching
    // the first or last symbol from outside rank above the state's next inner merge, and in the
    // final state above every inner merge.
    bool safe = true;
    int32_t max_rank = -1;
    while (safe) {
      size_t best = 0;
      int32_t best_rank = INT32_MAX;
      for (size_t i = 0; i + 1 < ids.size(); ++i) {
        const Slot* s = find(ids[i], ids[i + 1]);
        if (s != nullptr && s->rank < best_rank) {
          best_rank = s->rank;
          best = i;
        }
      }
      const int32_t bound = best_rank == INT32_MAX ? max_rank : best_rank;
      safe = left_bound(ids.back()) > bound && right_bound(ids.front()) > bound;
      if (best_rank == INT32_MAX) break;
      ids[best] = find(ids[best], ids[best + 1])->merged;
      ids.erase(ids.begin() + static_cast<ptrdiff_t>(best) + 1);
      max_rank = std::max(max_rank, best_rank);
    }
    if (!safe) continue;
    CharInfo info;
    info.num_tokens = static_cast<int8_t>(ids.size());
    for (size_t k = 0; k < ids.size(); ++k) info.tokens[k] = ids[k];
    chars_[cp] = info;
  }
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

// Starting BPE from each character's own BPE result is exact when every character c of the
// piece is "safe": in every state c passes through on its own, any merge touching c's first or
// last symbol from outside ranks above c's next inner merge (for the final state: above all of
// c's inner merges). Then (1) no merge crosses into c before c is complete, as it would need a
// lower rank than c's pending inner merge; and (2) every cross merge the real process performs
// (rank r, below the pending inner merges of the incomplete characters) is also the lowest
// ranked, leftmost pair of the state with all characters complete, because the extra pairs
// there touch completed characters and rank above all their inner merges. So both orders make
// the same cross merges and end in the same state. On c's right the outside symbol starts a
// character, so merges whose right side starts with a continuation byte are not counted there.
// Safety is per character: an unsafe character simply starts from its bytes, and the argument
// holds for the safe ones regardless. Returns false (nothing changed) before finalize().
bool BpeModel::char_level_start(std::string_view bytes, Scratch& sc) const {
  if (chars_.empty()) return false;
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  const uint8_t* const e = p + bytes.size();
  sc.ids.clear();
  while (p < e) {
    const int len = utf8_seq_len(p[0]);
    uint32_t cp = UINT32_MAX;
    if (len == 1) {
      cp = p[0];
    } else if (len == 2) {
      cp = (uint32_t(p[0] & 0x1F) << 6) | (p[1] & 0x3F);
    } else if (len == 3) {
      cp = (uint32_t(p[0] & 0x0F) << 12) | (uint32_t(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
    }
    const CharInfo* info = cp < chars_.size() ? &chars_[cp] : nullptr;
    if (info != nullptr && info->num_tokens > 0) {
      sc.ids.insert(sc.ids.end(), info->tokens, info->tokens + info->num_tokens);
    } else {
      // Not safe (or 4 bytes): this character starts from its bytes, which is always exact.
      for (int k = 0; k < len; ++k) {
        const int32_t id = byte_token_[p[k]];
        if (id >= 0) sc.ids.push_back(id);
      }
    }
    p += len;
  }
  return true;
}

void BpeModel::encode_piece(std::string_view bytes, std::vector<int32_t>& out) const {
  thread_local Scratch sc;
  // The character-level start pays off for words of multi-byte characters (CJK, Cyrillic...),
  // which start with one or with a space/mark before one.
  const uint8_t* raw = nullptr;  // set when ids[i] is the token of byte raw[i]
  if (bytes.size() < 4 || static_cast<uint8_t>(bytes[0]) < 0xC0 || !char_level_start(bytes, sc)) {
    if (!byte_pairs_.empty()) raw = reinterpret_cast<const uint8_t*>(bytes.data());
    sc.ids.clear();
    for (const char ch : bytes) {
      const int32_t id = byte_token_[static_cast<uint8_t>(ch)];
      if (id >= 0) sc.ids.push_back(id);
    }
  }
  if (sc.ids.size() > 1) {
    if (sc.ids.size() <= kSmallPiece) {
      merge_small(sc, raw);
    } else {
      merge_heap(sc);
    }
  }
  out.insert(out.end(), sc.ids.begin(), sc.ids.end());
}

// ranks[i] is the rank of merging ids[i] and ids[i+1]; the lowest (leftmost on ties) goes first.
void BpeModel::merge_small(Scratch& sc, const uint8_t* raw) const {
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
  if (raw != nullptr) {
    for (size_t i = 0; i + 1 < n; ++i) {
      const PairMerge& m = byte_pairs_[(raw[i] << 8) | raw[i + 1]];
      ranks[i] = m.rank;
      merged[i] = m.merged;
    }
  } else {
    for (size_t i = 0; i + 1 < n; ++i) update(i);
  }
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
