#include "server/routes.h"

#include <chrono>

#include "api/openai_response.h"
#include "recipe/chat/chat_request_json.h"
#include "server/generation.h"

namespace di::server {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using nlohmann::json;

namespace {

bool authorized(const HttpRequest& req, const ServerContext& ctx) {
  if (ctx.opts.api_key.empty()) return true;
  auto it = req.find(http::field::authorization);
  if (it == req.end()) return false;
  return std::string_view(it->value()) == "Bearer " + ctx.opts.api_key;
}

// A computed answer: a JSON body, or an error. Handlers that do not stream compute one in a plain
// function (GCC 12 mishandles braced JSON initializers inside coroutines).
struct Reply {
  int status = 200;
  std::string body;   // the JSON body when status is 200
  std::string param;  // the field an error is about
};

Reply error_reply(int status, std::string message, std::string param = "") {
  return Reply{status, std::move(message), std::move(param)};
}

Reply models(const ServerContext& ctx) {
  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  json m = {{"id", ctx.opts.served_model_name},  {"object", "model"},          {"created", now},
            {"owned_by", "deepinfer"},           {"root", ctx.opts.model_dir}, {"parent", nullptr},
            {"max_model_len", ctx.max_model_len}};
  return Reply{200, json{{"object", "list"}, {"data", {m}}}.dump(), ""};
}

// vLLM's /tokenize: {prompt} or {messages, ...chat fields} -> {count, max_model_len, tokens}.
Reply tokenize(const HttpRequest& req, const ServerContext& ctx) {
  const json body = json::parse(req.body(), nullptr, false);
  if (!body.is_object()) return error_reply(400, "body: must be a JSON object");
  api::Prompt prompt;
  if (body.contains("messages")) {
    auto chat = recipe::parse_chat_request_json(req.body());
    if (!chat) return error_reply(400, chat.status().message(), "messages");
    prompt.chat = std::move(chat).value();
  } else if (auto p = body.find("prompt"); p != body.end() && p->is_string()) {
    prompt.text = p->get<std::string>();
  } else {
    return error_reply(400, "body: needs 'prompt' (a string) or 'messages'", "prompt");
  }
  auto ids = ctx.llm.llm().prompt_ids(prompt);
  if (!ids) return error_reply(400, ids.status().message());
  json out = {{"count", ids->size()}, {"max_model_len", ctx.max_model_len}, {"tokens", *ids}};
  return Reply{200, out.dump(), ""};
}

Reply detokenize(const HttpRequest& req, const ServerContext& ctx) {
  const json body = json::parse(req.body(), nullptr, false);
  const recipe::Tokenizer* tok = ctx.llm.llm().tokenizer();
  auto it = body.is_object() ? body.find("tokens") : body.end();
  if (!body.is_object() || it == body.end() || !it->is_array()) {
    return error_reply(400, "body.tokens: must be an array of token ids", "tokens");
  }
  std::vector<int32_t> ids;
  for (const json& t : *it) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 ||
        (tok && t.get<int64_t>() >= tok->vocab_size())) {
      return error_reply(400, "body.tokens: holds an invalid token id", "tokens");
    }
    ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  if (!tok) return error_reply(400, "the model has no BPE tokenizer");
  return Reply{200, api::dump_json(json{{"prompt", tok->decode(ids)}}), ""};
}

asio::awaitable<Outcome> send(HttpStream& s, const HttpRequest& req, ServerContext& ctx, Reply r) {
  if (r.status != 200) co_return co_await write_error(s, req, r.status, r.body, r.param, ctx);
  co_return co_await write_json(s, req, 200, std::move(r.body), ctx);
}

}  // namespace

asio::awaitable<Outcome> dispatch(HttpStream& s,
                                  const HttpRequest& req,
                                  ServerContext& ctx,
                                  std::string& route) {
  std::string_view target(req.target().data(), req.target().size());
  target = target.substr(0, target.find('?'));
  const bool get = req.method() == http::verb::get;
  const bool post = req.method() == http::verb::post;
  route = "other";
  if (target == "/health") {
    route = "/health";
    if (ctx.draining) co_return co_await write_error(s, req, 503, "shutting down", "", ctx);
    co_return co_await write_json(s, req, 200, "{}", ctx);
  }
  if (target == "/metrics") {
    route = "/metrics";
    const bool ok = co_await write_response(s, req, 200, "text/plain; version=0.0.4",
                                            ctx.metrics.render(ctx.llm.stats()), ctx);
    co_return Outcome{200, ok && req.keep_alive()};
  }
  struct Route {
    std::string_view path;
    bool post;
  };
  static constexpr Route kRoutes[] = {{"/v1/chat/completions", true},
                                      {"/v1/completions", true},
                                      {"/v1/models", false},
                                      {"/tokenize", true},
                                      {"/detokenize", true}};
  const Route* found = nullptr;
  for (const Route& r : kRoutes) {
    if (r.path == target) found = &r;
  }
  if (!found) {
    co_return co_await write_error(s, req, 404, "Unknown route " + std::string(target), "", ctx);
  }
  route = std::string(found->path);
  if ((found->post && !post) || (!found->post && !get)) {
    co_return co_await write_error(s, req, 405, "Method not allowed for " + route, "", ctx);
  }
  if (!authorized(req, ctx)) {
    co_return co_await write_error(s, req, 401, "Incorrect API key provided.", "", ctx);
  }
  if (target == "/v1/chat/completions") {
    co_return co_await serve_generation(s, req, ctx, api::OpenAIEndpoint::kChatCompletions);
  }
  if (target == "/v1/completions") {
    co_return co_await serve_generation(s, req, ctx, api::OpenAIEndpoint::kCompletions);
  }
  if (target == "/v1/models") co_return co_await send(s, req, ctx, models(ctx));
  if (target == "/tokenize") co_return co_await send(s, req, ctx, tokenize(req, ctx));
  co_return co_await send(s, req, ctx, detokenize(req, ctx));
}

}  // namespace di::server
