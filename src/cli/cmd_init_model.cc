// deepinfer init-model --preset mini|v41-shaped|CONFIG.json --out DIR [--seed S] [--tokenizer F]
//                      [--layers N] [--experts N] [--mtp-layers N]
#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>

#include "cli/commands.h"
#include "cli/parse_flags.h"
#include "model/checkpoint_init.h"
#include "model/presets.h"

namespace di::cli {

int run_init_model_command(int argc, char** argv) {
  CLI::App app{"Write a random-weight DeepSeek-V4.1 checkpoint in the official format",
               "init-model"};
  std::string preset, out, tokenizer;
  uint64_t seed = 0;
  model::PresetOptions po;
  app.add_option("--preset", preset, "mini, v41-shaped, or a config.json file")->required();
  app.add_option("--out", out, "output folder")->required();
  app.add_option("--seed", seed, "weight seed (default 0)");
  app.add_option("--tokenizer", tokenizer, "tokenizer.json to copy into the checkpoint")
      ->check(CLI::ExistingFile);
  app.add_option("--layers", po.num_layers, "backbone layers (presets only)");
  app.add_option("--experts", po.num_experts, "routed experts per layer (presets only)");
  app.add_option("--mtp-layers", po.num_mtp_layers, "DSpark draft layers (presets only)");
  DI_PARSE_FLAGS(app, argc, argv);

  Expected<model::ModelConfig> config = invalid_argument("");
  if (std::filesystem::is_regular_file(preset)) {
    config = model::load_model_config(preset);
  } else {
    config = model::preset_config(preset, po);
  }
  if (!config) {
    std::cerr << "deepinfer init-model: --preset: " << config.status().message() << "\n";
    return 2;
  }
  model::InitOptions io{out, seed, tokenizer};
  auto written = model::write_random_checkpoint(std::move(config).value(), io);
  if (!written) {
    std::cerr << "deepinfer init-model: " << written.status().to_string() << "\n";
    return 2;
  }
  std::cout << "wrote " << out << " (" << written->n_layers << " layers + " << written->n_mtp_layers
            << " DSpark, hidden " << written->dim << ", vocab " << written->vocab_size << ")\n";
  return 0;
}

}  // namespace di::cli
