// The byte-level BPE model: byte -> initial token, ranked merges, and the merge loop that turns
// one pre-tokenized piece into token ids exactly as HuggingFace's BPE does (repeatedly merge the
// lowest-ranked adjacent pair, leftmost first).
#pragma once

#include <climits>
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
  // b_starts_char: b's first byte is not a UTF-8 continuation byte (it can start a character).
  void add_merge(int32_t a, int32_t b, int32_t rank, int32_t merged, bool b_starts_char);

  // Precomputes per-character data for the character-level fast path; call after all merges.
  void finalize();

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
  // BPE of one 1-3 byte character on its own, when starting a piece from it is exact (see
  // bpe_model.cc, char_level_start).
  struct CharInfo {
    int32_t tokens[3];
    int8_t num_tokens = 0;  // 0: not safe (use the byte path)
  };
  struct PairMerge {
    int32_t rank = INT32_MAX;  // INT32_MAX: no merge
    int32_t merged = -1;
  };
  struct Scratch;
  bool char_level_start(std::string_view bytes, Scratch& sc) const;
  void merge_small(Scratch& sc, const uint8_t* raw) const;
  void merge_heap(Scratch& sc) const;

  int32_t byte_token_[256];
  std::vector<Slot> slots_;
  std::vector<int32_t> min_rank_as_left_;   // per token id, over merges (id, b) with b_starts_char
  std::vector<int32_t> min_rank_as_right_;  // per token id
  std::vector<CharInfo> chars_;             // per code point < 0x10000 (after finalize)
  std::vector<PairMerge> byte_pairs_;       // [256 * 256] merges of two byte tokens, by bytes
  size_t num_merges_ = 0;
  uint64_t mask_ = 0;
};

}  // namespace di::recipe
