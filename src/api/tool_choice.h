// OpenAI chat `tool_choice`: "auto" (the default: the model may call tools), "none" (tools are
// rendered, as vLLM >= 0.10 does by default, but the reply is not parsed for tool calls: DSML
// markup stays content), "required" (one or more calls to the given tools) and
// {"type": "function", "function": {"name": N}} (one call to N). The last two become a
// structured output of kind kToolCalls (api/tool_call_grammar.h) that forces the V4.1 DSML
// tool-call block with each call's parameters constrained by its tool's schema.
// `parallel_tool_calls: false` (OpenAI) allows at most one call per reply: "required" then means
// exactly one, and "auto" becomes free text in which a DSML block may appear once, with one
// call, and ends the reply (a structured output too, unless another one is given).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "api/structured_output.h"
#include "util/status.h"

namespace di::api {

struct ToolChoice {
  enum class Mode { kAuto, kNone, kRequired, kNamed };
  Mode mode = Mode::kAuto;
  std::string name;      // kNamed
  bool parallel = true;  // body.parallel_tool_calls (false: at most one call)
};

// body.tool_choice and body.parallel_tool_calls checked against the request's tools
// (ChatRequest::tools). Errors (400): malformed values, tool_choice without tools, an unknown
// function name, a parallel_tool_calls that is not a boolean.
Expected<ToolChoice> parse_tool_choice(const nlohmann::json& body,
                                       const std::vector<nlohmann::ordered_json>& tools);

// The structured output that enforces `choice` (nullopt for none, and for auto unless
// parallel_tool_calls is false and there are tools).
std::optional<StructuredOutput> tool_choice_output(
    const ToolChoice& choice, const std::vector<nlohmann::ordered_json>& tools);

}  // namespace di::api
