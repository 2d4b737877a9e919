#include "server/metrics.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <sstream>

namespace di::server {

namespace {

// Latency buckets in seconds, as vLLM's (TTFT / e2e from 1 ms to 10 min; ITL finer).
const prometheus::Histogram::BucketBoundaries kTtftBuckets = {
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,  0.5,  0.75,
    1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0};
const prometheus::Histogram::BucketBoundaries kItlBuckets = {
    0.001, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0};

prometheus::Gauge* gauge(prometheus::Registry& r,
                         const std::string& name,
                         const std::string& help) {
  return &prometheus::BuildGauge().Name(name).Help(help).Register(r).Add({});
}

prometheus::Histogram* histogram(prometheus::Registry& r,
                                 const std::string& name,
                                 const std::string& help,
                                 const prometheus::Histogram::BucketBoundaries& b) {
  return &prometheus::BuildHistogram().Name(name).Help(help).Register(r).Add({}, b);
}

}  // namespace

EngineGauges read_engine_stats(const api::AsyncStats& s) {
  EngineGauges g;
  g.running_sequences = static_cast<double>(s.engine_running);
  g.waiting_requests = static_cast<double>(s.engine_waiting + s.num_queued);
  g.kv_capacity_tokens = static_cast<double>(s.kv_token_capacity);
  g.sequence_capacity = static_cast<double>(s.sequence_capacity);
  g.kv_usage = s.kv_token_capacity > 0 ? static_cast<double>(s.kv_tokens_in_use) /
                                             static_cast<double>(s.kv_token_capacity)
                                       : 0.0;
  g.prefix_cache_queries = static_cast<double>(s.engine.prefix_cache_query_tokens);
  g.prefix_cache_hits = static_cast<double>(s.engine.prefix_cache_hit_tokens);
  g.num_preemptions = static_cast<double>(s.engine.num_preemptions);
  g.prompt_tokens_computed = static_cast<double>(s.engine.num_prefill_tokens);
  g.generated_tokens = static_cast<double>(s.engine.num_generated_tokens);
  g.steps = static_cast<double>(s.engine.num_steps);
  return g;
}

ServerMetrics::ServerMetrics() : registry_(std::make_shared<prometheus::Registry>()) {
  auto& r = *registry_;
  requests_ = &prometheus::BuildCounter()
                   .Name("deepinfer_http_requests_total")
                   .Help("HTTP requests by route and status code")
                   .Register(r);
  prompt_tokens_ = &prometheus::BuildCounter()
                        .Name("deepinfer_prompt_tokens_total")
                        .Help("prompt tokens of finished generation requests")
                        .Register(r)
                        .Add({});
  completion_tokens_ = &prometheus::BuildCounter()
                            .Name("deepinfer_generation_tokens_total")
                            .Help("generated tokens of finished generation requests")
                            .Register(r)
                            .Add({});
  ttft_ =
      histogram(r, "deepinfer_time_to_first_token_seconds", "time to first token", kTtftBuckets);
  itl_ = histogram(r, "deepinfer_inter_token_latency_seconds", "time between streamed tokens",
                   kItlBuckets);
  e2e_ = histogram(r, "deepinfer_e2e_request_latency_seconds", "request latency", kTtftBuckets);
  http_in_flight_ = gauge(r, "deepinfer_http_generation_in_flight",
                          "generation requests the server holds (queued or running)");
  running_ = gauge(r, "deepinfer_num_requests_running", "sequences in the engine");
  waiting_ = gauge(r, "deepinfer_num_requests_waiting", "requests not yet in the engine");
  kv_usage_ = gauge(r, "deepinfer_kv_cache_usage_perc", "fraction of the state pool in use");
  kv_capacity_ = gauge(r, "deepinfer_kv_cache_capacity_tokens", "state pool capacity in tokens");
  seq_capacity_ = gauge(r, "deepinfer_max_num_seqs", "state pool capacity in sequences");
  prefix_hit_rate_ = gauge(r, "deepinfer_prefix_cache_hit_rate", "prefix cache hit tokens / query");
  prefix_queries_ = gauge(r, "deepinfer_prefix_cache_queries", "prefix cache query tokens");
  prefix_hits_ = gauge(r, "deepinfer_prefix_cache_hits", "prefix cache hit tokens");
  preemptions_ = gauge(r, "deepinfer_num_preemptions", "preemptions by recompute");
  prefill_tokens_ = gauge(r, "deepinfer_engine_prefill_tokens", "prefill tokens computed");
  generated_tokens_ = gauge(r, "deepinfer_engine_generated_tokens", "tokens generated");
  steps_ = gauge(r, "deepinfer_engine_steps", "engine steps");
}

ServerMetrics::~ServerMetrics() = default;

void ServerMetrics::count_request(const std::string& route, int status) {
  requests_->Add({{"route", route}, {"status", std::to_string(status)}}).Increment();
}
void ServerMetrics::observe_ttft(double s) {
  ttft_->Observe(s);
}
void ServerMetrics::observe_itl(double s) {
  itl_->Observe(s);
}
void ServerMetrics::observe_e2e(double s) {
  e2e_->Observe(s);
}
void ServerMetrics::add_tokens(int64_t prompt, int64_t completion) {
  prompt_tokens_->Increment(static_cast<double>(prompt));
  completion_tokens_->Increment(static_cast<double>(completion));
}
void ServerMetrics::set_http_in_flight(int64_t n) {
  http_in_flight_->Set(static_cast<double>(n));
}

std::string ServerMetrics::render(const api::AsyncStats& stats) {
  const EngineGauges g = read_engine_stats(stats);
  running_->Set(g.running_sequences);
  waiting_->Set(g.waiting_requests);
  kv_usage_->Set(g.kv_usage);
  kv_capacity_->Set(g.kv_capacity_tokens);
  seq_capacity_->Set(g.sequence_capacity);
  prefix_queries_->Set(g.prefix_cache_queries);
  prefix_hits_->Set(g.prefix_cache_hits);
  prefix_hit_rate_->Set(g.prefix_cache_queries > 0 ? g.prefix_cache_hits / g.prefix_cache_queries
                                                   : 0.0);
  preemptions_->Set(g.num_preemptions);
  prefill_tokens_->Set(g.prompt_tokens_computed);
  generated_tokens_->Set(g.generated_tokens);
  steps_->Set(g.steps);
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, registry_->Collect());
  return out.str();
}

}  // namespace di::server
