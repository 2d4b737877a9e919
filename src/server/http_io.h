// The HTTP plumbing every handler shares (Boost.Beast over Asio, C++20 coroutines): the request
// and stream types, writing a JSON or text response, OpenAI-shaped errors, and SSE (chunked
// transfer, one "data: ..." event per chunk). Writes never throw: they return false when the
// client is gone or too slow, and the caller cancels its work.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "server/server_context.h"

namespace di::server {

using HttpRequest = boost::beast::http::request<boost::beast::http::string_body>;
using HttpStream = boost::beast::tcp_stream;

// A handled request: the status sent (for /metrics) and whether the connection may be reused.
struct Outcome {
  int status = 200;
  bool keep_alive = true;
};

boost::asio::awaitable<bool> write_response(HttpStream& stream,
                                            const HttpRequest& req,
                                            int status,
                                            std::string_view content_type,
                                            std::string body,
                                            const ServerContext& ctx);

boost::asio::awaitable<Outcome> write_json(HttpStream& stream,
                                           const HttpRequest& req,
                                           int status,
                                           std::string body,
                                           const ServerContext& ctx);

// OpenAI's error object with the type its status implies (400 invalid_request_error, 401
// authentication_error, 404 not_found_error, 429 rate_limit_error, 5xx server_error ...).
boost::asio::awaitable<Outcome> write_error(HttpStream& stream,
                                            const HttpRequest& req,
                                            int status,
                                            const std::string& message,
                                            const std::string& param,
                                            const ServerContext& ctx);
std::string error_json(int status, const std::string& message, const std::string& param = "");

// Server-sent events over chunked transfer encoding.
boost::asio::awaitable<bool> write_sse_header(HttpStream& stream,
                                              const HttpRequest& req,
                                              const ServerContext& ctx);
// One write carrying "data: <payload>\n\n" for each payload.
boost::asio::awaitable<bool> write_sse_events(HttpStream& stream,
                                              const std::vector<std::string>& payloads,
                                              const ServerContext& ctx);
boost::asio::awaitable<bool> write_sse_end(HttpStream& stream, const ServerContext& ctx);

}  // namespace di::server
