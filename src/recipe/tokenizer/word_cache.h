// A per-thread cache from a piece's bytes to its BPE ids. Encoding the same words again is the
// common case (prose, code), and a cache hit skips the merge loop. Each thread owns its caches,
// so lookups take no locks; a thread keeps caches for a few tokenizers (by unique id) at once.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace di::recipe {

class WordCache {
 public:
  WordCache();

  // The cached ids for `key`, or nullopt-like empty span with found == false.
  bool find(std::string_view key, uint64_t hash, std::span<const int32_t>* ids) const;
  void insert(std::string_view key, uint64_t hash, std::span<const int32_t> ids);

  static uint64_t hash_bytes(std::string_view key);

  // The calling thread's cache for the tokenizer with this unique id.
  static WordCache& for_thread(uint64_t tokenizer_uid);

  static constexpr size_t kMaxKeyBytes = 64;  // longer pieces are not cached

 private:
  struct Slot {
    uint64_t hash = 0;  // 0 = empty
    uint32_t key_offset = 0;
    uint32_t ids_offset = 0;
    uint16_t key_len = 0;
    uint16_t num_ids = 0;
  };
  void clear();

  std::vector<Slot> slots_;
  std::string keys_;
  std::vector<int32_t> ids_;
  size_t size_ = 0;
};

}  // namespace di::recipe
