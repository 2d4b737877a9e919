// The route table: method + path -> handler, API-key check on /v1/*, and the small endpoints
// (/v1/models, /health, /metrics, /tokenize, /detokenize). Generation lives in generation.h.
#pragma once

#include <boost/asio/awaitable.hpp>

#include "server/http_io.h"

namespace di::server {

// Answers one request; the route name is for /metrics.
boost::asio::awaitable<Outcome> dispatch(HttpStream& stream,
                                         const HttpRequest& req,
                                         ServerContext& ctx,
                                         std::string& route);

}  // namespace di::server
