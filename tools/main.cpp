// sprig: the command line. Each subcommand lives in its own file and registers itself here.
#include <CLI/CLI.hpp>
#include <iostream>

#include "attention/cudnn/sdpa.h"
#include "tensor/cuda/kernels.h"
#include "tools/commands.h"

namespace {

std::string version_str(int v) {
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100);
}
std::string cuda_version_str(int v) {  // 13000 -> "13.0"
  return v ? std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10) : "none";
}

// What this build holds and finds: its CPU target, the CUDA kernels with the runtime and driver
// versions and the devices, cuDNN's attention backend (compiled and loaded versions).
std::string build_info() {
  namespace cuda = sprig::cuda;
  namespace cudnn = sprig::cuda::cudnn;
  std::string info = "sprig\n  CPU code: -march=" SPRIG_CPU_ARCH "\n  CUDA kernels: ";
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
