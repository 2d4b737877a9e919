#include "api/tool_choice.h"

namespace di::api {

namespace {
Status bad(const std::string& what) {
  return invalid_argument("body.tool_choice: " + what);
}
}  // namespace

Expected<ToolChoice> parse_tool_choice(const nlohmann::json& body,
                                       const std::vector<nlohmann::ordered_json>& tools) {
  ToolChoice tc;
  if (auto p = body.find("parallel_tool_calls"); p != body.end() && !p->is_null()) {
    if (!p->is_boolean()) return invalid_argument("body.parallel_tool_calls: must be a boolean");
    tc.parallel = p->get<bool>();
  }
  auto it = body.find("tool_choice");
  if (it == body.end() || it->is_null()) return tc;
  const nlohmann::json& v = *it;
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (s == "auto") {
      tc.mode = ToolChoice::Mode::kAuto;
    } else if (s == "none") {
      tc.mode = ToolChoice::Mode::kNone;
    } else if (s == "required") {
      tc.mode = ToolChoice::Mode::kRequired;
    } else {
      return bad("'" + s + "' is not one of none, auto, required");
    }
  } else if (v.is_object()) {
    auto fn = v.find("function");
    if (v.value("type", nlohmann::json()) != "function" || fn == v.end() || !fn->is_object() ||
        !fn->contains("name") || !(*fn)["name"].is_string()) {
      return bad(
          "must be none, auto, required or {\"type\": \"function\", \"function\": "
          "{\"name\": ...}}");
    }
    tc.mode = ToolChoice::Mode::kNamed;
    tc.name = (*fn)["name"].get<std::string>();
  } else {
    return bad("must be a string or an object");
  }
  if (tools.empty()) return bad("is only allowed when tools are given");
  if (tc.mode == ToolChoice::Mode::kNamed) {
    bool found = false;
    for (const auto& t : tools) found = found || t["function"]["name"] == tc.name;
    if (!found) return bad("function '" + tc.name + "' is not among the tools");
  }
  return tc;
}

std::optional<StructuredOutput> tool_choice_output(
    const ToolChoice& choice, const std::vector<nlohmann::ordered_json>& tools) {
  const bool single_auto = choice.mode == ToolChoice::Mode::kAuto && !choice.parallel;
  if (choice.mode == ToolChoice::Mode::kNone ||
      (choice.mode == ToolChoice::Mode::kAuto && (!single_auto || tools.empty())))
    return std::nullopt;
  nlohmann::ordered_json spec = {{"tools", nlohmann::ordered_json::array()}};
  for (const auto& t : tools) {
    const auto& fn = t["function"];
    nlohmann::ordered_json entry = {{"name", fn["name"]}};
    if (fn.contains("parameters") && !fn["parameters"].is_null())
      entry["parameters"] = fn["parameters"];
    spec["tools"].push_back(std::move(entry));
  }
  spec["name"] = choice.mode == ToolChoice::Mode::kNamed ? nlohmann::ordered_json(choice.name)
                                                         : nlohmann::ordered_json();
  if (!choice.parallel) spec["single"] = true;
  if (single_auto) spec["optional"] = true;
  StructuredOutput so;
  so.kind = StructuredOutput::Kind::kToolCalls;
  so.text = spec.dump();
  return so;
}

}  // namespace di::api
