// ServerMetrics: the Prometheus /metrics page (prometheus-cpp core, Debian's prometheus-cpp-dev;
// we serve the text ourselves on the API port, so the library's civetweb exposer is not used).
// Request and token counters, TTFT / inter-token / end-to-end latency histograms, and gauges read
// from the engine at scrape time through one function, read_engine_stats().
// Thread-safe (prometheus-cpp metrics are); the server calls it from its io thread.
#pragma once

#include <memory>
#include <string>

#include "api/async_llm.h"

namespace prometheus {
class Registry;
class Counter;
class Gauge;
class Histogram;
template <typename T>
class Family;
}  // namespace prometheus

namespace di::server {

// What /metrics reports about the engine. Filled by read_engine_stats() only, so a new engine
// statistic (prefix-cache query/hit tokens, running/waiting split) is wired in one place.
struct EngineGauges {
  double running_sequences = 0;   // sequences the engine runs
  double waiting_requests = 0;    // sequences waiting in the engine + requests not yet in it
  double kv_capacity_tokens = 0;  // the state pool's capacity, fixed at start-up
  double sequence_capacity = 0;
  double kv_usage = 0;              // fraction of the state pool's token capacity in use
  double prefix_cache_queries = 0;  // tokens looked up in the prefix cache
  double prefix_cache_hits = 0;     // of those, tokens found
  double num_preemptions = 0;
  double prompt_tokens_computed = 0;  // prefill tokens fed to the model (recompute included)
  double generated_tokens = 0;
  double steps = 0;
};
EngineGauges read_engine_stats(const api::AsyncStats& s);

class ServerMetrics {
 public:
  ServerMetrics();
  ~ServerMetrics();

  // One finished HTTP request (any endpoint), by route and status code.
  void count_request(const std::string& route, int status);
  void observe_ttft(double seconds);
  void observe_itl(double seconds);
  void observe_e2e(double seconds);
  void add_tokens(int64_t prompt, int64_t completion);
  void set_http_in_flight(int64_t n);

  // The Prometheus text page, with the engine gauges as of `stats`.
  std::string render(const api::AsyncStats& stats);

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>* requests_;
  prometheus::Counter* prompt_tokens_;
  prometheus::Counter* completion_tokens_;
  prometheus::Histogram* ttft_;
  prometheus::Histogram* itl_;
  prometheus::Histogram* e2e_;
  prometheus::Gauge* http_in_flight_;
  prometheus::Gauge* running_;
  prometheus::Gauge* waiting_;
  prometheus::Gauge* kv_usage_;
  prometheus::Gauge* kv_capacity_;
  prometheus::Gauge* seq_capacity_;
  prometheus::Gauge* prefix_hit_rate_;
  prometheus::Gauge* prefix_queries_;
  prometheus::Gauge* prefix_hits_;
  prometheus::Gauge* preemptions_;
  prometheus::Gauge* prefill_tokens_;
  prometheus::Gauge* generated_tokens_;
  prometheus::Gauge* steps_;
};

}  // namespace di::server
