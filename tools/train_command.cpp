// `sprig train sft|dflash|domino|jetspec|eagle3 -c CONFIG.yaml [--a.b=value ...] [--resume]
// [--allow-config-change]`, as one process or as every rank of `mpirun -np N sprig train ...`.
#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdlib>
#include <functional>
#include <iostream>

#include "speculative/draft_kind.h"
#include "tools/commands.h"
#include "tools/overrides.h"
#include "train/communicator.h"
#include "train/draft.h"
#include "train/eagle3.h"
#include "train/sft.h"

namespace sprig::tools {

namespace {

using TrainFn =
    std::function<TrainSummary(const TrainConfig&, bool, const StepCallback&, Communicator&)>;
using LoadFn = std::function<TrainConfig(const std::string&, const std::vector<std::string>&)>;

// `arg` as one word of a POSIX shell.
std::string shell_word(const std::string& arg) {
  if (!arg.empty() && arg.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                            "0123456789_-+=.,/:@%") == std::string::npos)
    return arg;
  std::string quoted = "'";
  for (char ch : arg) quoted += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return quoted + "'";
}

// Says where the run stopped and the command that continues it, then exits with 128 + the signal
// (the shell's convention: 130 for SIGINT, 143 for SIGTERM).
[[noreturn]] void exit_stopped(const TrainSummary& summary, const std::string& resume_command) {
  const int sig = summary.stopped_by_signal;
  std::cerr << "sprig: stopped by " << (sig == SIGINT ? "SIGINT" : "SIGTERM") << " after step "
            << summary.steps << "; "
            << (summary.checkpoint.empty() ? "nothing was written (no step had finished)"
                                           : "checkpoint " + summary.checkpoint)
            << "; continue with: " << resume_command << "\n";
  std::cout.flush();
  std::exit(128 + sig);
}

// What every recipe's command does beside its own work.
constexpr const char* kRecipeFooter =
    "Any config key can be overridden as --section.key=value (e.g. --train.max_steps=10). SIGINT "
    "or SIGTERM stops the run at the next step boundary, writes a checkpoint there, prints the "
    "command that continues it and exits with 128 + the signal (130, 143); a second signal ends "
    "it at once.";

// One recipe's subcommand: the config, its overrides and --resume.
void add_recipe(CLI::App* train, const std::string& name, const std::string& help, LoadFn load,
                TrainFn run) {
  struct Options {
    std::string config;
    bool resume = false, allow_config_change = false;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* cmd = train->add_subcommand(name, help);
  cmd->footer(kRecipeFooter);
  cmd->add_option("-c,--config", opt->config, "Training config (YAML)")->required();
  cmd->add_flag("--resume", opt->resume, "Continue from the run directory's latest checkpoint");
  cmd->add_flag("--allow-config-change", opt->allow_config_change,
                "With --resume: continue even when the config changes settings that alter the "
                "run (e.g. data.seq_len; they are printed)");
  cmd->allow_extras();
  cmd->callback([cmd, opt, name, load, run] {
    std::vector<std::string> overrides;
    try {
      overrides = parse_overrides(cmd->remaining());
    } catch (const std::invalid_argument& e) {
      throw CLI::ValidationError(e.what());
    }
    std::string resume_command = "sprig train " + name + " -c " + shell_word(opt->config);
    for (const std::string& o : overrides) resume_command += " " + shell_word("--" + o);
    TrainConfig config;
    try {
      config = load(opt->config, overrides);
    } catch (const OverrideError& e) {  // a usage error: what the command line says is wrong
      const std::string message = e.what(), tag = "[config] ";
      throw CLI::ValidationError(message.rfind(tag, 0) == 0 ? message.substr(tag.size()) : message);
    }
    config.allow_config_change = opt->allow_config_change;
    // Before anything touches CUDA: a rank selects its device.
    const std::unique_ptr<Communicator> comm =
        launch_communicator(resolve_device(config.device).is_cuda());
    if (comm->rank() == 0)
      for (const std::string& unused : config.unused)
        std::cerr << "sprig: [config] warning: " << unused << "\n";
    TrainSummary summary;
    try {
      summary = run(config, opt->resume, {}, *comm);
    } catch (const std::exception& e) {
      if (comm->world_size() == 1) throw;
      // The other ranks may be waiting for this one in a collective: end them all.
      std::cerr << "sprig: rank " << comm->rank() << " of " << comm->world_size() << ": "
                << e.what() << "\n";
      comm->abort(1);
    }
    if (summary.stopped_by_signal) {
      if (comm->rank() != 0) std::exit(128 + summary.stopped_by_signal);
      const std::string launcher =
          comm->world_size() > 1 ? "mpirun -np " + std::to_string(comm->world_size()) + " " : "";
      exit_stopped(summary, launcher + resume_command + " --resume");
    }
  });
}

}  // namespace

void add_train_command(CLI::App& app) {
  CLI::App* train = app.add_subcommand(
      "train", "Train a model (recipes: sft, " + speculative::draft_kind_names() + ", eagle3)");
  train->require_subcommand(1);
  train->footer(kRecipeFooter);
  const auto loader = [](const speculative::DraftKind* kind) -> LoadFn {
    return [kind](const std::string& path, const std::vector<std::string>& overrides) {
      return load_train_config(path, overrides, kind);
    };
  };
  add_recipe(train, "sft", "Next-token SFT on packed documents or folded shared-prefix rollouts",
             loader(nullptr), train_sft);
  for (const speculative::DraftKind* kind : speculative::draft_kinds()) {
    const std::string name(kind->name());
    add_recipe(train, name, std::string(kind->train_help()), loader(kind), train_draft);
  }
  add_recipe(train, "eagle3",
             "Train an EAGLE-3 draft: one layer over the target's low, middle and high states and "
             "the next token, unrolled ttt_steps steps on its own states (target: and draft: "
             "aux_layer_ids, ttt_steps)",
             load_eagle3_train_config, train_eagle3);
}

}  // namespace sprig::tools
