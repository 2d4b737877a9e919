#include "server/sse_client.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

namespace di::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

Expected<HttpUrl> parse_http_url(std::string_view url) {
  constexpr std::string_view kScheme = "http://";
  if (url.substr(0, kScheme.size()) != kScheme) {
    return invalid_argument("--url: only http://HOST:PORT URLs are supported");
  }
  url.remove_prefix(kScheme.size());
  HttpUrl out;
  const size_t slash = url.find('/');
  std::string_view hostport = url.substr(0, slash);
  if (slash != std::string_view::npos) out.base_path = std::string(url.substr(slash));
  while (!out.base_path.empty() && out.base_path.back() == '/') out.base_path.pop_back();
  const size_t colon = hostport.rfind(':');
  out.host = std::string(hostport.substr(0, colon));
  out.port = colon == std::string_view::npos ? "80" : std::string(hostport.substr(colon + 1));
  if (out.host.empty()) return invalid_argument("--url: no host");
  return out;
}

namespace {

Status net_error(const char* what, const beast::error_code& ec) {
  return Status(StatusCode::kUnavailable, std::string(what) + ": " + ec.message());
}

// Splits complete events ("...\n\n") off `pending` and hands their data lines to on_event.
bool feed(std::string& pending,
          SseResult& r,
          const std::function<bool(std::string_view)>& on_event) {
  size_t end;
  while ((end = pending.find("\n\n")) != std::string::npos) {
    std::string_view ev(pending.data(), end);
    if (ev.substr(0, 6) == "data: ") {
      std::string_view data = ev.substr(6);
      if (data == "[DONE]") {
        r.done = true;
      } else if (!on_event(data)) {
        r.stopped = true;
        return false;
      }
    }
    pending.erase(0, end + 2);
  }
  return true;
}

}  // namespace

asio::awaitable<Expected<SseResult>> post_sse(
    const HttpUrl& url,
    const std::string& path,
    const std::string& json_body,
    const std::string& api_key,
    const std::function<bool(std::string_view)>& on_event) {
  auto ex = co_await asio::this_coro::executor;
  beast::error_code ec;
  tcp::resolver resolver(ex);
  auto endpoints = co_await resolver.async_resolve(url.host, url.port,
                                                   asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return net_error("resolve", ec);
  beast::tcp_stream stream(ex);
  co_await stream.async_connect(endpoints, asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return net_error("connect", ec);
  http::request<http::string_body> req{http::verb::post, url.base_path + path, 11};
  req.set(http::field::host, url.host);
  req.set(http::field::content_type, "application/json");
  if (!api_key.empty()) req.set(http::field::authorization, "Bearer " + api_key);
  req.body() = json_body;
  req.prepare_payload();
  co_await http::async_write(stream, req, asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return net_error("write", ec);

  beast::flat_buffer buffer;
  http::response_parser<http::buffer_body> parser;
  parser.body_limit(boost::none);
  co_await http::async_read_header(stream, buffer, parser,
                                   asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return net_error("read", ec);
  SseResult r;
  r.status = static_cast<int>(parser.get().result_int());
  const bool sse = parser.get()[http::field::content_type].starts_with("text/event-stream");
  std::string pending;
  char chunk[16384];
  while (!parser.is_done()) {
    parser.get().body().data = chunk;
    parser.get().body().size = sizeof(chunk);
    co_await http::async_read_some(stream, buffer, parser,
                                   asio::redirect_error(asio::use_awaitable, ec));
    if (ec == http::error::need_buffer) ec = {};
    if (ec) co_return net_error("read", ec);
    const size_t n = sizeof(chunk) - parser.get().body().size;
    if (!sse) {
      r.body.append(chunk, n);
      continue;
    }
    pending.append(chunk, n);
    if (!feed(pending, r, on_event)) break;  // hang up: the socket closes with `stream`
  }
  beast::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  co_return r;
}

}  // namespace di::server
