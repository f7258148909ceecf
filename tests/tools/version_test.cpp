// `sprig --version`: what the build holds and what it finds at run time, the first thing
// tools/gpu_check.sh prints on a GPU machine.
#include <gtest/gtest.h>

#include "attention/cudnn/sdpa.h"
#include "tensor/cuda/kernels.h"
#include "tests/cli_run.h"
#include "tests/nn/checkpoint_fixtures.h"

namespace sprig {
namespace {

TEST(VersionCli, SaysWhatTheBuildHoldsAndFinds) {
  const testing::NamedTempDir tmp("version_cli");
  const testing::CliRun r = testing::run_sprig("--version", tmp.path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("  CPU code: -march="), std::string::npos) << r.out;
  if (!cuda::kBuilt) {
    EXPECT_NE(r.out.find("CUDA kernels: not built (CPU only)"), std::string::npos) << r.out;
    return;
  }
  const int runtime = cuda::runtime_version();
  EXPECT_GE(runtime, 12000);
  EXPECT_NE(r.out.find("CUDA kernels: built; runtime " + std::to_string(runtime / 1000) + "." +
                       std::to_string(runtime % 1000 / 10) + ", driver "),
            std::string::npos)
      << r.out;
  const std::string devices = cuda::device_count() == 0 ? "devices: none (no CUDA device)"
                                                        : "devices: cuda:0 " + cuda::device_name(0);
  EXPECT_NE(r.out.find(devices), std::string::npos) << r.out;
  if (cuda::cudnn::kBuilt) {
    EXPECT_NE(r.out.find("cuDNN attention backend: built against cuDNN 9."), std::string::npos)
        << r.out;
  }
}

}  // namespace
}  // namespace sprig
