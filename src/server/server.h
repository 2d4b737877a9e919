// The OpenAI-compatible HTTP server (issue #5): Boost.Beast on one Asio io_context whose thread
// runs every connection as a C++20 coroutine (no thread per connection), in front of an
// api::AsyncLLM whose engine loop runs on its own thread. See docs/server.md.
#pragma once

#include <cstdint>
#include <functional>

#include "api/async_llm.h"
#include "server/server_options.h"
#include "util/status.h"

namespace di::server {

// Serves until SIGTERM or SIGINT, then drains: stops accepting, lets in-flight requests finish
// for opts.drain_timeout_s, cancels what is left, and returns OK. `on_listening` gets the bound
// port (useful with port 0). Errors: the address cannot be bound.
Status run_server(api::AsyncLLM& llm,
                  const ServerOptions& opts,
                  const std::function<void(uint16_t port)>& on_listening);

}  // namespace di::server
