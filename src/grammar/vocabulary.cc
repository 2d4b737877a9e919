// SPDX-License-Identifier: Apache-2.0
#include "grammar/vocabulary.h"

#include <algorithm>
#include <numeric>

#include "grammar/string_body.h"

namespace di::grammar {

std::shared_ptr<const TokenTrie> TokenTrie::build(const Vocabulary& vocab) {
  auto t = std::make_shared<TokenTrie>();
  size_t n = vocab.token_bytes.size();
  t->token_bytes_ = vocab.token_bytes;
  t->special_.assign(n, 0);
  t->eos_id_ = vocab.eos_id;
  for (int32_t id : vocab.special_ids)
    if (id >= 0 && static_cast<size_t>(id) < n) t->special_[id] = 1;
  if (vocab.eos_id >= 0 && static_cast<size_t>(vocab.eos_id) < n) t->special_[vocab.eos_id] = 1;
  t->node_of_.assign(n, -1);

  std::vector<int32_t> ids;
  for (size_t i = 0; i < n; ++i)
    if (!t->special_[i] && !vocab.token_bytes[i].empty()) ids.push_back(static_cast<int32_t>(i));
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
    return vocab.token_bytes[a] < vocab.token_bytes[b];
  });

  // Sorted strings give preorder directly: each string adds the nodes past its common prefix
  // with the previous one. `path[d]` is the node at depth d on the current path.
  t->byte_.push_back(0);
  t->depth_.push_back(0);
  t->skip_.push_back(0);
  t->tok_begin_.push_back(0);
  t->parent_.push_back(0);
  std::vector<uint32_t> path = {0};
  std::string_view prev;
  auto close_to = [&](size_t depth) {
    while (path.size() > depth + 1) {
      t->skip_[path.back()] = static_cast<uint32_t>(t->byte_.size());
      path.pop_back();
    }
  };
  for (int32_t id : ids) {
    std::string_view s = vocab.token_bytes[id];
    size_t l = 0;
    while (l < s.size() && l < prev.size() && s[l] == prev[l]) ++l;
    close_to(l);
    for (size_t d = l; d < s.size(); ++d) {
      t->parent_.push_back(path.back());
      path.push_back(static_cast<uint32_t>(t->byte_.size()));
      t->byte_.push_back(static_cast<uint8_t>(s[d]));
      t->depth_.push_back(static_cast<uint32_t>(d + 1));
      t->skip_.push_back(0);
      t->tok_begin_.push_back(static_cast<uint32_t>(t->toks_.size()));
    }
    t->toks_.push_back(id);
    t->node_of_[id] = static_cast<int32_t>(path.back());
    prev = s;
  }
  close_to(0);
  t->skip_[0] = static_cast<uint32_t>(t->byte_.size());
  t->tok_begin_.push_back(static_cast<uint32_t>(t->toks_.size()));
  t->body_state_.assign(t->byte_.size(), StringBodyDfa::kLoop);
  for (size_t i = 1; i < t->byte_.size(); ++i) {
    const int up = t->body_state_[t->parent_[i]];
    t->body_state_[i] =
        static_cast<int8_t>(up == StringBodyDfa::kDead ? up : StringBodyDfa::step(up, t->byte_[i]));
  }
  t->chars_.assign(t->byte_.size(), 0);
  for (size_t i = 1; i < t->byte_.size(); ++i) {
    const uint32_t up = t->chars_[t->parent_[i]];
    const bool starts = t->byte_[i] < 0x80 || t->byte_[i] > 0xBF;
    t->chars_[i] = static_cast<uint8_t>(std::min<uint32_t>(up + starts, 255));
  }
  t->sub_max_chars_ = t->chars_;
  // Children follow their parent in preorder, so one backward pass folds subtrees upwards.
  t->sub_bytes_.assign(t->byte_.size(), ByteSet{});
  t->sub_body_ok_.assign(t->byte_.size(), 1);
  for (size_t i = t->byte_.size(); i-- > 1;) {
    ByteSet& up = t->sub_bytes_[t->parent_[i]];
    up |= t->sub_bytes_[i];
    up.set(t->byte_[i]);
    uint8_t& m = t->sub_max_chars_[t->parent_[i]];
    m = std::max(m, t->sub_max_chars_[i]);
    if (!t->sub_body_ok_[i] || t->body_state_[i] == StringBodyDfa::kDead)
      t->sub_body_ok_[t->parent_[i]] = 0;
  }
  // Cumulative body bitmaps by character count.
  const size_t words = (n + 31) / 32;
  uint32_t max_chars = 0;
  for (size_t i = 1; i < t->byte_.size(); ++i)
    if (t->body_state_[i] != StringBodyDfa::kDead && t->tok_begin_[i] != t->tok_begin_[i + 1])
      max_chars = std::max<uint32_t>(max_chars, t->chars_[i]);
  t->body_levels_ = max_chars + 1;
  t->body_bits_.assign(t->body_levels_ * words, 0);
  for (size_t i = 1; i < t->byte_.size(); ++i) {
    if (t->body_state_[i] == StringBodyDfa::kDead) continue;
    for (uint32_t k = t->tok_begin_[i]; k < t->tok_begin_[i + 1]; ++k) {
      const int32_t id = t->toks_[k];
      t->body_bits_[t->chars_[i] * words + (id >> 5)] |= 1u << (id & 31);
    }
  }
  for (size_t l = 1; l < t->body_levels_; ++l)
    for (size_t w = 0; w < words; ++w)
      t->body_bits_[l * words + w] |= t->body_bits_[(l - 1) * words + w];
  t->text_bits_.assign(words, 0);
  for (int32_t id : t->toks_) t->text_bits_[id >> 5] |= 1u << (id & 31);
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&h](uint64_t x) { h = (h ^ x) * 0x100000001b3ull; };
  for (size_t id = 0; id < n; ++id) {
    for (char c : t->token_bytes_[id]) mix(static_cast<uint8_t>(c));
    mix(0x100u | t->special_[id]);  // separator: never a byte value
  }
  mix(static_cast<uint32_t>(t->eos_id_));
  t->fingerprint_ = h;
  return t;
}

int32_t TokenTrie::find_token(std::string_view text) const {
  int32_t found = -1;
  for (size_t id = 0; id < token_bytes_.size(); ++id) {
    if (token_bytes_[id] != text) continue;
    if (special_[id]) return static_cast<int32_t>(id);
    if (found < 0) found = static_cast<int32_t>(id);
  }
  return found;
}

int32_t TokenTrie::longest_prefix_token(std::string_view s, size_t* len) const {
  int32_t best = -1;
  uint32_t node = 0;
  for (size_t d = 0; d < s.size(); ++d) {
    uint32_t child = node + 1, end = skip_[node];
    bool found = false;
    while (child < end) {
      if (byte_[child] == static_cast<uint8_t>(s[d])) {
        found = true;
        break;
      }
      child = skip_[child];
    }
    if (!found) break;
    node = child;
    if (tokens_begin(node) != tokens_end(node)) {
      best = *tokens_begin(node);
      *len = d + 1;
    }
  }
  return best;
}

}  // namespace di::grammar
