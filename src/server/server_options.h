// Options of `deepinfer serve` that belong to the HTTP side (engine options are api::LLMOptions).
#pragma once

#include <cstdint>
#include <string>

namespace di::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8000;  // 0: any free port (printed on start-up)
  std::string api_key;   // empty: no authentication
  std::string served_model_name = "deepinfer";
  std::string model_dir;      // reported by /v1/models as "root"
  int64_t max_model_len = 0;  // 0: the engine's limit (max_seq_len and the state pool)
  // Generation requests held at once (running + waiting). Past it new ones get 429; the default
  // is set from --max-num-seqs by the CLI.
  int64_t max_pending = 1024;
  double drain_timeout_s = 30;  // SIGTERM: in-flight work gets this long, then is cancelled
  int idle_timeout_s = 60;      // keep-alive connections idle longer are closed
  int write_timeout_s = 60;     // a client that reads nothing for this long is dropped
  uint64_t max_body_bytes = 32 << 20;
};

}  // namespace di::server
