// The byte-level BPE model: byte -> initial token, ranked merges, and the merge loop that turns
// one pre-tokenized piece into token ids exactly as HuggingFace's BPE does (repeatedly merge the
// lowest-ranked adjacent pair, leftmost first).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace di::recipe {

class BpeModel {
 public:
  BpeModel();

  // Setup (loader only). byte_token(b) is the id of the single-byte token, or -1 if absent
  // (such bytes are dropped, as HF does without an unk token).
  void set_byte_token(uint8_t b, int32_t id) { byte_token_[b] = id; }
  // Adds a merge (a, b) -> merged with the given rank; a later duplicate replaces an earlier one.
  void add_merge(int32_t a, int32_t b, int32_t rank, int32_t merged);

  // Appends the ids for the raw bytes of one piece to `out`. Thread-safe (const, no caching).
  void encode_piece(std::string_view bytes, std::vector<int32_t>& out) const;

 private:
  struct Slot {
    uint64_t key;  // (a << 32 | b) + 1; 0 = empty
    int32_t rank;
    int32_t merged;
  };
  // Rank and result of merging (a, b); rank INT32_MAX if there is no such merge.
  const Slot* find(int32_t a, int32_t b) const;
  void grow();
  struct Scratch;
  void merge_small(Scratch& sc) const;
  void merge_heap(Scratch& sc) const;

  int32_t byte_token_[256];
  std::vector<Slot> slots_;
  size_t num_merges_ = 0;
  uint64_t mask_ = 0;
};

}  // namespace di::recipe
