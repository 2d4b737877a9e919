// deepinfer chat --url URL | --model DIR: an interactive terminal chat (issue #5 item 7). Each
// line you type is a user turn; the reply streams as it is generated, reasoning dimmed, then the
// content. --url talks to a running `deepinfer serve` (any OpenAI-compatible server that sends
// reasoning_content); --model runs the engine in-process through api::AsyncLLM. Commands:
// /reset (forget the conversation), /exit (or end of input).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <cstdio>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "api/async_llm.h"
#include "api/openai_request.h"
#include "api/openai_response.h"
#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/parse_flags.h"
#include "recipe/parse/response_parser.h"
#include "server/sse_client.h"

namespace di::cli {

namespace {

using nlohmann::json;

// Receives reply pieces as they arrive.
using OnPiece = std::function<void(const std::string& reasoning, const std::string& content)>;
// Sends one chat request (an OpenAI body) and streams the reply.
using Backend = std::function<Status(const json& body, const OnPiece& on_piece)>;

Backend url_backend(server::HttpUrl url, std::string api_key) {
  return [url = std::move(url), api_key = std::move(api_key)](const json& body,
                                                              const OnPiece& on_piece) -> Status {
    boost::asio::io_context io(1);
    Expected<server::SseResult> result = internal_error("no result");
    const std::string text = body.dump();
    auto on_event = [&](std::string_view data) {
      const json j = json::parse(data, nullptr, false);
      if (!j.is_object() || !j.contains("choices") || !j["choices"].is_array()) return true;
      for (const json& c : j["choices"]) {
        const json d = c.value("delta", json::object());
        const json r = d.value("reasoning_content", json(""));
        const json t = d.value("content", json(""));
        on_piece(r.is_string() ? r.get<std::string>() : "",
                 t.is_string() ? t.get<std::string>() : "");
      }
      return true;
    };
    boost::asio::co_spawn(
        io,
        [&]() -> boost::asio::awaitable<void> {
          result = co_await server::post_sse(url, "/chat/completions", text, api_key, on_event);
        },
        boost::asio::detached);
    io.run();
    if (!result) return result.status();
    if (result->status != 200) {
      return Status(StatusCode::kUnavailable,
                    "HTTP " + std::to_string(result->status) + ": " + result->body);
    }
    return Status();
  };
}

Backend local_backend(api::AsyncLLM& llm) {
  return [&llm](const json& body, const OnPiece& on_piece) -> Status {
    DI_ASSIGN_OR_RETURN(
        api::OpenAIRequest r,
        api::parse_openai_body(body, api::OpenAIEndpoint::kChatCompletions, {}, "local"));
    DI_ASSIGN_OR_RETURN(std::vector<int32_t> ids, llm.llm().prompt_ids(r.prompt));
    engine::Queue<api::StreamEvent> events;
    llm.submit(
        std::move(ids), r.params, [&events](api::StreamEvent&& ev) { events.push(std::move(ev)); },
        api::reply_starts_in_reasoning(r.prompt));
    recipe::ResponseParser parser({api::reply_starts_in_reasoning(r.prompt), {}});
    auto emit = [&](const std::vector<recipe::Delta>& ds) {
      for (const recipe::Delta& d : ds) on_piece(d.reasoning_content, d.content);
    };
    for (;;) {
      auto ev = events.pop_for(std::chrono::milliseconds(100));
      if (!ev) continue;
      for (const api::ChoiceDelta& d : ev->choices) emit(parser.push(d.text));
      if (ev->done) {
        emit(parser.finish());
        return ev->error;
      }
    }
  };
}

int chat_loop(const Backend& backend, const json& base) {
  const bool tty = isatty(STDOUT_FILENO);
  const char* dim = tty ? "\033[2m" : "";
  const char* reset = tty ? "\033[0m" : "";
  json messages = json::array();
  std::string line;
  for (;;) {
    std::printf("%s> ", tty ? "\n" : "");
    std::fflush(stdout);
    if (!std::getline(std::cin, line) || line == "/exit") break;
    if (line == "/reset") {
      messages = json::array();
      continue;
    }
    if (line.empty()) continue;
    messages.push_back({{"role", "user"}, {"content", line}});
    json body = base;
    body["messages"] = messages;
    body["stream"] = true;
    std::string reasoning, content;
    bool in_reasoning = false;
    Status s = backend(body, [&](const std::string& r, const std::string& c) {
      if (!r.empty()) {
        if (!in_reasoning) std::printf("%s", dim);
        in_reasoning = true;
        reasoning += r;
        std::fwrite(r.data(), 1, r.size(), stdout);
      }
      if (!c.empty()) {
        if (in_reasoning) std::printf("%s\n", reset);
        in_reasoning = false;
        content += c;
        std::fwrite(c.data(), 1, c.size(), stdout);
      }
      std::fflush(stdout);
    });
    if (in_reasoning) std::printf("%s", reset);
    std::printf("\n");
    if (!s.ok()) {
      std::fprintf(stderr, "deepinfer chat: %s\n", s.message().c_str());
      messages.erase(messages.size() - 1);
      continue;
    }
    json reply = {{"role", "assistant"}, {"content", content}};
    if (!reasoning.empty()) reply["reasoning_content"] = reasoning;
    messages.push_back(std::move(reply));
  }
  return 0;
}

}  // namespace

int run_chat_command(int argc, char** argv) {
  CLI::App app{"Interactive chat in the terminal (streaming; reasoning dimmed)", "chat"};
  std::string url, dir, api_key, model_name = "deepinfer", effort;
  int max_tokens = 512;
  bool no_thinking = false;
  api::LLMOptions opts;
  auto* url_opt = app.add_option("--url", url, "a server's OpenAI base URL, e.g. http://h:8000/v1");
  app.add_option("--model", dir, "checkpoint folder: run the engine in-process")->excludes(url_opt);
  app.add_option("--api-key", api_key, "sent to --url as a bearer token");
  app.add_option("--served-model-name", model_name, "model name sent to --url")
      ->capture_default_str();
  app.add_option("--max-tokens", max_tokens, "most tokens per reply")->check(CLI::PositiveNumber);
  app.add_option("--reasoning-effort", effort, "low | high | max | none");
  app.add_flag("--no-thinking", no_thinking, "answer without reasoning");
  add_engine_flags(app, opts);
  DI_PARSE_FLAGS(app, argc, argv);
  json base = {{"model", model_name}, {"max_tokens", max_tokens}};
  if (no_thinking) base["chat_template_kwargs"] = {{"thinking", false}};
  if (!effort.empty()) base["reasoning_effort"] = effort;
  if (!url.empty()) {
    auto parsed = server::parse_http_url(url);
    if (!parsed) {
      std::cerr << "deepinfer chat: " << parsed.status().message() << "\n";
      return 2;
    }
    return chat_loop(url_backend(*parsed, api_key), base);
  }
  if (dir.empty()) {
    std::cerr << "deepinfer chat: give --url or --model\n";
    return 2;
  }
  auto llm = api::AsyncLLM::create(dir, opts);
  if (!llm) {
    std::cerr << "deepinfer chat: " << llm.status().to_string() << "\n";
    return 2;
  }
  base.erase("model");
  return chat_loop(local_backend(**llm), base);
}

}  // namespace di::cli
