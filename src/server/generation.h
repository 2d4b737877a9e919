// POST /v1/chat/completions and /v1/completions: parse and validate the body (api/openai_request),
// render and tokenize, check the context length and the overload limit, submit to the AsyncLLM,
// then answer from its events, as one JSON body or as SSE. A failed write (client gone) aborts the
// request in the engine, which frees its state at the next step.
#pragma once

#include <boost/asio/awaitable.hpp>

#include "api/openai_request.h"
#include "server/http_io.h"

namespace di::server {

boost::asio::awaitable<Outcome> serve_generation(HttpStream& stream,
                                                 const HttpRequest& req,
                                                 ServerContext& ctx,
                                                 api::OpenAIEndpoint endpoint);

}  // namespace di::server
