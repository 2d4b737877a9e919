// Every `deepinfer` subcommand: int run_<name>_command(argc, argv), argv[0] being the subcommand.
// Exit codes: 0 success, 1 the command ran and found failures, 2 bad flags or unreadable input.
#pragma once

namespace di::cli {

int run_batch_command(int argc, char** argv);
int run_bench_command(int argc, char** argv);
int run_bench_offline_command(int argc, char** argv);  // bench offline
int run_bench_serve_command(int argc, char** argv);    // bench serve
int run_chat_command(int argc, char** argv);
int run_check_golden_command(int argc, char** argv);
int run_info_command(int argc, char** argv);
int run_init_model_command(int argc, char** argv);
int run_generate_command(int argc, char** argv);
int run_serve_command(int argc, char** argv);

}  // namespace di::cli
