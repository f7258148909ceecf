// `sprig train sft -c CONFIG.yaml [--a.b=value ...] [--resume]`.
#include <CLI/CLI.hpp>
#include <iostream>

#include "tools/commands.h"
#include "train/sft.h"

namespace sprig::tools {

void add_train_command(CLI::App& app) {
  static std::string config_path;
  static bool resume = false;
  CLI::App* train = app.add_subcommand("train", "Train a model (recipes: sft)");
  train->require_subcommand(1);
  CLI::App* sft = train->add_subcommand(
      "sft",
      "Next-token SFT on packed documents or folded shared-prefix rollouts. Any config key "
      "can be overridden as --section.key=value (e.g. --train.max_steps=10)");
  sft->add_option("-c,--config", config_path, "Training config (YAML)")->required();
  sft->add_flag("--resume", resume, "Continue from the run directory's latest checkpoint");
  sft->allow_extras();
  sft->callback([sft] {
    std::vector<std::string> overrides;
    for (const std::string& extra : sft->remaining()) {
      if (extra.rfind("--", 0) != 0 || extra.find('=') == std::string::npos)
        throw std::runtime_error("unexpected argument '" + extra +
                                 "' (overrides look like --section.key=value)");
      overrides.push_back(extra.substr(2));
    }
    train_sft(load_train_config(config_path, overrides), resume);
  });
}

}  // namespace sprig::tools
