// deepinfer batch --model DIR --input in.jsonl --output out.jsonl [--max-num-seqs N] [sampling
// defaults]: the OpenAI Batch format offline (issue #4 item 7). Results are appended as they
// finish; a rerun with the same arguments skips every custom_id already in the output, so a
// killed run loses and duplicates nothing. Outputs do not depend on --max-num-seqs (the forward
// is batch-invariant and sampling is keyed by (seed, choice, position)).
#include <CLI/CLI.hpp>
#include <chrono>
#include <fstream>
#include <iostream>
#include <map>

#include "api/llm.h"
#include "api/openai_batch.h"
#include "cli/batch_files.h"
#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/parse_flags.h"

namespace di::cli {

namespace {

struct Work {
  std::vector<api::ParsedBatchLine> bad;  // error results still to write
  std::vector<api::BatchRequest> requests;
  int64_t num_lines = 0;
  int64_t num_done = 0;  // already in the output
};

Expected<Work> read_input(const std::string& path,
                          const api::BatchDefaults& defaults,
                          const std::set<std::string>& done) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return invalid_argument("--input " + path + ": cannot open");
  Work w;
  std::set<std::string> seen;
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    api::ParsedBatchLine p = api::parse_batch_line(line, n, defaults);
    if (!seen.insert(p.custom_id).second) {
      // Every result must be findable by its custom_id; a repeated one gets the line's id.
      p.custom_id = "line-" + std::to_string(n);
      p.request = invalid_argument("custom_id repeats an earlier line's");
      seen.insert(p.custom_id);
    }
    ++w.num_lines;
    if (done.contains(p.custom_id)) {
      ++w.num_done;
    } else if (p.request) {
      w.requests.push_back(std::move(p.request).value());
    } else {
      w.bad.push_back(std::move(p));
    }
  }
  return w;
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

int run_batch_command(int argc, char** argv) {
  CLI::App app{"Run an OpenAI Batch file (JSONL) offline", "batch"};
  std::string dir, input, output;
  api::LLMOptions opts;
  api::BatchDefaults defaults;
  api::GenerationParams& gp = defaults.params;
  uint64_t seed = 0;
  bool no_progress = false;
  app.add_option("--model", dir, "checkpoint folder")->required();
  app.add_option("--input", input, "requests, one JSON object per line")->required();
  app.add_option("--output", output, "results (appended; a rerun resumes)")->required();
  add_engine_flags(app, opts);
  app.add_option("--max-tokens", gp.max_tokens, "default max_tokens")->check(CLI::PositiveNumber);
  app.add_option("--temperature", gp.sampling.temperature, "default temperature (0: greedy)");
  app.add_option("--top-p", gp.sampling.top_p, "default top_p");
  app.add_option("--top-k", gp.sampling.top_k, "default top_k (0: off)");
  app.add_option("--min-p", gp.sampling.min_p, "default min_p");
  app.add_option("--presence-penalty", gp.sampling.presence_penalty, "default presence_penalty");
  app.add_option("--frequency-penalty", gp.sampling.frequency_penalty, "default frequency_penalty");
  app.add_option("--repetition-penalty", gp.sampling.repetition_penalty,
                 "default repetition_penalty");
  auto* seed_opt = app.add_option(
      "--seed", seed, "base seed: a request without one samples with hash(seed, custom_id)");
  app.add_option("--served-model-name", defaults.model_name, "model name in response bodies");
  app.add_flag("--no-progress", no_progress, "no progress bar on stderr");
  DI_PARSE_FLAGS(app, argc, argv);
  if (*seed_opt) defaults.seed = seed;
  if (Status s = engine::validate_sampling(gp.sampling); !s.ok()) {
    std::cerr << "deepinfer batch: " << s.message() << "\n";
    return 2;
  }
  std::set<std::string> done;
  auto work = read_input(input, defaults, {});
  if (!work) {
    std::cerr << "deepinfer batch: " << work.status().message() << "\n";
    return 2;
  }
  auto llm = api::LLM::create(dir, opts);
  if (!llm) {
    std::cerr << "deepinfer batch: " << llm.status().to_string() << "\n";
    return 2;
  }
  auto& engine = (*llm)->engine();
  std::cerr << engine::describe_capacity(engine.memory_plan(), engine.state_bytes()) << "\n";
  auto file = ResultFile::open(output, done);
  if (!file) {
    std::cerr << "deepinfer batch: " << file.status().message() << "\n";
    return 2;
  }
  work = read_input(input, defaults, done);
  if (!work) return 2;
  const int64_t created = unix_now();
  int64_t finished = 0, failed_writes = 0;
  ProgressBar bar(static_cast<int64_t>(work->requests.size() + work->bad.size()), !no_progress);
  auto write = [&](const std::string& line) {
    if (Status s = file->append(line); !s.ok()) {
      std::cerr << "\ndeepinfer batch: " << s.message() << "\n";
      ++failed_writes;
    }
    ++finished;
    bar.update(finished, engine.stats().num_generated_tokens);
  };
  for (const auto& b : work->bad) write(api::format_batch_error(b, b.request.status(), 400));
  std::vector<api::Prompt> prompts;
  std::vector<api::GenerationParams> params;
  for (const auto& r : work->requests) {
    prompts.push_back(r.prompt);
    params.push_back(r.params);
  }
  (*llm)->generate(prompts, params, [&](api::GenerationOutput&& out) {
    const api::BatchRequest& r = work->requests[out.index];
    if (out.status.ok()) {
      write(api::format_batch_result(r, out, (*llm)->tokenizer(), created));
    } else {
      api::ParsedBatchLine line;
      line.custom_id = r.custom_id;
      line.line_is_json = true;
      const int code = out.status.code() == StatusCode::kInvalidArgument ? 400 : 500;
      write(api::format_batch_error(line, out.status, code));
    }
  });
  bar.finish(finished, engine.stats().num_generated_tokens);
  std::cerr << "batch: " << work->num_lines << " lines, " << work->num_done << " already done, "
            << finished << " written (" << work->bad.size() << " bad lines)\n";
  return failed_writes ? 1 : 0;
}

}  // namespace di::cli
