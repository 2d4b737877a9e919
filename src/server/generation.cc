#include "server/generation.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <cstdio>
#include <random>

#include "api/grammar_constraint.h"
#include "api/openai_response.h"
#include "server/response_stream.h"

namespace di::server {

namespace asio = boost::asio;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

// Recorded in /metrics for requests whose client hung up (nginx's "client closed request").
constexpr int kClientClosed = 499;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string random_id(const char* prefix) {
  std::random_device rd;
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%s%08x%08x%08x", prefix, rd(), rd(), rd());
  return buf;
}

// The field a parse error names ("body.top_p: ..." -> "top_p").
std::string param_of(const std::string& message) {
  if (message.rfind("body.", 0) != 0) return "";
  const size_t colon = message.find(':');
  return colon == std::string::npos ? "" : message.substr(5, colon - 5);
}

// Keeps ServerContext's bookkeeping right on every exit path of the handler.
class InFlight {
 public:
  InFlight(ServerContext& ctx, std::shared_ptr<RequestChannel> ch) : ctx_(ctx), ch_(std::move(ch)) {
    ++ctx_.in_flight;
    ctx_.active.insert(ch_);
    ctx_.metrics.set_http_in_flight(ctx_.in_flight);
  }
  ~InFlight() {
    --ctx_.in_flight;
    ctx_.active.erase(ch_);
    ctx_.metrics.set_http_in_flight(ctx_.in_flight);
  }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;

 private:
  ServerContext& ctx_;
  std::shared_ptr<RequestChannel> ch_;
};

// Watches the client's socket while its request waits for events, so a client that hangs up
// before any write (queued, or not streaming) is noticed at once rather than at the end.
struct ClientWatch {
  HttpStream& stream;
  bool watching = true;  // off once the client sent more bytes (pipelining): not an EOF
  bool gone = false;
};

// True when the readable socket is at EOF or failed; false (and stops watching) on data.
bool client_hung_up(ClientWatch& w) {
  auto& sock = w.stream.socket();
  char c = 0;
  boost::system::error_code ec;
  sock.non_blocking(true, ec);
  const size_t n = sock.receive(asio::buffer(&c, 1), asio::socket_base::message_peek, ec);
  boost::system::error_code ignored;
  sock.non_blocking(false, ignored);
  if (ec == asio::error::would_block || ec == asio::error::try_again) return false;
  if (ec || n == 0) return true;
  w.watching = false;
  return false;
}

// The next event; nullopt when the server cancelled the request or (watch.gone) the client left.
asio::awaitable<std::optional<api::StreamEvent>> next_event(RequestChannel& ch,
                                                            ClientWatch& watch) {
  using namespace boost::asio::experimental::awaitable_operators;  // ||
  for (;;) {
    if (auto ev = ch.pop()) co_return ev;
    if (ch.cancelled()) co_return std::nullopt;
    ch.timer().expires_at(asio::steady_timer::time_point::max());
    if (!watch.watching) {
      boost::system::error_code ec;
      co_await ch.timer().async_wait(asio::redirect_error(asio::use_awaitable, ec));
      continue;
    }
    auto which = co_await (ch.timer().async_wait(asio::as_tuple(asio::use_awaitable)) ||
                           watch.stream.socket().async_wait(asio::socket_base::wait_read,
                                                            asio::as_tuple(asio::use_awaitable)));
    if (which.index() == 1 && client_hung_up(watch)) {
      watch.gone = true;
      co_return std::nullopt;
    }
  }
}

bool has_tokens(const api::StreamEvent& ev) {
  for (const api::ChoiceDelta& d : ev.choices) {
    if (!d.token_ids.empty()) return true;
  }
  return false;
}

// Checks that can refuse a request before it reaches the engine; fills max_tokens when absent
// (the rest of the context, as vLLM does).
std::optional<std::pair<int, std::string>> admit(const ServerContext& ctx,
                                                 const json& body,
                                                 api::OpenAIRequest& r,
                                                 int64_t prompt_len) {
  if (ctx.draining) return std::pair{503, std::string("the server is shutting down")};
  if (ctx.in_flight >= ctx.opts.max_pending) {
    return std::pair{429, "the server is overloaded (" + std::to_string(ctx.in_flight) +
                              " requests in flight); retry later"};
  }
  const bool has_max =
      (body.contains("max_tokens") && !body["max_tokens"].is_null()) ||
      (body.contains("max_completion_tokens") && !body["max_completion_tokens"].is_null());
  if (!has_max) {
    r.params.max_tokens = static_cast<int>(std::max<int64_t>(1, ctx.max_model_len - prompt_len));
  }
  if (prompt_len + r.params.max_tokens > ctx.max_model_len) {
    return std::pair{400, "This model's maximum context length is " +
                              std::to_string(ctx.max_model_len) +
                              " tokens. However, you requested " +
                              std::to_string(prompt_len + r.params.max_tokens) + " tokens (" +
                              std::to_string(prompt_len) + " in the messages, " +
                              std::to_string(r.params.max_tokens) +
                              " in the completion). Please reduce the length of the messages or "
                              "completion."};
  }
  return std::nullopt;
}

}  // namespace

