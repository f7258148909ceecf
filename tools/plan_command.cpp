// `sprig plan -c CONFIG.yaml [--recipe sft|dflash|domino|jetspec|eagle3] [--gpus N]
// [--gpu h200|h100|a100-80|GiB] [--a.b=value ...]`: what one training step of the config needs on
// each GPU, from the models' config.json files alone (train/plan.h), before any GPU is booked.
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <stdexcept>

#include "speculative/draft_kind.h"
#include "tools/commands.h"
#include "tools/options.h"
#include "tools/overrides.h"
#include "train/plan.h"

namespace sprig::tools {

void add_plan_command(CLI::App& app) {
  struct Options {
    std::string config, recipe = "sft", gpu = "h200";
    int64_t gpus = 1;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "plan",
      "The memory one training step of a config needs on each GPU, itemised, whether it fits and "
      "the smallest change that makes it fit (reads the models' config.json only)");
  cmd->footer(
      "Any config key can be overridden as --section.key=value, as with sprig train (e.g. "
      "--data.seq_len=16384).");
  cmd->add_option("-c,--config", opt->config, "Training config (YAML)")->required();
  cmd->add_option(
         "--recipe", opt->recipe,
         "The recipe the config is for: sft, " + speculative::draft_kind_names() + " or eagle3")
      ->capture_default_str();
  add_int_option(cmd, "--gpus", opt->gpus, "Data-parallel ranks, one GPU each")
      ->check(kPositive)
      ->capture_default_str();
  cmd->add_option("--gpu", opt->gpu, "h200, h100, a100-80, or a GPU's memory in GiB")
      ->capture_default_str();
  cmd->allow_extras();
  cmd->callback([cmd, opt] {
    std::vector<std::string> overrides;
    const speculative::DraftKind* kind = nullptr;
    try {
      overrides = parse_overrides(cmd->remaining());
      gpu_memory(opt->gpu);  // checked before any file is read
      if (opt->recipe != "sft" && opt->recipe != "eagle3" &&
          !(kind = speculative::find_draft_kind(opt->recipe)))
        throw std::invalid_argument("--recipe must be sft, " + speculative::draft_kind_names() +
                                    " or eagle3, got '" + opt->recipe + "'");
    } catch (const std::invalid_argument& e) {
      const std::string message = e.what(), tag = "[plan] ";
      throw CLI::ValidationError(message.rfind(tag, 0) == 0 ? message.substr(tag.size()) : message);
    }
    TrainConfig config;
    try {
      config = opt->recipe == "eagle3" ? load_eagle3_train_config(opt->config, overrides)
                                       : load_train_config(opt->config, overrides, kind);
    } catch (const OverrideError& e) {
      const std::string message = e.what(), tag = "[config] ";
      throw CLI::ValidationError(message.rfind(tag, 0) == 0 ? message.substr(tag.size()) : message);
    }
    std::cout << plan_report(plan_step(config), opt->gpus, opt->gpu);
  });
}

}  // namespace sprig::tools
