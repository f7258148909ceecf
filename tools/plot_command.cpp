// `sprig plot RUN_DIR [--out curves.png]`: the loss (and val_loss), lr and recipe-metric curves of
// a training run (tools/viz/plot.h).
#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>

#include "tools/commands.h"
#include "tools/options.h"
#include "tools/viz/plot.h"
#include "tools/viz/png.h"

namespace sprig::tools {

void add_plot_command(CLI::App& app) {
  struct Options {
    std::string run_dir, out;
    bool overwrite = false;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "plot",
      "Draw the loss, val_loss and lr curves of a run's metrics.jsonl, and a panel per metric of "
      "its recipe (accept_len, accuracy, ...), as a PNG");
  cmd->add_option("run_dir", opt->run_dir, "training run directory (holds metrics.jsonl)")
      ->required();
  cmd->add_option("--out", opt->out, "output PNG (default: RUN_DIR/curves.png)");
  add_overwrite_flag(cmd, opt->overwrite);
  cmd->callback([opt] {
    if (!std::filesystem::is_regular_file(opt->run_dir + "/metrics.jsonl"))
      throw std::runtime_error(opt->run_dir + " is not a run directory: it has no metrics.jsonl");
    Output out(opt->out.empty() ? opt->run_dir + "/curves.png" : opt->out, kPngOutput,
               opt->overwrite, "--out", {{"the run's metrics", opt->run_dir + "/metrics.jsonl"}});
    plot_run(opt->run_dir, out.temp());
    out.commit();
    std::cout << "curves of " << opt->run_dir << " written to " << out.path() << "\n";
  });
}

}  // namespace sprig::tools
