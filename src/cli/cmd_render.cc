// The render subcommand (CLI11 parsing; request file -> ids and text on stdout).
#include "cli/cmd_render.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "recipe/chat/chat_request_json.h"
#include "recipe/chat/render_v41.h"
#include "recipe/tokenizer/tokenizer.h"

namespace di::cli {

int run_render_command(int argc, char** argv) {
  CLI::App app{"Render an OpenAI chat request (JSON) into a DeepSeek V4.1 prompt.", "render"};
  std::string tokenizer_path;
  std::string request_path;
  bool thinking_on = false;
  bool thinking_off = false;
  std::string effort;
  app.add_option("--tokenizer", tokenizer_path, "tokenizer.json file")->required();
  app.add_option("--request", request_path, "chat request JSON file (OpenAI shape)")->required();
  auto* on = app.add_flag("--thinking", thinking_on, "thinking mode (default: the request's)");
  app.add_flag("--no-thinking", thinking_off, "chat mode")->excludes(on);
  app.add_option("--effort", effort, "reasoning effort: 1..100 or low|high|xhigh|max");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return 0;
  } catch (const CLI::ParseError& e) {
    std::cerr << "render: " << e.what() << "\n" << app.help();
    return 2;
  }

  if (app.count("--effort")) {
    if (const auto n = recipe::parse_reasoning_effort(effort); !n) {
      std::cerr << "render: --effort " << effort << ": expected 1..100 or low|high|xhigh|max\n";
      return 2;
    }
  }
  std::ifstream in(request_path, std::ios::binary);
  if (!in) {
    std::cerr << "render: --request " << request_path << ": cannot open\n";
    return 2;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  auto req = recipe::parse_chat_request_json(ss.str());
  if (!req) {
    std::cerr << "render: --request " << request_path << ": " << req.status().to_string() << "\n";
    return 2;
  }
  if (thinking_on || thinking_off) req->thinking = thinking_on;
  if (app.count("--effort")) req->reasoning_effort = effort;

  auto tok = recipe::Tokenizer::from_file(tokenizer_path);
  if (!tok) {
    std::cerr << "render: --tokenizer " << tokenizer_path << ": " << tok.status().to_string()
              << "\n";
    return 2;
  }
  auto prompt = recipe::render_chat(*req, *tok);
  if (!prompt) {
    std::cerr << "render: " << prompt.status().to_string() << "\n";
    return 2;
  }
  std::string out = "[";
  for (size_t i = 0; i < prompt->ids.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(prompt->ids[i]);
  }
  out += "]\n";
  out += prompt->text;
  out += "\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

}  // namespace di::cli
