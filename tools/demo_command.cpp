// `sprig demo [--run-dir DIR] [--device auto|cpu|cuda] [--quick]`: pre-trains a tiny Qwen3 on a
// synthetic corpus, fine-tunes it on shared-prefix rollouts with prefix-tree attention and trains
// a draft of every kind for it (tools/demo.h). No downloads.
#include <CLI/CLI.hpp>
#include <memory>

#include "speculative/draft_kind.h"
#include "tools/commands.h"
#include "tools/demo.h"
#include "tools/options.h"

namespace sprig::tools {

void add_demo_command(CLI::App& app) {
  auto opt = std::make_shared<DemoOptions>();
  CLI::App* cmd = app.add_subcommand(
      "demo",
      "Train a tiny Qwen3 from scratch on synthetic documents, fine-tune it on shared-prefix "
      "rollouts with prefix-tree attention, train a speculative-decoding draft of every kind for "
      "it "
      "(" +
          speculative::draft_kind_names() +
          ") and decode held-out prompts speculatively with each; prints where the metrics and "
          "curves are");
  cmd->add_option("--run-dir", opt->run_dir, "where data, configs, runs and curves go")
      ->capture_default_str();
  add_device_option(cmd, opt->device);
  cmd->add_flag("--quick", opt->quick,
                "fewer steps per stage (about 20 s on two CPU cores): each stage still shows its "
                "effect, less strongly");
  cmd->callback([opt] { run_demo(*opt); });
}

}  // namespace sprig::tools