asio::awaitable<Outcome> serve_generation(HttpStream& stream,
                                          const HttpRequest& req,
                                          ServerContext& ctx,
                                          api::OpenAIEndpoint endpoint) {
  const Clock::time_point t0 = Clock::now();
  const json body = json::parse(req.body(), nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) {
    co_return co_await write_error(stream, req, 400,
                                   "We could not parse the JSON body of your request. (HINT: "
                                   "This likely means you aren't using your HTTP library "
                                   "correctly.)",
                                   "", ctx);
  }
  api::GenerationParams defaults;
  auto parsed = api::parse_openai_body(body, endpoint, defaults, ctx.opts.served_model_name);
  if (!parsed) {
    const std::string& m = parsed.status().message();
    co_return co_await write_error(stream, req, 400, m, param_of(m), ctx);
  }
  api::OpenAIRequest r = std::move(parsed).value();
  if (r.model != ctx.opts.served_model_name) {
    co_return co_await write_error(stream, req, 404, "The model `" + r.model + "` does not exist.",
                                   "model", ctx);
  }
  auto ids = ctx.llm.llm().prompt_ids(r.prompt);
  if (!ids) co_return co_await write_error(stream, req, 400, ids.status().message(), "", ctx);
  if (r.params.structured_output && ctx.llm.structured_outputs()) {
    api::StructuredOutputCompiler& compiler = *ctx.llm.structured_outputs();
    api::StructuredOutput& so = *r.params.structured_output;
    const Status compiled = co_await asio::co_spawn(
        ctx.compile_pool,
        [&compiler, &so]() -> asio::awaitable<Status> { co_return compiler.prepare(so); },
        asio::use_awaitable);
    if (!compiled.ok()) {
      // Unsupported or too complex to compile in time: both are about this request's grammar.
      co_return co_await write_error(stream, req, 400, compiled.message(), "response_format", ctx);
    }
  }
  const int64_t prompt_len = static_cast<int64_t>(ids->size());
  if (auto refusal = admit(ctx, body, r, prompt_len)) {
    const std::string param = refusal->first == 400 ? "max_tokens" : "";
    co_return co_await write_error(stream, req, refusal->first, refusal->second, param, ctx);
  }

  auto ch = std::make_shared<RequestChannel>(co_await asio::this_coro::executor);
  InFlight guard(ctx, ch);
  asio::io_context& io = ctx.io;
  ch->handle = ctx.llm.submit(
      std::move(ids).value(), r.params,
      [&io, ch](api::StreamEvent&& ev) {
        asio::post(io, [ch, ev = std::move(ev)]() mutable { ch->push(std::move(ev)); });
      },
      api::reply_starts_in_reasoning(r.prompt));
  const bool chat = endpoint == api::OpenAIEndpoint::kChatCompletions;
  ResponseStream rs(r, random_id(chat ? "chatcmpl-" : "cmpl-"),
                    std::chrono::duration_cast<std::chrono::seconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count(),
                    ctx.llm.llm().tokenizer());

  // Headers wait for the first event, so a request the engine rejects still gets its 4xx.
  ClientWatch watch{stream};
  std::optional<api::StreamEvent> ev = co_await next_event(*ch, watch);
  if (watch.gone) {
    ctx.llm.abort(ch->handle);
    co_return Outcome{kClientClosed, false};
  }
  if (!ev) co_return co_await write_error(stream, req, 503, "the server is shutting down", "", ctx);
  if (ev->done && !ev->error.ok() && !has_tokens(*ev)) {
    const int status = ev->error.code() == StatusCode::kInvalidArgument ? 400 : 500;
    co_return co_await write_error(stream, req, status, ev->error.message(), "", ctx);
  }
  bool first_token = true;
  Clock::time_point last_token = t0;
  auto observe = [&](const api::StreamEvent& e) {
    if (!has_tokens(e)) return;
    const Clock::time_point now = Clock::now();
    if (first_token) {
      ctx.metrics.observe_ttft(seconds_since(t0));
    } else {
      ctx.metrics.observe_itl(std::chrono::duration<double>(now - last_token).count());
    }
    first_token = false;
    last_token = now;
  };
  auto finish_metrics = [&] {
    ctx.metrics.observe_e2e(seconds_since(t0));
    ctx.metrics.add_tokens(rs.prompt_tokens(), rs.completion_tokens());
  };

  if (!r.stream) {
    for (;;) {
      observe(*ev);
      rs.accumulate(*ev);
      if (ev->done) break;
      ev = co_await next_event(*ch, watch);
      if (watch.gone) {
        ctx.llm.abort(ch->handle);
        co_return Outcome{kClientClosed, false};
      }
      if (!ev)
        co_return co_await write_error(stream, req, 503, "the server is shutting down", "", ctx);
    }
    finish_metrics();
    if (!ev->error.ok())
      co_return co_await write_error(stream, req, 500, ev->error.message(), "", ctx);
    co_return co_await write_json(stream, req, 200, rs.body(), ctx);
  }

  if (!co_await write_sse_header(stream, req, ctx)) {
    ctx.llm.abort(ch->handle);
    co_return Outcome{200, false};
  }
  for (;;) {
    observe(*ev);
    if (!co_await write_sse_events(stream, rs.chunks(*ev), ctx)) {
      ctx.llm.abort(ch->handle);  // the client went away: free its sequences now
      co_return Outcome{200, false};
    }
    if (ev->done) break;
    ev = co_await next_event(*ch, watch);
    if (watch.gone) {
      ctx.llm.abort(ch->handle);
      co_return Outcome{kClientClosed, false};
    }
    if (!ev) break;
  }
  finish_metrics();
  std::vector<std::string> tail;
  if (!ev) {
    tail.push_back(error_json(503, "the server is shutting down; the request was cancelled"));
  } else if (!ev->error.ok()) {
    tail.push_back(error_json(500, ev->error.message()));
  } else if (r.include_usage) {
    tail.push_back(rs.usage_chunk());
  }
  bool ok = co_await write_sse_events(stream, tail, ctx);
  if (ok) ok = co_await write_sse_end(stream, ctx);
  co_return Outcome{200, ok && req.keep_alive() && !ctx.draining};
}

}  // namespace di::server
