// deepinfer info --model DIR: the config, parameter counts by kind, bytes by dtype, KV bytes/token.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <map>

#include "cli/commands.h"
#include "cli/parse_flags.h"
#include "model/checkpoint_layout.h"
#include "model/config.h"
#include "model/weights/checkpoint.h"

namespace di::cli {

namespace {

std::string kind_of(const std::string& name) {
  if (name.find(".experts.") != std::string::npos) return "routed experts";
  if (name.find("shared_experts") != std::string::npos) return "shared experts";
  if (name.find("engram") != std::string::npos) return "engram";
  if (name.rfind("mtp.", 0) == 0) return "dspark";
  if (name.find(".attn.") != std::string::npos) return "attention";
  if (name == "embed" || name == "head") return "embedding/head";
  return "other (norms, router, hc)";
}

}  // namespace

int run_info_command(int argc, char** argv) {
  CLI::App app{"Describe a DeepSeek-V4.1 checkpoint", "info"};
  std::string dir;
  app.add_option("--model", dir, "checkpoint folder")->required();
  DI_PARSE_FLAGS(app, argc, argv);
  auto config = model::load_model_config(dir + "/config.json");
  if (!config) {
    std::cerr << "deepinfer info: " << config.status().to_string() << "\n";
    return 2;
  }
  auto ckpt = weights::Checkpoint::open_dir(dir);
  if (!ckpt) {
    std::cerr << "deepinfer info: " << ckpt.status().to_string() << "\n";
    return 2;
  }
  const model::ModelConfig& c = *config;
  std::cout << model::model_config_to_json(c);
  std::printf("\nlayers:");
  for (int l = 0; l < c.num_total_layers(); ++l) {
    std::printf(" %d:%s", l, l < c.n_layers ? model::layer_mode_name(c.layer_mode(l)) : "DSpark");
  }
  std::printf("\n\nparameters by kind:\n");
  std::map<std::string, int64_t> params;
  int64_t total = 0;
  for (const auto& t : model::checkpoint_tensor_specs(c)) {
    params[kind_of(t.name)] += model::num_parameters(t);
    total += model::num_parameters(t);
  }
  for (const auto& [k, n] : params)
    std::printf("  %-28s %14lld\n", k.c_str(), static_cast<long long>(n));
  std::printf("  %-28s %14lld\n", "total", static_cast<long long>(total));
  std::printf("\nstored bytes by dtype (%zu tensors):\n", ckpt->num_tensors());
  std::map<std::string, int64_t> bytes;
  for (const auto& name : ckpt->names()) {
    const auto* t = ckpt->find(name);
    bytes[std::string(weights::dtype_name(t->dtype))] += static_cast<int64_t>(t->num_bytes);
  }
  for (const auto& [k, n] : bytes)
    std::printf("  %-10s %16lld\n", k.c_str(), static_cast<long long>(n));
  // Reference KV formats (spec §1.10): FP8 window rows 528 B, FP4 compressed rows 288 B per entry,
  // FP4 index keys (dim/2 + dim/32) B per entry.
  double global = 0;
  for (int s : c.kv_source_layers) {
    const int r = c.compress_ratios[s];
    global += (c.head_dim / 2.0 + c.head_dim / 16.0) / r +
              (c.index_head_dim / 2.0 + c.index_head_dim / 32.0) / r;
  }
  const double window =
      static_cast<double>(c.num_total_layers()) * c.window_size * (c.head_dim + c.head_dim / 32.0);
  std::printf("\nKV bytes per token (release formats): %.1f (compressed KV + index keys)\n",
              global);
  std::printf("window rings per sequence: %.0f bytes (%d layers x %d slots)\n", window,
              c.num_total_layers(), c.window_size);
  return 0;
}

}  // namespace di::cli
