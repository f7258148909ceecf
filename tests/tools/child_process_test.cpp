// Nothing a test starts outlives it (tests/child_process.h): a test that fails an assertion right
// after starting a long run, whose shell has processes of its own (one in another process group),
// leaves none behind; a ChildProcess's wait is bounded; run_sprig names a command that passes its
// time limit.
#include "tests/child_process.h"

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/cli_run.h"

namespace sprig {
namespace {

using testing::ChildProcess;
using testing::CliRun;
using testing::file_text;
using testing::process_alive;
namespace fs = std::filesystem;

// Where the inner test records the pids it started and, in its TearDown (after the test body has
// returned and its guards have run), whether they were still alive.
const char* report_path() { return std::getenv("SPRIG_ORPHAN_REPORT"); }

std::vector<pid_t> read_pids(const std::string& path) {
  std::vector<pid_t> pids;
  std::ifstream in(path);
  for (pid_t pid; in >> pid;) pids.push_back(pid);
  return pids;
}

class FailsRightAfterSpawning : public ::testing::Test {
 protected:
  void TearDown() override {
    if (!report_path()) return;
    std::ofstream report(std::string(report_path()) + ".teardown");
    for (const pid_t pid : read_pids(report_path())) report << process_alive(pid) << "\n";
  }
};

// Run only by the test below (disabled otherwise): starts a shell with two background `sleep`s,
// one in the shell's process group and one in a group of its own (as mpirun's ranks are), records
// the three pids, then fails an assertion.
TEST_F(FailsRightAfterSpawning, DISABLED_ALongRun) {
  if (!report_path()) GTEST_SKIP() << "run by ChildProcess.NothingOutlivesAFailedTest";
  const std::string pids = report_path();
  ChildProcess run = ChildProcess::shell("sleep 300 & a=$!; setsid sleep 300 & echo $$ $a $! >" +
                                         pids + ".tmp; mv " + pids + ".tmp " + pids + "; wait");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (read_pids(pids).size() < 3 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(false) << "fails on purpose, with its long run still going";
}

TEST(ChildProcess, NothingOutlivesAFailedTest) {
  const fs::path dir = fs::temp_directory_path() / ("sprig_orphan_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string report = (dir / "pids").string();
  ChildProcess inner = ChildProcess::shell(
      "SPRIG_ORPHAN_REPORT=" + report + " exec /proc/" + std::to_string(::getpid()) +
      "/exe --gtest_also_run_disabled_tests "
      "--gtest_filter=FailsRightAfterSpawning.DISABLED_ALongRun >" +
      (dir / "inner.log").string() + " 2>&1");
  EXPECT_EQ(inner.wait_for(std::chrono::seconds(60)), 1) << file_text((dir / "inner.log").string());
  const std::vector<pid_t> pids = read_pids(report);
  ASSERT_EQ(pids.size(), 3u) << file_text((dir / "inner.log").string());
  // Dead by the end of the failed test, before the test process itself ended...
  EXPECT_EQ(file_text(report + ".teardown"), "0\n0\n0\n");
  // ...and still gone now.
  for (const pid_t pid : pids) EXPECT_FALSE(process_alive(pid)) << pid;
  fs::remove_all(dir);
}

TEST(ChildProcess, WaitsAreBoundedAndTheGuardKillsTheGroup) {
  pid_t pid = 0;
  {
    ChildProcess sleeper = ChildProcess::shell("exec sleep 300");
    pid = sleeper.pid();
    EXPECT_EQ(sleeper.wait_for(std::chrono::milliseconds(50)), std::nullopt);
    EXPECT_TRUE(process_alive(pid));
  }
  EXPECT_FALSE(process_alive(pid));
  ChildProcess quick = ChildProcess::shell("exit 3");
  EXPECT_EQ(quick.wait_for(std::chrono::seconds(30)), 3);
  ChildProcess killed = ChildProcess::shell("kill -TERM $$");
  EXPECT_EQ(killed.wait_for(std::chrono::seconds(30)), -SIGTERM);
}

TEST(ChildProcess, RunSprigNamesACommandPastItsLimit) {
  const fs::path dir = fs::temp_directory_path() / ("sprig_limit_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  // A command that does not end: run_sprig's arguments go through the shell, and a `sleep`
  // follows `sprig --version` here.
  ::testing::TestPartResultArray failures;
  CliRun r;
  {
    ::testing::ScopedFakeTestPartResultReporter intercept(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &failures);
    r = testing::run_sprig("--version & sleep 60", dir.string(), "", std::chrono::seconds(1));
  }
  ASSERT_EQ(failures.size(), 1);
  const std::string message = failures.GetTestPartResult(0).message();
  EXPECT_NE(
      message.find("timed out after 1 s: " + std::string(SPRIG_BIN) + " --version & sleep 60"),
      std::string::npos)
      << message;
  EXPECT_EQ(r.exit_code, -1);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace sprig
