// The only cross-thread handoff in the engine (house style §4.8): a mutex-guarded FIFO of typed
// messages. Producers (API threads) push; the engine's owner thread drains it at the start of
// each step, so scheduler and state metadata are never touched by two threads. Every lock in the
// engine lives in this file.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

namespace di::engine {

// Thread-safe: any number of producers and consumers.
template <class T>
class Queue {
 public:
  void push(T value) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      items_.push_back(std::move(value));
    }
    ready_.notify_one();
  }

  // Everything queued so far, oldest first; empty when there is nothing.
  std::vector<T> drain() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<T> out(std::make_move_iterator(items_.begin()),
                       std::make_move_iterator(items_.end()));
    items_.clear();
    return out;
  }

  // The oldest item, waiting up to `timeout` for one.
  std::optional<T> pop_for(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!ready_.wait_for(lock, timeout, [&] { return !items_.empty(); })) return std::nullopt;
    T v = std::move(items_.front());
    items_.pop_front();
    return v;
  }

  bool empty() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return items_.empty();
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<T> items_;
};

}  // namespace di::engine
