// V4.1 prompt rendering (see render_v41.h). The steps mirror the reference encoder: tools go into
// the first system message (one is inserted if there is none), tool messages are merged into a
// user turn as <tool_result> blocks in call order, reasoning before the last user turn is dropped
// unless tools are present, then each message is rendered with its transition tokens.
#include "recipe/chat/render_v41.h"

#include <algorithm>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "recipe/chat/prompt_builder.h"
#include "recipe/chat/py_json.h"

namespace di::recipe {
namespace {

using OJson = nlohmann::ordered_json;

constexpr std::string_view kBos = "<｜begin▁of▁sentence｜>";
constexpr std::string_view kEos = "<｜end▁of▁sentence｜>";
constexpr std::string_view kSystem = "<｜System｜>";
constexpr std::string_view kUser = "<｜User｜>";
constexpr std::string_view kAssistant = "<｜Assistant｜>";
constexpr std::string_view kThink = "<think>";
constexpr std::string_view kEndThink = "</think>";
constexpr std::string_view kDsml = "｜DSML｜";

// The reference's tool block (its template with the V4.1 tag names filled in). Marker spellings
// in it are control tokens, as when the reference tokenizes its prompt.
constexpr std::string_view kToolsHead =
    "## Tools\n\nYou have access to a set of tools to help answer the user's question. You can "
    "invoke tools by writing a \"<｜DSML｜ calls>\" block like the following:\n\n"
    "<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"$TOOL_NAME\">\n"
    "<｜DSML｜ parameter name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE"
    "</｜DSML｜ parameter>\n...\n</｜DSML｜ invoke>\n<｜DSML｜ invoke name=\"$TOOL_NAME2\">\n...\n"
    "</｜DSML｜ invoke>\n</｜DSML｜ calls>\n\n"
    "String parameters should be specified as is and set `string=\"true\"`. For all other types "
    "(numbers, booleans, arrays, objects), pass the value in JSON format and set "
    "`string=\"false\"`.\n\n"
    "If thinking_mode is enabled (triggered by <think>), you MUST output your complete reasoning "
    "inside <think>...</think> BEFORE any tool calls or final response.\n\n"
    "Otherwise, output directly after </think> with tool calls or final response.\n\n"
    "### Available Tool Schemas\n\n";
constexpr std::string_view kToolsTail =
    "\n\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke "
    "tool calls.\n";

const std::vector<std::string_view>& template_markers() {
  static const std::vector<std::string_view> m = {kDsml, kThink, kEndThink};
  return m;
}

struct Block {
  bool tool_result = false;
  std::string text;
  std::string tool_use_id;
};

// A message after tool merging: user turns carry blocks; others point at the request message.
struct Msg {
  std::string role;
  const ChatMessage* src = nullptr;  // null for merged user turns and an inserted system message
  std::vector<Block> blocks;
  bool has_tools = false;
  bool drop_reasoning = false;
};

std::string at(size_t i) {
  return "messages[" + std::to_string(i) + "]";
}

Status validate(const ChatRequest& req) {
  if (req.messages.empty()) return invalid_argument("messages: must not be empty");
  for (size_t i = 0; i < req.tools.size(); ++i) {
    const auto& t = req.tools[i];
    if (!t.is_object() || !t.contains("function") || !t["function"].is_object() ||
        !t["function"].contains("name") || !t["function"]["name"].is_string()) {
      return invalid_argument("tools[" + std::to_string(i) +
                              "].function: expected an object with a string name");
    }
  }
  bool calls_open = false;  // the last non-tool message was an assistant with tool calls
  for (size_t i = 0; i < req.messages.size(); ++i) {
    const auto& m = req.messages[i];
    if (m.role == "tool") {
      if (!calls_open) {
        return invalid_argument(at(i) +
                                ".role: tool message without a preceding assistant tool call");
      }
      continue;
    }
    if (m.role != "system" && m.role != "user" && m.role != "assistant") {
      return invalid_argument(at(i) + ".role: unknown role '" + m.role +
                              "' (expected system, user, assistant or tool)");
    }
    for (size_t j = 0; j < m.tool_calls.size(); ++j) {
      if (m.role != "assistant") {
        return invalid_argument(at(i) + ".tool_calls: only assistant messages make tool calls");
      }
      if (m.tool_calls[j].name.empty()) {
        return invalid_argument(at(i) + ".tool_calls[" + std::to_string(j) +
                                "].function.name: must not be empty");
      }
    }
    calls_open = m.role == "assistant" && !m.tool_calls.empty();
  }
  return {};
}

// Tools into the first system message; tool messages (and adjacent user messages) merged into one
// user turn; tool results ordered like the calls of the latest assistant with tool calls.
std::vector<Msg> normalize(const ChatRequest& req) {
  std::vector<Msg> in;
  for (const auto& m : req.messages) in.push_back(Msg{m.role, &m, {}, false, false});
  if (!req.tools.empty()) {
    auto sys = std::find_if(in.begin(), in.end(), [](const Msg& m) { return m.role == "system"; });
    if (sys == in.end()) sys = in.insert(in.begin(), Msg{"system", nullptr, {}, false, false});
    sys->has_tools = true;
  }
  std::vector<Msg> out;
  for (auto& m : in) {
    if (m.role == "tool" || m.role == "user") {
      Block b{m.role == "tool", m.src->content, m.role == "tool" ? m.src->tool_call_id : ""};
      if (!out.empty() && out.back().role == "user") {
        out.back().blocks.push_back(std::move(b));
      } else {
        out.push_back(Msg{"user", nullptr, {std::move(b)}, false, false});
      }
    } else {
      out.push_back(std::move(m));
    }
  }
  std::map<std::string, size_t> order;  // call id -> position in the latest assistant's calls
  for (auto& m : out) {
    if (m.role == "assistant" && !m.src->tool_calls.empty()) {
      order.clear();
      for (size_t k = 0; k < m.src->tool_calls.size(); ++k) {
        if (!m.src->tool_calls[k].id.empty()) order.emplace(m.src->tool_calls[k].id, k);
      }
    } else if (m.role == "user" && !order.empty()) {
      std::vector<Block> results;
      for (const auto& b : m.blocks) {
        if (b.tool_result) results.push_back(b);
      }
      if (results.size() < 2) continue;
      std::stable_sort(results.begin(), results.end(), [&](const Block& a, const Block& b) {
        const auto ia = order.find(a.tool_use_id), ib = order.find(b.tool_use_id);
        return (ia == order.end() ? 0 : ia->second) < (ib == order.end() ? 0 : ib->second);
      });
      size_t k = 0;
      for (auto& b : m.blocks) {
        if (b.tool_result) b = results[k++];
      }
    }
  }
  return out;
}

// The last message that opens an assistant turn: a user turn or a system message after index 0.
int last_user_index(const std::vector<Msg>& msgs) {
  for (int i = static_cast<int>(msgs.size()) - 1; i >= 0; --i) {
    if (msgs[i].role == "user" || (msgs[i].role == "system" && i > 0)) return i;
  }
  return -1;
}

void render_tools(PromptBuilder& b, const ChatRequest& req) {
  b.template_text(kToolsHead, template_markers());
  for (size_t i = 0; i < req.tools.size(); ++i) {
    if (i) b.text("\n");
    b.text(py_json_dumps(req.tools[i]["function"]));
  }
  b.template_text(kToolsTail, template_markers());
}

// The call's arguments as an object: JSON text (also double-encoded) that holds an object, else
// {"arguments": <the original string>}, like the reference.
OJson arguments_object(const std::string& arguments_json) {
  OJson v = arguments_json;
  for (int k = 0; k < 2 && v.is_string(); ++k) {
    OJson parsed = OJson::parse(v.get_ref<const std::string&>(), nullptr, false);
    if (parsed.is_discarded()) break;
    v = std::move(parsed);
  }
  if (v.is_object()) return v;
  OJson wrapped = OJson::object();
  wrapped["arguments"] = arguments_json;
  return wrapped;
}

void render_tool_calls(PromptBuilder& b, const std::vector<ChatToolCall>& calls) {
  auto open = [&](std::string_view tag) {
    b.text("<");
    b.control(kDsml);
    b.text(tag);
  };
  auto close = [&](std::string_view tag) {
    b.text("</");
    b.control(kDsml);
    b.text(tag);
  };
  b.text("\n\n");
  open(" calls>\n");
  for (size_t i = 0; i < calls.size(); ++i) {
    if (i) b.text("\n");
    open(" invoke name=\"");
    b.text(calls[i].name);
    b.text("\">\n");
    bool first = true;
    const OJson args = arguments_object(calls[i].arguments_json);
    for (const auto& [key, value] : args.items()) {
      if (!first) b.text("\n");
      first = false;
      open(" parameter name=\"");
      b.text(key);
      b.text(value.is_string() ? "\" string=\"true\">" : "\" string=\"false\">");
      b.text(value.is_string() ? value.get_ref<const std::string&>() : py_json_dumps(value));
      close(" parameter>");
    }
    b.text("\n");
    close(" invoke>");
  }
  b.text("\n");
  close(" calls>");
}

}  // namespace

Expected<int> parse_reasoning_effort(std::string_view effort) {
  if (effort == "low") return 25;
  if (effort == "high") return 50;
  if (effort == "xhigh") return 75;
  if (effort == "max") return 100;
  int n = 0;
  bool ok = !effort.empty() && effort.size() <= 3;
  for (const char c : effort) {
    ok = ok && c >= '0' && c <= '9';
    if (ok) n = n * 10 + (c - '0');
  }
  if (!ok || n < 1 || n > 100) {
    return invalid_argument("reasoning_effort: '" + std::string(effort) +
                            "' is not low, high, xhigh, max or an integer in 1..100");
  }
  return n;
}

Expected<RenderedPrompt> render_chat(const ChatRequest& req, const Tokenizer& tokenizer) {
  DI_RETURN_IF_ERROR(validate(req));
  DI_ASSIGN_OR_RETURN(const int effort, parse_reasoning_effort(req.reasoning_effort));
  std::vector<Msg> msgs = normalize(req);
  const bool thinking = req.thinking;
  const bool drop = req.drop_thinking && req.tools.empty();
  const int last_user = last_user_index(msgs);

  PromptBuilder b(tokenizer);
  b.control(kBos);
  const int n = static_cast<int>(msgs.size());
  for (int i = 0; i < n; ++i) {
    const Msg& m = msgs[i];
    const bool is_last = i == n - 1;
    if (i == 0 && (thinking || m.role == "system")) b.control(kSystem);
    if (i == 0 && thinking) {
      b.text("Reasoning Effort: " + std::to_string(effort) +
             " (range 1-100, the higher the value, the more thorough the reasoning)\n\n");
    }
    if (m.role == "system") {
      if (i > 0) b.control(kSystem);
      if (m.src) b.text(m.src->content);
      if (m.has_tools) {
        b.text("\n\n");
        render_tools(b, req);
      }
    } else if (m.role == "user") {
      b.control(kUser);
      for (size_t k = 0; k < m.blocks.size(); ++k) {
        if (k) b.text("\n\n");
        if (m.blocks[k].tool_result) b.text("<tool_result>");
        b.text(m.blocks[k].text);
        if (m.blocks[k].tool_result) b.text("</tool_result>");
      }
    } else {  // assistant
      if (thinking && (!drop || i > last_user)) {
        b.text(m.src->reasoning_content);
        b.control(kEndThink);
      }
      b.text(m.src->content);
      if (!m.src->tool_calls.empty()) render_tool_calls(b, m.src->tool_calls);
      b.control(kEos);
    }
    if (is_last && !req.add_generation_prompt) break;
    if (!is_last && msgs[i + 1].role != "assistant") continue;
    if (m.role == "user" || (m.role == "system" && i > 0) || is_last) {
      b.control(kAssistant);
      b.control(thinking && (!drop || i >= last_user) ? kThink : kEndThink);
    }
  }
  return b.finish();
}

}  // namespace di::recipe
