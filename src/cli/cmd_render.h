// `deepinfer render`: renders an OpenAI-shaped chat request into a DeepSeek V4.1 prompt.
// main.cc dispatches here; argv[0] is the subcommand name. Exit codes: 0 ok, 2 bad flags, an
// unreadable/invalid tokenizer or request file, or a request the renderer rejects.
#pragma once

namespace di::cli {

// deepinfer render --tokenizer FILE --request chat.json [--thinking|--no-thinking] [--effort N]
//   Prints the prompt ids as a JSON array on the first line, then the prompt text. The flags
//   override the request's chat_template_kwargs.thinking and reasoning_effort.
int run_render_command(int argc, char** argv);

}  // namespace di::cli
