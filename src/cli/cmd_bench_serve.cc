// deepinfer bench serve --url URL --num-prompts N --request-rate R|inf --max-concurrency C
//   --input-len I --output-len O [--disconnect-fraction F]: an online benchmark and soak client
// for `deepinfer serve` (issue #5 item 6, after vLLM's benchmark_serving). Streams
// /v1/completions with random token-id prompts (ignore_eos, so every request makes O tokens),
// Poisson arrivals, and prints request and output-token throughput and TTFT/TPOT/ITL
// mean/median/p99. Every stream that is not dropped on purpose is checked: each event is a
// text_completion chunk, the token ids add up to the usage, one finish_reason, then [DONE].
// Exit 1 if any request failed or any stream was malformed.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>

#include "cli/commands.h"
#include "cli/parse_flags.h"
#include "server/sse_client.h"

namespace di::cli {

namespace {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

struct Sample {
  bool ok = false;
  bool dropped = false;  // hung up on purpose
  std::string error;
  double ttft = 0, e2e = 0;
  std::vector<double> itl;
  int64_t tokens = 0;
};

struct Bench {
  server::HttpUrl url;
  std::string api_key, model;
  int num_prompts = 100, input_len = 128, output_len = 64, max_concurrency = 0;
  double request_rate = std::numeric_limits<double>::infinity();
  double disconnect_fraction = 0;
  uint32_t seed = 1;
  int active = 0;
  int finished = 0;
  std::vector<Sample> samples;
};

// Checks one chunk and counts its tokens; returns an error text, or "" when it is well-formed.
std::string check_chunk(std::string_view data, int64_t& tokens, int& finishes, bool& usage_ok) {
  const json j = json::parse(data, nullptr, false);
  if (!j.is_object() || j.value("object", "") != "text_completion") return "not a chunk";
  if (!j.contains("choices") || !j["choices"].is_array()) return "no choices";
  if (j["choices"].empty()) {
    const json& u = j["usage"];
    if (!u.is_object() || u.value("completion_tokens", -1) != tokens) return "usage mismatch";
    usage_ok = true;
    return "";
  }
  for (const json& c : j["choices"]) {
    if (c.value("index", -1) != 0 || !c.contains("text")) return "bad choice";
    if (c.contains("token_ids")) tokens += static_cast<int64_t>(c["token_ids"].size());
    if (c.contains("finish_reason") && !c["finish_reason"].is_null()) ++finishes;
  }
  return "";
}

// (Outside the coroutine: GCC 12 miscompiles braced JSON initializers inside coroutines.)
std::string request_body(const Bench& b, const std::vector<int32_t>& prompt) {
  const json body = {
      {"model", b.model},        {"prompt", prompt}, {"max_tokens", b.output_len},
      {"ignore_eos", true},      {"stream", true},   {"stream_options", {{"include_usage", true}}},
      {"return_token_ids", true}};
  return body.dump();
}

asio::awaitable<void> one_request(Bench& b, int index, std::vector<int32_t> prompt, int drop_at) {
  Sample& s = b.samples[static_cast<size_t>(index)];
  const std::string body = request_body(b, prompt);
  const Clock::time_point t0 = Clock::now();
  Clock::time_point last = t0;
  int events = 0, finishes = 0;
  bool usage_ok = false;
  auto on_event = [&](std::string_view data) {
    const int64_t before = s.tokens;
    if (std::string e = check_chunk(data, s.tokens, finishes, usage_ok); !e.empty()) {
      if (s.error.empty()) s.error = e + ": " + std::string(data.substr(0, 200));
    }
    if (s.tokens > before) {
      const Clock::time_point now = Clock::now();
      if (before == 0) {
        s.ttft = std::chrono::duration<double>(now - t0).count();
      } else {
        s.itl.push_back(std::chrono::duration<double>(now - last).count());
      }
      last = now;
    }
    return ++events != drop_at;
  };
  auto r = co_await server::post_sse(b.url, "/completions", body, b.api_key, on_event);
  s.e2e = std::chrono::duration<double>(Clock::now() - t0).count();
  if (!r) {
    s.error = r.status().message();
  } else if (r->stopped) {
    s.dropped = true;
  } else if (r->status != 200) {
    s.error = "HTTP " + std::to_string(r->status) + ": " + r->body;
  } else if (s.error.empty()) {
    if (!r->done) s.error = "no [DONE]";
    if (!usage_ok) s.error = "no usage chunk";
    if (finishes != 1) s.error = "finish_reason count " + std::to_string(finishes);
    if (s.tokens != b.output_len) s.error = "got " + std::to_string(s.tokens) + " tokens";
  }
  s.ok = s.error.empty() && !s.dropped;
  --b.active;
  ++b.finished;
}

asio::awaitable<void> drive(Bench& b) {
  auto ex = co_await asio::this_coro::executor;
  std::mt19937_64 rng(b.seed);
  std::exponential_distribution<double> gap(std::isinf(b.request_rate) ? 1.0 : b.request_rate);
  std::uniform_int_distribution<int32_t> tok(1000, 100000);
  std::uniform_real_distribution<double> unit(0, 1);
  std::uniform_int_distribution<int> drop_event(1, std::max(1, b.output_len - 1));
  asio::steady_timer timer(ex);
  boost::system::error_code ec;
  for (int i = 0; i < b.num_prompts; ++i) {
    if (!std::isinf(b.request_rate)) {
      timer.expires_after(
          std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(gap(rng))));
      co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
    while (b.max_concurrency > 0 && b.active >= b.max_concurrency) {
      timer.expires_after(std::chrono::milliseconds(1));
      co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
    std::vector<int32_t> prompt(static_cast<size_t>(b.input_len));
    for (int32_t& t : prompt) t = tok(rng);
    const int drop_at = unit(rng) < b.disconnect_fraction ? drop_event(rng) : 0;
    ++b.active;
    asio::co_spawn(ex, one_request(b, i, std::move(prompt), drop_at), asio::detached);
  }
  while (b.finished < b.num_prompts) {
    timer.expires_after(std::chrono::milliseconds(5));
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
}

void print_stat(const char* name, std::vector<double> v) {
  if (v.empty()) {
    std::printf("%-6s ms: n/a\n", name);
    return;
  }
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  const auto at = [&](double q) {
    return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
  };
  std::printf("%-6s ms: mean %.2f  median %.2f  p99 %.2f\n", name,
              1e3 * sum / static_cast<double>(v.size()), 1e3 * at(0.5), 1e3 * at(0.99));
}

}  // namespace

int run_bench_serve_command(int argc, char** argv) {
  CLI::App app{"Benchmark a running deepinfer serve (streaming /v1/completions)", "bench serve"};
  Bench b;
  std::string url = "http://127.0.0.1:8000/v1", rate = "inf";
  app.add_option("--url", url, "the server's OpenAI base URL")->capture_default_str();
  app.add_option("--api-key", b.api_key, "sent as a bearer token");
  app.add_option("--model", b.model, "model name (default: the server's first)");
  app.add_option("--num-prompts", b.num_prompts, "requests")->check(CLI::PositiveNumber);
  app.add_option("--request-rate", rate, "requests per second (Poisson) or inf")
      ->capture_default_str();
  app.add_option("--max-concurrency", b.max_concurrency, "most requests in flight (0: no limit)");
  app.add_option("--input-len", b.input_len, "prompt tokens")->check(CLI::PositiveNumber);
  app.add_option("--output-len", b.output_len, "generated tokens")->check(CLI::PositiveNumber);
  app.add_option("--disconnect-fraction", b.disconnect_fraction,
                 "fraction of clients that hang up mid-stream (soak test)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--seed", b.seed, "seed of prompts, arrivals and disconnects");
  DI_PARSE_FLAGS(app, argc, argv);
  auto parsed = server::parse_http_url(url);
  if (!parsed) {
    std::cerr << "deepinfer bench serve: " << parsed.status().message() << "\n";
    return 2;
  }
  b.url = *parsed;
  if (rate != "inf") {
    char* end = nullptr;
    b.request_rate = std::strtod(rate.c_str(), &end);
    if (*end != '\0' || !(b.request_rate > 0)) {
      std::cerr << "deepinfer bench serve: --request-rate must be a positive number or inf\n";
      return 2;
    }
  }
  if (b.model.empty()) b.model = "deepinfer";
  b.samples.resize(static_cast<size_t>(b.num_prompts));
  asio::io_context io(1);
  const Clock::time_point t0 = Clock::now();
  asio::co_spawn(io, drive(b), asio::detached);
  io.run();
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  int ok = 0, dropped = 0, failed = 0;
  int64_t tokens = 0;
  std::vector<double> ttft, tpot, itl;
  for (const Sample& s : b.samples) {
    tokens += s.tokens;
    if (s.dropped) {
      ++dropped;
      continue;
    }
    if (!s.ok) {
      if (failed++ < 5) std::fprintf(stderr, "request failed: %s\n", s.error.c_str());
      continue;
    }
    ++ok;
    ttft.push_back(s.ttft);
    if (s.tokens > 1) tpot.push_back((s.e2e - s.ttft) / static_cast<double>(s.tokens - 1));
    itl.insert(itl.end(), s.itl.begin(), s.itl.end());
  }
  std::printf("requests: %d completed (well-formed), %d dropped on purpose, %d failed\n", ok,
              dropped, failed);
  std::printf("duration: %.2f s\n", secs);
  std::printf("request throughput: %.2f req/s\n", ok / secs);
  std::printf("output token throughput: %.1f tok/s\n", static_cast<double>(tokens) / secs);
  print_stat("TTFT", ttft);
  print_stat("TPOT", tpot);
  print_stat("ITL", itl);
  return failed == 0 ? 0 : 1;
}

}  // namespace di::cli
