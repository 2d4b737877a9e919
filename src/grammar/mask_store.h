// SPDX-License-Identifier: Apache-2.0
// Token-mask cache entries shared across compiled grammars of one vocabulary. Entries are keyed by
// the exact canonical text of the sub-grammar reachable from a state's rule plus the state's index
// in that rule, so equal keys mean equal masks (no hashing shortcuts that could merge different
// grammars). JSON Schema grammars reuse the same string/number/value rules, so most expensive
// entries are computed once per process instead of once per schema. Thread-safe, bounded (LRU).
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace di::grammar {

struct StateMask;

class MaskStore {
 public:
  explicit MaskStore(size_t capacity = 4096) : capacity_(capacity) {}

  // Small id for a canonical sub-grammar text, so per-state keys stay short.
  uint64_t intern(const std::string& canonical) {
    std::lock_guard<std::mutex> lock(mu_);
    auto [it, fresh] = interned_.emplace(canonical, interned_.size());
    return it->second;
  }

  std::shared_ptr<const StateMask> find(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = index_.find(key);
    if (it == index_.end()) return nullptr;
    lru_.splice(lru_.begin(), lru_, it->second);
    return it->second->second;
  }

  void insert(const std::string& key, std::shared_ptr<const StateMask> m) {
    std::lock_guard<std::mutex> lock(mu_);
    if (index_.count(key)) return;
    lru_.emplace_front(key, std::move(m));
    index_[key] = lru_.begin();
    while (lru_.size() > capacity_) {
      index_.erase(lru_.back().first);
      lru_.pop_back();
    }
  }

 private:
  size_t capacity_;
  std::mutex mu_;
  std::list<std::pair<std::string, std::shared_ptr<const StateMask>>> lru_;
  std::unordered_map<std::string, decltype(lru_)::iterator> index_;
  std::unordered_map<std::string, uint64_t> interned_;
};

}  // namespace di::grammar
