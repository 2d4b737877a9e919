// Open-addressing hash table of piece -> ids, cleared wholesale when full (bounded memory).
#include "recipe/tokenizer/word_cache.h"

#include <array>
#include <cstring>
#include <memory>

namespace di::recipe {
namespace {

constexpr size_t kNumSlots = size_t{1} << 17;  // power of two
constexpr size_t kMaxEntries = kNumSlots / 2;
constexpr int kCachesPerThread = 4;

}  // namespace

WordCache::WordCache() {
  clear();
}

void WordCache::clear() {
  slots_.assign(kNumSlots, Slot{});
  keys_.clear();
  ids_.clear();
  size_ = 0;
}

uint64_t WordCache::hash_bytes(std::string_view key) {
  // FNV-1a over 8-byte words, then a final mix; never 0.
  uint64_t h = 0xcbf29ce484222325ull ^ key.size();
  size_t i = 0;
  for (; i + 8 <= key.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, key.data() + i, 8);
    h = (h ^ w) * 0x100000001b3ull;
    h ^= h >> 29;
  }
  uint64_t tail = 0;
  for (size_t k = i; k < key.size(); ++k) tail = (tail << 8) | static_cast<uint8_t>(key[k]);
  h = (h ^ tail) * 0x100000001b3ull;
  h ^= h >> 32;
  h *= 0xd6e8feb86659fd93ull;
  h ^= h >> 32;
  return h == 0 ? 1 : h;
}

bool WordCache::find(std::string_view key, uint64_t hash, std::span<const int32_t>* ids) const {
  size_t i = hash & (kNumSlots - 1);
  while (true) {
    const Slot& s = slots_[i];
    if (s.hash == 0) return false;
    if (s.hash == hash && s.key_len == key.size() &&
        std::memcmp(keys_.data() + s.key_offset, key.data(), key.size()) == 0) {
      *ids = std::span<const int32_t>(ids_.data() + s.ids_offset, s.num_ids);
      return true;
    }
    i = (i + 1) & (kNumSlots - 1);
  }
}

void WordCache::insert(std::string_view key, uint64_t hash, std::span<const int32_t> ids) {
  if (key.size() > kMaxKeyBytes || ids.size() > 0xFFFF) return;
  if (size_ >= kMaxEntries || keys_.size() + key.size() > UINT32_MAX ||
      ids_.size() + ids.size() > UINT32_MAX) {
    clear();
  }
  size_t i = hash & (kNumSlots - 1);
  while (slots_[i].hash != 0) i = (i + 1) & (kNumSlots - 1);
  Slot& s = slots_[i];
  s.hash = hash;
  s.key_offset = static_cast<uint32_t>(keys_.size());
  s.key_len = static_cast<uint16_t>(key.size());
  s.ids_offset = static_cast<uint32_t>(ids_.size());
  s.num_ids = static_cast<uint16_t>(ids.size());
  keys_.append(key);
  ids_.insert(ids_.end(), ids.begin(), ids.end());
  ++size_;
}

WordCache& WordCache::for_thread(uint64_t tokenizer_uid) {
  struct Entry {
    uint64_t uid = 0;
    std::unique_ptr<WordCache> cache;
  };
  thread_local std::array<Entry, kCachesPerThread> entries;
  thread_local int next_victim = 0;
  for (Entry& e : entries) {
    if (e.uid == tokenizer_uid && e.cache) return *e.cache;
  }
  Entry& e = entries[next_victim];
  next_victim = (next_victim + 1) % kCachesPerThread;
  e.uid = tokenizer_uid;
  if (e.cache) {
    e.cache->clear();
  } else {
    e.cache = std::make_unique<WordCache>();
  }
  return *e.cache;
}

}  // namespace di::recipe
