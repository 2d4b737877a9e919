// SPDX-License-Identifier: Apache-2.0
// The packed allow-mask over the vocabulary, int32 words like xgrammar's bitmask
// ([ceil(vocab/32)]), so a GPU kernel can apply it unchanged.
#pragma once

#include <cstdint>
#include <vector>

namespace di::grammar {

class TokenBitmask {
 public:
  TokenBitmask() = default;
  explicit TokenBitmask(size_t vocab_size) : size_(vocab_size), words_((vocab_size + 31) / 32) {}

  size_t vocab_size() const { return size_; }
  void clear() { std::fill(words_.begin(), words_.end(), 0u); }
  void set(int32_t id) { words_[id >> 5] |= 1u << (id & 31); }
  void reset(int32_t id) { words_[id >> 5] &= ~(1u << (id & 31)); }
  bool test(int32_t id) const { return (words_[id >> 5] >> (id & 31)) & 1u; }
  size_t count() const {
    size_t n = 0;
    for (uint32_t w : words_) n += __builtin_popcount(w);
    return n;
  }
  void or_with(const std::vector<uint32_t>& other) {
    for (size_t i = 0; i < words_.size(); ++i) words_[i] |= other[i];
  }
  uint32_t* data() { return words_.data(); }
  const std::vector<uint32_t>& words() const { return words_; }

 private:
  size_t size_ = 0;
  std::vector<uint32_t> words_;
};

}  // namespace di::grammar
