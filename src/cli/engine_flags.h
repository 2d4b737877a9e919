// The engine flags shared by every command that runs the engine (batch, serve, chat, bench
// offline), the backend's among them.
#pragma once

#include <CLI/CLI.hpp>

#include "api/llm.h"
#include "cli/backend_flags.h"

namespace di::cli {

inline void add_engine_flags(CLI::App& app, api::LLMOptions& opts) {
  add_backend_flags(app, opts.backend);
  app.add_option("--max-num-seqs", opts.engine.max_num_seqs, "most sequences in flight")
      ->check(CLI::PositiveNumber);
  app.add_option("--max-num-batched-tokens", opts.engine.max_num_batched_tokens,
                 "most tokens in one forward")
      ->check(CLI::PositiveNumber);
  app.add_option("--kv-cache-bytes", opts.engine.kv_cache_bytes, "state pool byte budget")
      ->check(CLI::PositiveNumber);
  app.add_option("--threads", opts.num_threads, "CPU threads (default: all cores)");
  app.add_option("--replay-tail", opts.engine.replay_tail,
                 "bounded replay: late layers prefill only the last N prompt tokens "
                 "(default: window + DSpark block; 0: exact full prefill)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  app.add_flag_callback(
      "--exact-prefill", [&opts] { opts.engine.replay_tail = 0; }, "same as --replay-tail 0");
  app.add_flag_callback(
      "--no-async-scheduling", [&opts] { opts.engine.async_scheduling = false; },
      "run each forward on the calling thread instead of overlapping it with the caller's work");
  app.add_flag_callback(
      "--no-pending-tokens", [&opts] { opts.engine.pending_tokens = false; },
      "wait for each step's tokens before issuing the next step (by default a step whose "
      "tokens are all chosen on the backend feeds them to the next step there)");
  app.add_option(
         "--prefix-cache-snapshots", opts.engine.prefix_cache_snapshots,
         "prefix cache: window snapshots kept (default: 2 x --max-num-seqs, at most a quarter of "
         "--kv-cache-bytes)")
      ->check(CLI::NonNegativeNumber);
  app.add_flag_callback(
      "--no-prefix-cache", [&opts] { opts.engine.prefix_cache_snapshots = 0; },
      "turn prefix caching off (same as --prefix-cache-snapshots 0)");
}

}  // namespace di::cli
