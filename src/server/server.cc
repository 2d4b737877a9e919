#include "server/server.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <exception>

#include "server/routes.h"

namespace di::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

// Completion of a detached coroutine: nothing may escape onto the io thread, so an exception
// (which our code does not throw on input) is reported and the connection dropped.
void report_exception(std::exception_ptr e) {
  if (!e) return;
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "deepinfer serve: connection error: %s\n", ex.what());
  } catch (...) {
    std::fprintf(stderr, "deepinfer serve: connection error\n");
  }
}

asio::awaitable<void> session(tcp::socket socket, ServerContext& ctx) {
  HttpStream stream(std::move(socket));
  beast::flat_buffer buffer;
  for (;;) {
    http::request_parser<http::string_body> parser;
    parser.body_limit(ctx.opts.max_body_bytes);
    stream.expires_after(std::chrono::seconds(ctx.opts.idle_timeout_s));
    beast::error_code ec;
    co_await http::async_read(stream, buffer, parser,
                              asio::redirect_error(asio::use_awaitable, ec));
    stream.expires_never();
    if (ec == http::error::body_limit) {
      HttpRequest head = parser.release();
      head.keep_alive(false);
      co_await write_error(stream, head, 413, "request body too large", "", ctx);
      ctx.metrics.count_request("other", 413);
      break;
    }
    if (ec) {
      if (ec != http::error::end_of_stream && ec != beast::error::timeout &&
          ec != asio::error::connection_reset && ec != asio::error::operation_aborted &&
          ec != asio::error::eof) {
        // A request that is not HTTP: answer 400 as OpenAI's front end would.
        HttpRequest bad;
        bad.version(11);
        bad.keep_alive(false);
        co_await write_error(stream, bad, 400, "malformed HTTP request: " + ec.message(), "", ctx);
        ctx.metrics.count_request("other", 400);
      }
      break;
    }
    HttpRequest req = parser.release();
    std::string route;
    const Outcome out = co_await dispatch(stream, req, ctx, route);
    ctx.metrics.count_request(route, out.status);
    if (!out.keep_alive || ctx.draining) break;
  }
  beast::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
}

asio::awaitable<void> accept_loop(tcp::acceptor& acceptor, ServerContext& ctx) {
  for (;;) {
    beast::error_code ec;
    tcp::socket socket =
        co_await acceptor.async_accept(asio::redirect_error(asio::use_awaitable, ec));
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
    if (ec) continue;  // e.g. EMFILE: keep serving the connections we have
    socket.set_option(tcp::no_delay(true), ec);
    asio::co_spawn(acceptor.get_executor(), session(std::move(socket), ctx), report_exception);
  }
}

// SIGTERM / SIGINT: stop accepting, wait for in-flight generation up to the deadline, cancel the
// rest, give handlers a moment to send their last bytes, then stop the io_context.
asio::awaitable<void> drain(tcp::acceptor& acceptor, ServerContext& ctx) {
  ctx.draining = true;
  beast::error_code ec;
  acceptor.close(ec);
  std::fprintf(stderr, "deepinfer serve: draining %lld request(s) (deadline %.0f s)\n",
               static_cast<long long>(ctx.in_flight), ctx.opts.drain_timeout_s);
  const auto deadline =
      std::chrono::steady_clock::now() +
      std::chrono::milliseconds(static_cast<int64_t>(ctx.opts.drain_timeout_s * 1e3));
  asio::steady_timer timer(ctx.io);
  while (ctx.in_flight > 0 && std::chrono::steady_clock::now() < deadline) {
    timer.expires_after(std::chrono::milliseconds(20));
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  if (ctx.in_flight > 0) {
    std::fprintf(stderr, "deepinfer serve: cancelling %lld request(s) at the deadline\n",
                 static_cast<long long>(ctx.in_flight));
    for (const auto& ch : std::vector(ctx.active.begin(), ctx.active.end())) {
      ctx.llm.abort(ch->handle);
      ch->cancel();
    }
    const auto grace = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (ctx.in_flight > 0 && std::chrono::steady_clock::now() < grace) {
      timer.expires_after(std::chrono::milliseconds(20));
      co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
  }
  ctx.io.stop();
}

}  // namespace

Status run_server(api::AsyncLLM& llm,
                  const ServerOptions& opts,
                  const std::function<void(uint16_t port)>& on_listening) {
  // Declared before ctx and destroyed explicitly after it is no longer used: destroying the
  // io_context destroys pending connection coroutines, whose guards still touch ctx.
  auto io = std::make_unique<asio::io_context>(1);
  asio::thread_pool compile_pool(1);
  ServerContext ctx{*io, llm, compile_pool, opts, {}, 0, 0, false, {}};
  ctx.max_model_len = opts.max_model_len > 0 ? std::min(opts.max_model_len, llm.max_model_len())
                                             : llm.max_model_len();
  beast::error_code ec;
  const auto address = asio::ip::make_address(opts.host, ec);
  if (ec) return invalid_argument("--host: '" + opts.host + "' is not an IP address");
  {
    tcp::acceptor acceptor(*io);
    const tcp::endpoint ep(address, opts.port);
    acceptor.open(ep.protocol(), ec);
    if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor.bind(ep, ec);
    if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      return Status(StatusCode::kUnavailable, "cannot listen on " + opts.host + ":" +
                                                  std::to_string(opts.port) + ": " + ec.message());
    }
    asio::signal_set signals(*io, SIGTERM, SIGINT);
    signals.async_wait([&](const beast::error_code& e, int) {
      if (!e) asio::co_spawn(*io, drain(acceptor, ctx), report_exception);
    });
    asio::co_spawn(*io, accept_loop(acceptor, ctx), report_exception);
    on_listening(acceptor.local_endpoint().port());
    io->run();
  }
  // No engine event may be posted to the io_context once it is gone.
  llm.abort_all();
  io.reset();
  return Status();
}

}  // namespace di::server
