// A fixed pool of worker threads for data-parallel loops. The split of [0, n) into ranges never
// changes what any index computes, so results are identical for every thread count (batch
// invariance by construction: each output element is produced by one thread in a fixed order).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace di {

class ThreadPool {
 public:
  // num_threads == 0 means std::thread::hardware_concurrency().
  explicit ThreadPool(unsigned num_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  unsigned num_threads() const { return static_cast<unsigned>(workers_.size()) + 1; }

  // Calls fn(begin, end) on disjoint ranges covering [0, n), in parallel, and waits.
  // `grain` is the smallest range worth a thread. fn must not throw.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void worker_loop(unsigned worker_index);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable work_done_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0;
  unsigned job_parts_ = 0;
  uint64_t generation_ = 0;
  unsigned pending_ = 0;
  bool stopping_ = false;
};

}  // namespace di
