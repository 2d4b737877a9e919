#include "util/thread_pool.h"

#include <algorithm>

namespace di {

ThreadPool::ThreadPool(unsigned num_threads) {
  if (num_threads == 0) num_threads = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned i = 1; i < num_threads; ++i) {
    workers_.emplace_back([this, i] { worker_loop(i); });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  for (auto& t : workers_) t.join();
}

namespace {
void run_part(const std::function<void(int64_t, int64_t)>& fn,
              int64_t n,
              unsigned parts,
              unsigned part) {
  int64_t begin = n * part / parts;
  int64_t end = n * (part + 1) / parts;
  if (begin < end) fn(begin, end);
}
}  // namespace

void ThreadPool::parallel_for(int64_t n,
                              int64_t grain,
                              const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  int64_t max_parts = std::max<int64_t>(1, n / std::max<int64_t>(1, grain));
  unsigned parts = static_cast<unsigned>(std::min<int64_t>(num_threads(), max_parts));
  if (parts <= 1) {
    fn(0, n);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &fn;
    job_n_ = n;
    job_parts_ = parts;
    pending_ = parts - 1;
    ++generation_;
  }
  work_ready_.notify_all();
  run_part(fn, n, parts, 0);
  std::unique_lock<std::mutex> lock(mutex_);
  work_done_.wait(lock, [this] { return pending_ == 0; });
  job_ = nullptr;
}

void ThreadPool::worker_loop(unsigned worker_index) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int64_t, int64_t)>* job = nullptr;
    int64_t n = 0;
    unsigned parts = 0;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_ready_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      job = job_;
      n = job_n_;
      parts = job_parts_;
    }
    if (worker_index < parts) run_part(*job, n, parts, worker_index);
    if (worker_index < parts) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (--pending_ == 0) work_done_.notify_all();
    }
  }
}

}  // namespace di
