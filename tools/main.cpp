// sprig: the command line. Each subcommand lives in its own file and registers itself here.
#include <CLI/CLI.hpp>
#include <iostream>

#include "tools/commands.h"

int main(int argc, char** argv) {
  CLI::App app{
      "sprig: train Qwen-style language models (packed documents, prefix-tree rollouts, "
      "speculative-decoding drafts) on CPU and CUDA"};
  app.require_subcommand(1);
  sprig::tools::add_bench_command(app);
  sprig::tools::add_data_command(app);
  sprig::tools::add_demo_command(app);
  sprig::tools::add_eval_command(app);
  sprig::tools::add_mask_command(app);
  sprig::tools::add_model_commands(app);
  sprig::tools::add_plot_command(app);
  sprig::tools::add_spec_eval_command(app);
  sprig::tools::add_train_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // Usage errors exit 2 (--help exits 0); runtime errors exit 1.
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const std::exception& e) {
    std::cerr << "sprig: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
