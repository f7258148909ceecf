// `sprig train sft|dflash|domino|jetspec -c CONFIG.yaml [--a.b=value ...] [--resume]`.
#include <CLI/CLI.hpp>
#include <functional>
#include <iostream>

#include "tools/commands.h"
#include "train/draft.h"
#include "train/sft.h"

namespace sprig::tools {

namespace {

using TrainFn = std::function<TrainSummary(const TrainConfig&, bool, const StepCallback&)>;

// One recipe's subcommand: the config, its overrides and --resume.
void add_recipe(CLI::App* train, const char* name, const char* help, RecipeKind kind, TrainFn run) {
  struct Options {
    std::string config;
    bool resume = false;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* cmd = train->add_subcommand(
      name, std::string(help) +
                ". Any config key can be overridden as --section.key=value (e.g. "
                "--train.max_steps=10)");
  cmd->add_option("-c,--config", opt->config, "Training config (YAML)")->required();
  cmd->add_flag("--resume", opt->resume, "Continue from the run directory's latest checkpoint");
  cmd->allow_extras();
  cmd->callback([cmd, opt, kind, run] {
    std::vector<std::string> overrides;
    for (const std::string& extra : cmd->remaining()) {
      if (extra.rfind("--", 0) != 0 || extra.find('=') == std::string::npos)
        throw std::runtime_error("unexpected argument '" + extra +
                                 "' (overrides look like --section.key=value)");
      overrides.push_back(extra.substr(2));
    }
    run(load_train_config(opt->config, overrides, kind), opt->resume, {});
  });
}

}  // namespace

void add_train_command(CLI::App& app) {
  CLI::App* train =
      app.add_subcommand("train", "Train a model (recipes: sft, dflash, domino, jetspec)");
  train->require_subcommand(1);
  add_recipe(train, "sft", "Next-token SFT on packed documents or folded shared-prefix rollouts",
             RecipeKind::sft, train_sft);
  add_recipe(train, "dflash",
             "Train a DFlash speculative-decoding draft on a frozen target's hidden states "
             "(target: and draft: sections; data packed by dflash or padded)",
             RecipeKind::dflash, train_draft);
  add_recipe(train, "domino",
             "Train a Domino draft: the DFlash backbone plus a GRU correction head, the loss "
             "mixing corrected and base logits by a decaying lambda_base (same sections as "
             "dflash, with draft.emb_dim, gru_hidden_dim, shift_label, lambda_base_start, ...)",
             RecipeKind::domino, train_draft);
  add_recipe(train, "jetspec",
             "Train a JetSpec draft: in-block causal attention, distilled from the target's "
             "logits by forward KL (same sections as dflash, with draft.kd_temperature)",
             RecipeKind::jetspec, train_draft);
}

}  // namespace sprig::tools
