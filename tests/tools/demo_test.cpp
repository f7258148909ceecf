// `sprig demo --quick`: every stage runs end to end (pre-training, rollout fine-tuning, a draft of
// every kind and an EAGLE-3 draft, speculative decoding with each), shows its effect in its figures
// and says where its outputs are; a directory it did not make is refused untouched.
#include <gtest/gtest.h>

#include <regex>

#include "tests/cli_run.h"
#include "tests/nn/checkpoint_fixtures.h"

namespace sprig {
namespace {

TEST(DemoCli, QuickRunGoesThroughEveryStage) {
  const testing::NamedTempDir tmp("demo_cli");
  const std::string run_dir = tmp.path + "/demo";
  // A run directory relative to the working directory, as the default runs/demo is. (About 25 s
  // alone on 2 cores, several times that beside other tests: the limit of a slow test's command.)
  const testing::CliRun r = testing::run_sprig("demo --quick --device cpu --run-dir demo", tmp.path,
                                               tmp.path, testing::kSlowCommandLimit);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* line : {"== stage 1:", "== stage 2:", "== stage 3:", "== stage 4:",
                           "acceptance length on held-out documents",
                           "acceptance length on the same held-out documents: DFlash ",
                           "== stage 5:", "  DFlash: tau ", "  Domino: tau ", "  JetSpec: tau ",
                           "  EAGLE-3: tau ", "demo finished in"})
    EXPECT_NE(r.out.find(line), std::string::npos) << line;
  // Speculative decoding is lossless on every held-out prompt, with each draft.
  const std::regex lossless(R"((\d+)/(\d+) outputs equal to greedy decoding)");
  int drafts = 0;
  for (std::sregex_iterator m(r.out.begin(), r.out.end(), lossless), end; m != end; ++m, ++drafts) {
    EXPECT_EQ((*m)[1].str(), (*m)[2].str()) << m->str();
    EXPECT_NE((*m)[2].str(), "0");
  }
  EXPECT_EQ(drafts, 4) << r.out;  // one per kind
  // Each stage shows its effect even in the quick run: the fine-tuned model continues some
  // prompts exactly, and each trained draft is accepted beyond its bonus token.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"(fine-tuned (\d+)/64)"))) << r.out;
  EXPECT_GE(std::stoi(m[1]), 5) << r.out;
  ASSERT_TRUE(std::regex_search(
      r.out, m,
      std::regex(R"(same held-out documents: DFlash ([\d.]+), Domino ([\d.]+), JetSpec ([\d.]+), )"
                 R"(EAGLE-3 ([\d.]+))")))
      << r.out;
  for (int i = 1; i <= 4; ++i) EXPECT_GT(std::stod(m[i]), 1.1) << r.out;
  for (const char* file :
       {"pretrain/curves.png", "rollouts/curves.png", "draft/curves.png", "draft.yaml",
        "draft/checkpoints/latest", "domino.yaml", "domino/curves.png", "domino/checkpoints/latest",
        "jetspec.yaml", "jetspec/curves.png", "jetspec/checkpoints/latest", "eagle3.yaml",
        "eagle3/curves.png", "eagle3/checkpoints/latest"})
    EXPECT_TRUE(testing::fs::exists(run_dir + "/" + file)) << file;

  const std::string other = tmp.path + "/mine";
  testing::fs::create_directories(other);
  testing::write_text(other + "/notes.txt", "mine");
  const testing::CliRun refused =
      testing::run_sprig("demo --quick --device cpu --run-dir " + other, tmp.path);
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("was not made by sprig demo"), std::string::npos) << refused.err;
  EXPECT_EQ(testing::read_text(other + "/notes.txt"), "mine");

  // An earlier demo's directory to which the user added a file: refused naming it, untouched.
  testing::write_text(run_dir + "/notes.txt", "mine");
  const std::string latest = testing::read_text(run_dir + "/draft/checkpoints/latest");
  const testing::CliRun kept =
      testing::run_sprig("demo --quick --device cpu --run-dir " + run_dir, tmp.path);
  EXPECT_EQ(kept.exit_code, 1);
  EXPECT_EQ(kept.err, "sprig: [demo] " + run_dir +
                          " holds an earlier demo and files sprig demo did not write (notes.txt): "
                          "move them away, or choose another --run-dir\n");
  EXPECT_EQ(testing::read_text(run_dir + "/notes.txt"), "mine");
  EXPECT_EQ(testing::read_text(run_dir + "/draft/checkpoints/latest"), latest);
}

}  // namespace
}  // namespace sprig
