// State shared by the connection handlers of one server. Everything here is touched only on the
// server's io thread (the engine thread reaches it solely by posting to that io_context), so it
// needs no locks.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <deque>
#include <memory>
#include <optional>
#include <set>

#include "api/async_llm.h"
#include "server/metrics.h"
#include "server/server_options.h"

namespace di::server {

// The events of one generation request, delivered to its handler coroutine. The engine thread
// posts push() onto the io thread; next() waits on a timer that push() cancels, which is safe
// because both run on the io thread.
class RequestChannel {
 public:
  explicit RequestChannel(boost::asio::any_io_executor ex)
      : timer_(ex, boost::asio::steady_timer::time_point::max()) {}

  void push(api::StreamEvent&& ev) {
    events_.push_back(std::move(ev));
    timer_.cancel();
  }
  // Ends the wait with no event (server shutdown cancelled the request).
  void cancel() {
    cancelled_ = true;
    timer_.cancel();
  }
  bool cancelled() const { return cancelled_; }
  std::optional<api::StreamEvent> pop() {
    if (events_.empty()) return std::nullopt;
    api::StreamEvent ev = std::move(events_.front());
    events_.pop_front();
    return ev;
  }
  boost::asio::steady_timer& timer() { return timer_; }

  api::AsyncLLM::Handle handle = 0;

 private:
  boost::asio::steady_timer timer_;
  std::deque<api::StreamEvent> events_;
  bool cancelled_ = false;
};

struct ServerContext {
  boost::asio::io_context& io;
  api::AsyncLLM& llm;
  // Compiles structured-output grammars (milliseconds to a second for a cold schema) off the io
  // thread and the engine loop.
  boost::asio::thread_pool& compile_pool;
  ServerOptions opts;
  ServerMetrics metrics;
  int64_t max_model_len = 0;  // resolved
  int64_t in_flight = 0;      // generation requests between submit and their last byte
  bool draining = false;      // SIGTERM received: refuse new work
  std::set<std::shared_ptr<RequestChannel>> active;  // for cancellation at the drain deadline
};

}  // namespace di::server
