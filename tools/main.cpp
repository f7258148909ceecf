// sprig: the command line. Each subcommand lives in its own file and registers itself here.
#include <sprig_commit.h>  // SPRIG_COMMIT, written by the build

#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>
#include <new>

#include "attention/cudnn/sdpa.h"
#include "tensor/cuda/kernels.h"
#include "tensor/json_text.h"
#include "tools/commands.h"

namespace {

std::string version_str(int v) {
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100);
}
std::string cuda_version_str(int v) {  // 13000 -> "13.0"
  return v ? std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10) : "none";
}

// What this build is and holds and finds: its version and commit, its CPU target, the CUDA kernels
// with the runtime and driver versions and the devices, cuDNN's attention backend (compiled and
// loaded versions).
std::string build_info() {
  namespace cuda = sprig::cuda;
  namespace cudnn = sprig::cuda::cudnn;
  std::string info = "sprig " SPRIG_VERSION " (commit " SPRIG_COMMIT
                     ")\n  CPU code: -march=" SPRIG_CPU_ARCH "\n  CUDA kernels: ";
  if (cuda::kBuilt) {
    info += "built; runtime " + cuda_version_str(cuda::runtime_version()) + ", driver " +
            cuda_version_str(cuda::driver_version()) + "; devices:";
    const int n = cuda::device_count();
    if (n == 0) info += " none (no CUDA device)";
    for (int d = 0; d < n; ++d) info += " cuda:" + std::to_string(d) + " " + cuda::device_name(d);
  } else {
    info += "not built (CPU only)";
  }
  info += "\n  cuDNN attention backend: ";
  if (!cudnn::kBuilt) return info + "not built";
  return info + "built against cuDNN " + version_str(cudnn::compiled_version()) + ", loaded " +
         version_str(cudnn::runtime_version());
}

// The subcommand path the command line names ("train sft"), as far as it is known.
std::string command_path(int argc, char** argv, const CLI::App& app) {
  std::string path;
  const CLI::App* at = &app;
  for (int i = 1; i < argc; ++i) {
    const CLI::App* sub = nullptr;
    for (const CLI::App* s : at->get_subcommands([](const CLI::App*) { return true; }))
      if (s->get_name() == argv[i]) sub = s;
    if (!sub) break;
    path += (path.empty() ? "" : " ") + sub->get_name();
    at = sub;
  }
  return path;
}

// A word where a command expects one of its subcommands: the error, listing them, or "".
std::string unknown_subcommand(int argc, char** argv, const CLI::App& app) {
  const CLI::App* at = &app;
  for (int i = 1; i < argc && argv[i][0] != '-'; ++i) {
    std::vector<std::string> names;
    for (const CLI::App* s : at->get_subcommands([](const CLI::App*) { return true; }))
      names.push_back(s->get_name());
    if (names.empty()) return "";
    const std::string word = argv[i];
    const auto it = std::find(names.begin(), names.end(), word);
    if (it == names.end()) {
      const std::string where = command_path(i, argv, app);
      std::string known;
      for (const std::string& name : names) known += (known.empty() ? "" : ", ") + name;
      return "[" + (where.empty() ? "sprig" : where) + "] unknown command '" + word + "': one of " +
             known + " (see sprig " + (where.empty() ? "" : where + " ") + "--help)";
    }
    at = at->get_subcommand(word);
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "sprig: train Qwen-style language models (packed documents, prefix-tree rollouts, "
      "speculative-decoding drafts) on CPU and CUDA"};
  app.set_version_flag("--version", build_info, "Print what this build holds and exit");
  app.require_subcommand(1);
  sprig::tools::add_bench_command(app);
  sprig::tools::add_data_command(app);
  sprig::tools::add_demo_command(app);
  sprig::tools::add_eval_command(app);
  sprig::tools::add_mask_command(app);
  sprig::tools::add_model_commands(app);
  sprig::tools::add_plan_command(app);
  sprig::tools::add_plot_command(app);
  sprig::tools::add_spec_eval_command(app);
  sprig::tools::add_train_command(app);
  if (const std::string unknown = unknown_subcommand(argc, argv, app); !unknown.empty()) {
    std::cerr << "sprig: " << unknown << "\n";
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    // A usage error: one line, exit 2 (runtime errors exit 1).
    const std::string where = command_path(argc, argv, app);
    std::cerr << "sprig: [" << (where.empty() ? "sprig" : where) << "] " << e.what()
              << " (see sprig " << (where.empty() ? "" : where + " ") << "--help)\n";
    return 2;
  } catch (const nlohmann::json::exception& e) {  // reading a value of the wrong type, unchecked
    std::cerr << "sprig: unexpected JSON: " << sprig::json_error_text(e) << "\n";
    return 1;
  } catch (const std::bad_alloc&) {  // a size no check estimated in advance
    std::cerr << "sprig: out of memory: the sizes asked for need more memory than this machine "
                 "can give\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "sprig: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
