#include "server/http_io.h"

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/chunk_encode.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/serializer.hpp>
#include <boost/beast/http/write.hpp>
#include <chrono>

#include "api/openai_response.h"

namespace di::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

namespace {

const char* error_type(int status) {
  switch (status) {
    case 400:
    case 413:
    case 422:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 405:
      return "invalid_request_error";
    case 429:
      return "rate_limit_error";
    case 503:
      return "service_unavailable";
    default:
      return "server_error";
  }
}

const char* error_code(int status) {
  switch (status) {
    case 401:
      return "invalid_api_key";
    case 404:
      return "not_found";
    case 413:
      return "request_too_large";
    case 429:
      return "server_overloaded";
    case 503:
      return "service_unavailable";
    default:
      return "";
  }
}

}  // namespace

asio::awaitable<bool> write_response(HttpStream& stream,
                                     const HttpRequest& req,
                                     int status,
                                     std::string_view content_type,
                                     std::string body,
                                     const ServerContext& ctx) {
  http::response<http::string_body> res{static_cast<http::status>(status), req.version()};
  res.set(http::field::server, "deepinfer");
  res.set(http::field::content_type, content_type);
  res.keep_alive(req.keep_alive() && !ctx.draining);
  res.body() = std::move(body);
  res.prepare_payload();
  beast::error_code ec;
  stream.expires_after(std::chrono::seconds(ctx.opts.write_timeout_s));
  co_await http::async_write(stream, res, asio::redirect_error(asio::use_awaitable, ec));
  stream.expires_never();
  co_return !ec;
}

asio::awaitable<Outcome> write_json(HttpStream& stream,
                                    const HttpRequest& req,
                                    int status,
                                    std::string body,
                                    const ServerContext& ctx) {
  const bool ok =
      co_await write_response(stream, req, status, "application/json", std::move(body), ctx);
  co_return Outcome{status, ok && req.keep_alive() && !ctx.draining};
}

std::string error_json(int status, const std::string& message, const std::string& param) {
  return api::dump_json(api::error_body(message, error_type(status), error_code(status), param));
}

asio::awaitable<Outcome> write_error(HttpStream& stream,
                                     const HttpRequest& req,
                                     int status,
                                     const std::string& message,
                                     const std::string& param,
                                     const ServerContext& ctx) {
  co_return co_await write_json(stream, req, status, error_json(status, message, param), ctx);
}

asio::awaitable<bool> write_sse_header(HttpStream& stream,
                                       const HttpRequest& req,
                                       const ServerContext& ctx) {
  http::response<http::empty_body> res{http::status::ok, req.version()};
  res.set(http::field::server, "deepinfer");
  res.set(http::field::content_type, "text/event-stream");
  res.set(http::field::cache_control, "no-cache");
  res.keep_alive(req.keep_alive());
  res.chunked(true);
  http::response_serializer<http::empty_body> sr{res};
  beast::error_code ec;
  stream.expires_after(std::chrono::seconds(ctx.opts.write_timeout_s));
  co_await http::async_write_header(stream, sr, asio::redirect_error(asio::use_awaitable, ec));
  stream.expires_never();
  co_return !ec;
}

asio::awaitable<bool> write_sse_events(HttpStream& stream,
                                       const std::vector<std::string>& payloads,
                                       const ServerContext& ctx) {
  if (payloads.empty()) co_return true;
  std::string data;
  for (const std::string& p : payloads) {
    data += "data: ";
    data += p;
    data += "\n\n";
  }
  beast::error_code ec;
  stream.expires_after(std::chrono::seconds(ctx.opts.write_timeout_s));
  co_await asio::async_write(stream, http::make_chunk(asio::buffer(data)),
                             asio::redirect_error(asio::use_awaitable, ec));
  stream.expires_never();
  co_return !ec;
}

asio::awaitable<bool> write_sse_end(HttpStream& stream, const ServerContext& ctx) {
  // (A named vector: GCC 12 miscompiles braced initializer lists inside coroutines.)
  std::vector<std::string> done;
  done.push_back("[DONE]");
  if (!co_await write_sse_events(stream, done, ctx)) co_return false;
  beast::error_code ec;
  stream.expires_after(std::chrono::seconds(ctx.opts.write_timeout_s));
  co_await asio::async_write(stream, http::make_chunk_last(),
                             asio::redirect_error(asio::use_awaitable, ec));
  stream.expires_never();
  co_return !ec;
}

}  // namespace di::server
