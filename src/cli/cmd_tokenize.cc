// The tokenize / detokenize subcommands (CLI11 parsing, stdin -> stdout).
#include "cli/cmd_tokenize.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/parse_flags.h"
#include "recipe/tokenizer/tokenizer.h"

namespace di::cli {
namespace {

using Json = nlohmann::json;

int parse(CLI::App& app, int argc, char** argv) {
  return parse_flags(app, argc, argv);
}

// Loads --tokenizer; prints the error naming the flag on failure.
std::optional<recipe::Tokenizer> load(const std::string& cmd, const std::string& path) {
  auto tok = recipe::Tokenizer::from_file(path);
  if (!tok) {
    std::cerr << cmd << ": --tokenizer " << path << ": " << tok.status().to_string() << "\n";
    return std::nullopt;
  }
  return std::move(tok).value();
}

void print_ids(const std::vector<int32_t>& ids) {
  std::string line = "[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) line += ',';
    line += std::to_string(ids[i]);
  }
  line += "]\n";
  std::fwrite(line.data(), 1, line.size(), stdout);
}

}  // namespace

int run_tokenize_command(int argc, char** argv) {
  CLI::App app{"Encode text from stdin into token ids (one JSON array per input).", "tokenize"};
  std::string tokenizer_path;
  bool jsonl = false;
  bool allow_special = false;
  app.add_option("--tokenizer", tokenizer_path, "tokenizer.json file")->required();
  app.add_flag("--jsonl", jsonl, "stdin holds one JSON string per line");
  app.add_flag("--allow-special", allow_special,
               "match added/special token spellings (default: plain text)");
  if (const int rc = parse(app, argc, argv); rc >= 0) return rc;
  const auto tok = load("tokenize", tokenizer_path);
  if (!tok) return 2;
  const auto allow = allow_special ? recipe::SpecialTokens::kAll : recipe::SpecialTokens::kNone;
  if (!jsonl) {
    const std::string text((std::istreambuf_iterator<char>(std::cin)), {});
    print_ids(tok->encode(text, allow));
    return 0;
  }
  std::string line;
  for (size_t line_no = 1; std::getline(std::cin, line); ++line_no) {
    const Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_string()) {
      std::cerr << "tokenize: stdin line " << line_no << ": expected a JSON string\n";
      return 1;
    }
    print_ids(tok->encode(j.get_ref<const std::string&>(), allow));
  }
  return 0;
}

int run_detokenize_command(int argc, char** argv) {
  CLI::App app{"Decode JSON arrays of token ids (one per line) from stdin.", "detokenize"};
  std::string tokenizer_path;
  bool jsonl = false;
  bool skip_special = false;
  app.add_option("--tokenizer", tokenizer_path, "tokenizer.json file")->required();
  app.add_flag("--jsonl", jsonl, "print one JSON string per line");
  app.add_flag("--skip-special", skip_special, "drop tokens marked special");
  if (const int rc = parse(app, argc, argv); rc >= 0) return rc;
  const auto tok = load("detokenize", tokenizer_path);
  if (!tok) return 2;
  std::string line;
  for (size_t line_no = 1; std::getline(std::cin, line); ++line_no) {
    if (line.empty()) continue;
    const Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    std::vector<int32_t> ids;
    bool ok = j.is_array();
    for (size_t i = 0; ok && i < j.size(); ++i) {
      ok = j[i].is_number_integer() && j[i].get<int64_t>() >= 0 && j[i].get<int64_t>() <= INT32_MAX;
      if (ok) ids.push_back(static_cast<int32_t>(j[i].get<int64_t>()));
    }
    if (!ok) {
      std::cerr << "detokenize: stdin line " << line_no << ": expected a JSON array of ids\n";
      return 1;
    }
    std::string text = tok->decode(ids, skip_special);
    if (jsonl) text = Json(text).dump() + "\n";
    std::fwrite(text.data(), 1, text.size(), stdout);
  }
  return 0;
}

}  // namespace di::cli
