// deepinfer bench offline --model DIR --num-prompts N --input-len I --output-len O: the engine's
// offline throughput through di::api::LLM on random token prompts (greedy, no early stop), with
// the step time split into schedule, forward and sample (issue #4 item 9). --shared-prefix-len
// and --turns shape the prompts like shared system prompts and multi-turn chats (each turn
// re-sends the conversation so far) to measure the prefix cache.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <random>

#include "api/llm.h"
#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/parse_flags.h"

namespace di::cli {

int run_bench_offline_command(int argc, char** argv) {
  CLI::App app{"Benchmark offline generation through the engine", "bench offline"};
  std::string dir;
  int num_prompts = 32, input_len = 64, output_len = 32, shared_prefix_len = 0, turns = 1;
  uint32_t seed = 1;
  api::LLMOptions opts;
  app.add_option("--model", dir, "checkpoint folder")->required();
  app.add_option("--num-prompts", num_prompts, "requests")->check(CLI::PositiveNumber);
  app.add_option("--input-len", input_len, "prompt tokens per request")->check(CLI::PositiveNumber);
  app.add_option("--output-len", output_len, "generated tokens per request")
      ->check(CLI::PositiveNumber);
  app.add_option("--shared-prefix-len", shared_prefix_len,
                 "the first N prompt tokens are the same in every request")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--turns", turns,
                 "turns per conversation: a turn's prompt is the previous prompt, its output and "
                 "--input-len new tokens")
      ->check(CLI::PositiveNumber);
  int warmup = 0;
  app.add_option("--warmup", warmup,
                 "requests of --input-len tokens and 8 output tokens run before the timing (a "
                 "device backend uploads its weights and records its graphs on first use); the "
                 "engine's step statistics start after them, the prefix cache's include them")
      ->check(CLI::NonNegativeNumber);
  add_engine_flags(app, opts);
  app.add_option("--seed", seed, "seed of the random prompts");
  DI_PARSE_FLAGS(app, argc, argv);
  auto llm = api::LLM::create(dir, opts);
  if (!llm) {
    std::cerr << "deepinfer bench offline: " << llm.status().to_string() << "\n";
    return 2;
  }
  auto& engine = (*llm)->engine();
  std::printf("%s\n",
              engine::describe_capacity(engine.memory_plan(), engine.state_bytes()).c_str());
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> tok(3, (*llm)->config().vocab_size - 1);
  std::vector<int32_t> shared;
  for (int i = 0; i < std::min(shared_prefix_len, input_len); ++i) shared.push_back(tok(rng));
  std::vector<api::Prompt> prompts(static_cast<size_t>(num_prompts));
  for (auto& p : prompts) {
    p.token_ids = shared;
    while (static_cast<int>(p.token_ids.size()) < input_len) p.token_ids.push_back(tok(rng));
  }
  api::GenerationParams gp;
  gp.max_tokens = output_len;
  gp.ignore_eos = true;
  if (warmup > 0) {
    std::vector<api::Prompt> warm(static_cast<size_t>(warmup));
    for (auto& p : warm) {
      while (static_cast<int>(p.token_ids.size()) < input_len) p.token_ids.push_back(tok(rng));
    }
    api::GenerationParams wp = gp;
    wp.max_tokens = 8;
    for (const auto& o : (*llm)->generate(warm, {wp})) {
      if (!o.status.ok()) {
        std::cerr << "deepinfer bench offline: warm-up: " << o.status.to_string() << "\n";
        return 1;
      }
    }
    engine.reset_stats();
  }
  const auto t0 = std::chrono::steady_clock::now();
  int64_t in_tokens = 0, out_tokens = 0;
  for (int turn = 0; turn < turns; ++turn) {
    auto outs = (*llm)->generate(prompts, {gp});
    for (const auto& o : outs) {
      if (!o.status.ok()) {
        std::cerr << "deepinfer bench offline: request " << o.index << ": " << o.status.to_string()
                  << "\n";
        return 1;
      }
      in_tokens += static_cast<int64_t>(o.prompt_token_ids.size());
      out_tokens += o.num_generated_tokens();
      auto& next = prompts[o.index].token_ids;
      next.insert(next.end(), o.choices[0].token_ids.begin(), o.choices[0].token_ids.end());
      for (int i = 0; i < input_len; ++i) next.push_back(tok(rng));
    }
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto& st = engine.stats();
  const double steps = static_cast<double>(std::max<int64_t>(1, st.num_steps));
  const double split = st.schedule_s + st.forward_s + st.sample_s;
  std::printf(
      "%d prompts x %d in / %d out, %d turn(s), shared prefix %d, max-num-seqs %d, "
      "max-num-batched-tokens %lld\n",
      num_prompts, input_len, output_len, turns, shared_prefix_len, opts.engine.max_num_seqs,
      static_cast<long long>(opts.engine.max_num_batched_tokens));
  std::printf("%.3f s: %.2f requests/s, %.1f input tokens/s, %.1f output tokens/s\n", s,
              num_prompts * turns / s, static_cast<double>(in_tokens) / s,
              static_cast<double>(out_tokens) / s);
  if (opts.engine.pending_tokens) {
    std::printf(
        "pending tokens: %lld of %lld steps issued before the previous step's tokens "
        "reached the host; step() waited %.3f ms/step for tokens\n",
        static_cast<long long>(st.num_pending_steps), static_cast<long long>(st.num_steps),
        1e3 * st.wait_s / steps);
  }
  if (opts.engine.async_scheduling && st.caller_s > 0) {
    std::printf(
        "async scheduling (worker thread): caller work %.3f ms/step, %.1f%% of it hidden behind "
        "the forward; step() waited %.3f ms/step\n",
        1e3 * st.caller_s / steps, 100.0 * st.overlapped_s / std::max(1e-12, st.caller_s),
        1e3 * st.wait_s / steps);
  }
  if (const auto* cache = engine.prefix_cache()) {
    const auto& pc = cache->stats();
    std::printf(
        "prefix cache: %.1f%% of looked-up tokens hit (%lld of %lld), %lld of %lld admissions "
        "hit; %lld prompt tokens computed\n",
        100.0 * static_cast<double>(pc.hit_tokens) /
            static_cast<double>(std::max<int64_t>(1, pc.query_tokens)),
        static_cast<long long>(pc.hit_tokens), static_cast<long long>(pc.query_tokens),
        static_cast<long long>(pc.num_hits), static_cast<long long>(pc.num_lookups),
        static_cast<long long>(st.num_prefill_tokens));
  } else {
    std::printf("prefix cache: off; %lld prompt tokens computed\n",
                static_cast<long long>(st.num_prefill_tokens));
  }
  std::printf(
      "%lld steps, per step: schedule %.3f ms (%.1f%%), forward %.3f ms (%.1f%%), "
      "sample %.3f ms (%.1f%%); %lld preemptions\n",
      static_cast<long long>(st.num_steps), 1e3 * st.schedule_s / steps,
      100 * st.schedule_s / split, 1e3 * st.forward_s / steps, 100 * st.forward_s / split,
      1e3 * st.sample_s / steps, 100 * st.sample_s / split,
      static_cast<long long>(st.num_preemptions));
  return 0;
}

}  // namespace di::cli
