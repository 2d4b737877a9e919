// A small HTTP/1.1 client for our own tools (`deepinfer bench serve`, `deepinfer chat --url`):
// one POST whose response is read as server-sent events (or as one body when the server answers
// without SSE). Boost.Beast coroutines, so a benchmark can hold thousands of streams on one thread.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <functional>
#include <string>
#include <string_view>

#include "util/status.h"

namespace di::server {

struct HttpUrl {
  std::string host;
  std::string port;
  std::string base_path;  // e.g. "" or "/v1" (without the trailing slash)
};
// "http://host:port[/path]". Errors: another scheme, no host.
Expected<HttpUrl> parse_http_url(std::string_view url);

struct SseResult {
  int status = 0;        // HTTP status
  std::string body;      // the body when it was not an event stream (errors)
  bool done = false;     // "data: [DONE]" arrived
  bool stopped = false;  // on_event asked to stop (the client hung up on purpose)
};

// POSTs `json_body` to url.base_path + path and calls on_event with each event's data (without
// "data: "); on_event returns false to hang up. Transport errors are a non-OK status.
boost::asio::awaitable<Expected<SseResult>> post_sse(
    const HttpUrl& url,
    const std::string& path,
    const std::string& json_body,
    const std::string& api_key,
    const std::function<bool(std::string_view data)>& on_event);

}  // namespace di::server
