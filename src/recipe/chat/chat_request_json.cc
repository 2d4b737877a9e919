// OpenAI chat request JSON -> ChatRequest (see chat_request_json.h).
#include "recipe/chat/chat_request_json.h"

#include <string>

namespace di::recipe {
namespace {

using OJson = nlohmann::ordered_json;

Status bad(const std::string& field, const std::string& what) {
  return invalid_argument(field + ": " + what);
}

// A string field that may be absent or null.
Status get_string(const OJson& obj, const char* key, const std::string& where, std::string* out) {
  if (!obj.contains(key) || obj[key].is_null()) return {};
  if (!obj[key].is_string()) return bad(where + "." + key, "expected a string");
  *out = obj[key].get<std::string>();
  return {};
}

// OpenAI content: a string, null, or a list of {"type":"text","text":...} parts (joined "\n\n").
Status get_content(const OJson& m, const std::string& where, std::string* out) {
  if (!m.contains("content") || m["content"].is_null()) return {};
  const OJson& c = m["content"];
  if (c.is_string()) {
    *out = c.get<std::string>();
    return {};
  }
  if (!c.is_array()) return bad(where + ".content", "expected a string or a list of parts");
  for (size_t j = 0; j < c.size(); ++j) {
    const std::string part = where + ".content[" + std::to_string(j) + "]";
    // (Not `value("type", "")`: it throws when "type" is present but not a string.)
    const bool text_part = c[j].is_object() && c[j].contains("type") && c[j]["type"] == "text";
    if (!text_part || !c[j].contains("text") || !c[j]["text"].is_string()) {
      return bad(part, "only {\"type\": \"text\", \"text\": ...} parts are supported");
    }
    if (j) *out += "\n\n";
    *out += c[j]["text"].get<std::string>();
  }
  return {};
}

Status get_tool_calls(const OJson& m, const std::string& where, std::vector<ChatToolCall>* out) {
  if (!m.contains("tool_calls") || m["tool_calls"].is_null()) return {};
  const OJson& calls = m["tool_calls"];
  if (!calls.is_array()) return bad(where + ".tool_calls", "expected a list");
  for (size_t j = 0; j < calls.size(); ++j) {
    const std::string at = where + ".tool_calls[" + std::to_string(j) + "]";
    const OJson& c = calls[j];
    if (!c.is_object() || !c.contains("function") || !c["function"].is_object()) {
      return bad(at + ".function", "expected an object");
    }
    ChatToolCall call;
    DI_RETURN_IF_ERROR(get_string(c, "id", at, &call.id));
    const OJson& f = c["function"];
    if (!f.contains("name") || !f["name"].is_string()) {
      return bad(at + ".function.name", "expected a string");
    }
    call.name = f["name"].get<std::string>();
    if (f.contains("arguments") && !f["arguments"].is_null()) {
      if (f["arguments"].is_string()) {
        call.arguments_json = f["arguments"].get<std::string>();
      } else if (f["arguments"].is_object()) {
        call.arguments_json = f["arguments"].dump();
      } else {
        return bad(at + ".function.arguments", "expected a JSON string or an object");
      }
    } else {
      call.arguments_json = "{}";
    }
    out->push_back(std::move(call));
  }
  return {};
}

Status get_effort(const OJson& v, const std::string& where, ChatRequest* req) {
  if (v.is_null()) return {};
  if (v.is_number_integer()) {
    req->reasoning_effort = std::to_string(v.get<int64_t>());
  } else if (v.is_string()) {
    req->reasoning_effort = v.get<std::string>();
    if (req->reasoning_effort == "none") {
      req->thinking = false;
      req->reasoning_effort = "high";
    }
  } else {
    return bad(where, "expected a string or an integer");
  }
  return {};
}

Status get_bool(const OJson& obj, const char* key, const std::string& where, bool* out) {
  if (!obj.contains(key) || obj[key].is_null()) return {};
  if (!obj[key].is_boolean()) return bad(where + "." + key, "expected true or false");
  *out = obj[key].get<bool>();
  return {};
}

}  // namespace

Expected<ChatRequest> parse_chat_request_json(std::string_view json_text) {
  const OJson j = OJson::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return invalid_argument("request: not valid JSON");
  if (!j.is_object()) return invalid_argument("request: expected a JSON object");
  ChatRequest req;
  if (!j.contains("messages") || !j["messages"].is_array()) {
    return bad("messages", "expected a list of messages");
  }
  for (size_t i = 0; i < j["messages"].size(); ++i) {
    const std::string where = "messages[" + std::to_string(i) + "]";
    const OJson& m = j["messages"][i];
    if (!m.is_object()) return bad(where, "expected an object");
    ChatMessage msg;
    if (!m.contains("role") || !m["role"].is_string()) return bad(where + ".role", "missing");
    msg.role = m["role"].get<std::string>();
    if (msg.role == "developer") msg.role = "system";
    DI_RETURN_IF_ERROR(get_content(m, where, &msg.content));
    DI_RETURN_IF_ERROR(get_string(m, "reasoning", where, &msg.reasoning_content));
    DI_RETURN_IF_ERROR(get_string(m, "reasoning_content", where, &msg.reasoning_content));
    DI_RETURN_IF_ERROR(get_tool_calls(m, where, &msg.tool_calls));
    DI_RETURN_IF_ERROR(get_string(m, "tool_call_id", where, &msg.tool_call_id));
    DI_RETURN_IF_ERROR(get_string(m, "name", where, &msg.name));
    req.messages.push_back(std::move(msg));
  }
  if (j.contains("tools") && !j["tools"].is_null()) {
    if (!j["tools"].is_array()) return bad("tools", "expected a list");
    for (size_t i = 0; i < j["tools"].size(); ++i) {
      const OJson& t = j["tools"][i];
      const std::string where = "tools[" + std::to_string(i) + "]";
      if (!t.is_object() || !t.contains("function") || !t["function"].is_object()) {
        return bad(where + ".function", "expected an object");
      }
      if (!t["function"].contains("name") || !t["function"]["name"].is_string()) {
        return bad(where + ".function.name", "expected a string");
      }
      req.tools.push_back(t);
    }
  }
  if (j.contains("reasoning_effort")) {
    DI_RETURN_IF_ERROR(get_effort(j["reasoning_effort"], "reasoning_effort", &req));
  }
  DI_RETURN_IF_ERROR(get_bool(j, "add_generation_prompt", "request", &req.add_generation_prompt));
  if (j.contains("chat_template_kwargs") && !j["chat_template_kwargs"].is_null()) {
    const OJson& k = j["chat_template_kwargs"];
    const std::string where = "chat_template_kwargs";
    if (!k.is_object()) return bad(where, "expected an object");
    DI_RETURN_IF_ERROR(get_bool(k, "enable_thinking", where, &req.thinking));
    DI_RETURN_IF_ERROR(get_bool(k, "thinking", where, &req.thinking));
    DI_RETURN_IF_ERROR(get_bool(k, "drop_thinking", where, &req.drop_thinking));
    if (k.contains("reasoning_effort")) {
      DI_RETURN_IF_ERROR(get_effort(k["reasoning_effort"], where + ".reasoning_effort", &req));
    }
  }
  return req;
}

}  // namespace di::recipe
