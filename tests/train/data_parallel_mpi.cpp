// Data-parallel training over real ranks: `mpirun -np 2` of the real `sprig` binary on the MPI
// backend (label mpi). Two ranks with micro-batch b train as one rank with micro-batch 2b (the same
// rows per step, losses and weights within f32 round-off), for SFT and for DFlash; a run whose
// rank is killed or stopped by SIGTERM resumes to the uninterrupted result; a failing rank or a
// config that differs between ranks ends every rank with the error; a checkpoint resumes only on as
// many ranks; Domino and JetSpec train on two ranks; the optimizer's state and the gradients
// sharded over the ranks train as the whole state does and resume bit for bit, or with the other
// sharding. Also every
// collective of the MPI communicator and the gradient buckets (communicator_ranks), and `sprig
// bench comm`; the binary itself links neither MPI nor NCCL.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "tests/child_process.h"
#include "tests/train/train_test_util.h"
#include "train/plan.h"

namespace sprig {
namespace {

using testing::ChildProcess;
using testing::metrics_of;
using testing::TempDir;
namespace fs = std::filesystem;

// mpirun as root (CI runs as root), more ranks than cores, no cross-memory-attach (containers
// often forbid ptrace), one OpenMP thread per rank.
class MpiEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    for (const auto& [name, value] :
         {std::pair<const char*, const char*>{"OMPI_ALLOW_RUN_AS_ROOT", "1"},
          {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"},
          {"OMPI_MCA_rmaps_base_oversubscribe", "1"},
          {"OMPI_MCA_btl_vader_single_copy_mechanism", "none"},
          {"OMP_NUM_THREADS", "1"}})
      ::setenv(name, value, 1);
  }
};
const auto* const mpi_environment = ::testing::AddGlobalTestEnvironment(new MpiEnvironment);

// Runs `command` through the shell with a time limit; returns its exit status (-signal when a
// signal ended it, 124 when it was stopped at the limit) and appends its stdout and stderr to
// `output`.
int run(const std::string& command, std::string& output, int seconds = 300) {
  TempDir scratch;
  const std::string log = scratch / "output.log";
  ChildProcess child = ChildProcess::shell("exec " + command + " >" + log + " 2>&1");
  const std::optional<int> status = child.wait_for(std::chrono::seconds(seconds));
  output += testing::read_text(log);
  return status.value_or(124);
}

std::string mpirun(int ranks) {
  return std::string(MPIRUN) + " -np " + std::to_string(ranks) + " ";
}

std::string train_command(const std::string& recipe, const std::string& config,
                          const std::vector<std::string>& overrides) {
  std::string command = std::string(SPRIG_BIN) + " train " + recipe + " -c " + config;
  for (const std::string& o : overrides) command += " --" + o;
  return command;
}

double max_abs_difference(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = a.to(DType::f32).to_vector<float>(),
                           y = b.to(DType::f32).to_vector<float>();
  double d = 0;
  for (size_t i = 0; i < x.size(); ++i) d = std::max(d, std::abs(double(x[i]) - double(y[i])));
  return d;
}

TEST(DataParallel, CollectivesAndBucketsOnTwoRanks) {
  std::string output;
  ASSERT_EQ(run(mpirun(2) + COMMUNICATOR_RANKS, output), 0) << output;
  EXPECT_TRUE(testing::contains(output, "rank 0 of 2 (MPI): ok"));
  EXPECT_TRUE(testing::contains(output, "rank 1 of 2 (MPI): ok"));
}

// A single process needs neither library: the backends are plugins loaded for several ranks.
TEST(DataParallel, TheBinaryLinksNeitherMpiNorNccl) {
  std::string libraries;
  ASSERT_EQ(run(std::string("ldd ") + SPRIG_BIN, libraries), 0) << libraries;
  EXPECT_FALSE(testing::contains(libraries, "libmpi")) << libraries;
  EXPECT_FALSE(testing::contains(libraries, "libnccl")) << libraries;
  std::string output;
  ASSERT_EQ(run(mpirun(2) + SPRIG_BIN + " bench comm --max-mib 1 --repeats 2", output), 0)
      << output;
  EXPECT_TRUE(testing::contains(output, "all-reduce sum of f32 over 2 ranks (MPI)")) << output;
}

// Trains `recipe` on 2 ranks with micro-batch 1 and on 1 rank with micro-batch 2 (token
// normalisation, 2 micro-batches per step) and compares them step by step.
//
// Tolerance: the runs add the same f32 terms in different orders (each rank's sum, then the
// all-reduce, against one sum over twice the rows), so gradients and losses differ by f32
// round-off (relative ~1e-6; 1e-5 and 1e-4 leave room over 4 steps). AdamW divides each gradient
// by its running root mean square, so a weight moves by about lr = 3e-3 per step whatever the
// gradient's scale, and a relative gradient difference d moves it apart by about lr * d per step,
// more where a gradient is near 0: measured 3e-6 (SFT) and 3e-7 (DFlash); 2e-5 is the bound.
void expect_two_ranks_equal_one(const std::string& recipe, const TempDir& dir,
                                const std::string& config, const std::vector<std::string>& common) {
  std::vector<std::string> pair = common, single = common;
  pair.insert(pair.end(), {"run_dir=" + (dir / "pair"), "data.micro_batch_size=1"});
  single.insert(single.end(), {"run_dir=" + (dir / "single"), "data.micro_batch_size=2"});
  std::string output;
  ASSERT_EQ(run(mpirun(2) + train_command(recipe, config, pair), output), 0) << output;
  ASSERT_EQ(run(train_command(recipe, config, single), output), 0) << output;
  EXPECT_TRUE(testing::contains(output, "x 2 ranks (MPI)"));

  const auto pair_metrics = metrics_of(dir / "pair"), single_metrics = metrics_of(dir / "single");
  ASSERT_EQ(pair_metrics.size(), 4u) << output;
  ASSERT_EQ(single_metrics.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    const nlohmann::json &p = pair_metrics[i], &s = single_metrics[i];
    // The same rows every step: the same supervised tokens.
    EXPECT_EQ(p.at("tokens"), s.at("tokens")) << "step " << i + 1;
    EXPECT_NEAR(p.at("loss").get<double>(), s.at("loss").get<double>(),
                1e-5 * s.at("loss").get<double>())
        << "step " << i + 1;
    EXPECT_NEAR(p.at("grad_norm").get<double>(), s.at("grad_norm").get<double>(),
                1e-4 * s.at("grad_norm").get<double>())
        << "step " << i + 1;
  }
  const auto pair_weights = testing::latest_weights(dir / "pair"),
             single_weights = testing::latest_weights(dir / "single");
  ASSERT_EQ(pair_weights.size(), single_weights.size());
  double worst = 0;
  for (const auto& [name, w] : single_weights)
    worst = std::max(worst, max_abs_difference(pair_weights.at(name), w));
  EXPECT_LT(worst, 2e-5);
  EXPECT_GT(max_abs_difference(
                single_weights.begin()->second,
                testing::read_tensors(dir / "single/checkpoints/step_00000002/model.safetensors")
                    .begin()
                    ->second),
            1e-3)
      << "the weights did not move: the comparison would prove nothing";
  std::cout << recipe << ": largest weight difference " << worst << "\n";
}

const std::vector<std::string> kEqualityOverrides = {
    "train.max_steps=4", "train.grad_accumulation_steps=2", "train.loss_normalization=tokens",
    "log.every_steps=1", "checkpoint.every_steps=2",        "checkpoint.keep_last=3"};

TEST(DataParallel, TwoRanksTrainSftAsOneRankWithTwiceTheMicroBatch) {
  TempDir dir;
  expect_two_ranks_equal_one("sft", dir, testing::write_tiny_config(dir), kEqualityOverrides);
}

// Every valid anchor is kept (num_anchors above any row's count), so the anchors do not depend on
// the rank's random stream.
TEST(DataParallel, TwoRanksTrainDFlashAsOneRankWithTwiceTheMicroBatch) {
  TempDir dir;
  testing::tiny_dflash_config(dir);  // writes dflash.yaml
  std::vector<std::string> overrides = kEqualityOverrides;
  overrides.push_back("draft.num_anchors=64");
  expect_two_ranks_equal_one("dflash", dir, dir / "dflash.yaml", overrides);
}

TEST(DataParallel, DominoAndJetSpecTrainOnTwoRanks) {
  for (const speculative::DraftKind* kind :
       {&speculative::domino_kind(), &speculative::jetspec_kind()}) {
    TempDir dir;
    testing::tiny_dflash_config(dir, {}, kind);  // writes dflash.yaml
    std::string output;
    ASSERT_EQ(run(mpirun(2) + train_command(std::string(kind->name()), dir / "dflash.yaml",
                                            {"train.max_steps=2", "log.every_steps=1"}),
                  output),
              0)
        << output;
    const auto metrics = metrics_of(dir / "run");
    ASSERT_EQ(metrics.size(), 2u) << output;
    EXPECT_GT(metrics[1].at("accept_len").get<double>(), 0.0) << output;
  }
}

// The processes whose parent is `pid`.
std::vector<pid_t> children_of(pid_t pid) {
  std::vector<pid_t> out;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    const size_t close = line.rfind(')');  // after "pid (comm)": state, ppid
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    std::string state;
    pid_t parent = 0;
    rest >> state >> parent;
    if (parent == pid) out.push_back(std::stoi(entry.path().filename().string()));
  }
  return out;
}

// Runs `mpirun -np 2 <command>` and sends `sig` to rank 1 once the run's first checkpoint is
// complete; returns the launcher's exit status (-signal when a signal ended it, 124 when it did
// not end within 5 minutes), its output in `log`.
int interrupt_rank(const std::string& command, const std::string& run_dir, int sig,
                   const std::string& log) {
  ChildProcess launcher = ChildProcess::shell("exec " + mpirun(2) + command + " >" + log + " 2>&1");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  while (!fs::exists(run_dir + "/checkpoints/latest") &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const std::vector<pid_t> ranks = children_of(launcher.pid());
  EXPECT_EQ(ranks.size(), 2u) << testing::read_text(log);
  if (ranks.size() == 2) ::kill(ranks[1], sig);
  return launcher.wait_for(std::chrono::minutes(5)).value_or(124);
}

// Rank 1 killed (SIGKILL: mpirun ends rank 0) or stopped (SIGTERM: both ranks stop at the same
// step boundary with a checkpoint there) after the first checkpoint; either run resumes to the
// uninterrupted run's weights, bit for bit.
TEST(DataParallel, ARunWhoseRankIsKilledOrStoppedResumesToTheUninterruptedResult) {
  TempDir dir;
  const std::string config = testing::write_tiny_config(dir);
  const std::vector<std::string> common = {"train.max_steps=6", "checkpoint.every_steps=2",
                                           "log.every_steps=1"};
  std::vector<std::string> reference = common;
  reference.push_back("run_dir=" + (dir / "reference"));
  std::string output;
  ASSERT_EQ(run(mpirun(2) + train_command("sft", config, reference), output), 0) << output;

  for (const int sig : {SIGKILL, SIGTERM}) {
    const std::string name = sig == SIGKILL ? "killed" : "stopped", log = dir / (name + ".log");
    std::vector<std::string> interrupted = common;
    interrupted.push_back("run_dir=" + (dir / name));
    const int status =
        interrupt_rank(train_command("sft", config, interrupted), dir / name, sig, log);
    EXPECT_NE(status, 0) << testing::read_text(log);
    EXPECT_LT(metrics_of(dir / name).size(), 6u) << "the run finished first";
    if (sig == SIGTERM) {
      EXPECT_TRUE(
          testing::contains(testing::read_text(log), "sprig: stopped by SIGTERM after step"));
      EXPECT_TRUE(testing::contains(testing::read_text(log), "continue with: mpirun -np 2 "));
    }
    std::vector<std::string> resume = interrupted;
    resume.push_back("resume");
    output.clear();
    ASSERT_EQ(run(mpirun(2) + train_command("sft", config, resume), output), 0) << output;
    EXPECT_TRUE(testing::contains(output, "resumed from "));
    testing::expect_bit_identical(testing::latest_weights(dir / name),
                                  testing::latest_weights(dir / "reference"));
  }

  // Its checkpoints resume on 2 ranks only.
  std::string single;
  std::vector<std::string> more = reference;
  more.insert(more.end(), {"train.max_steps=8", "resume"});
  EXPECT_EQ(run(train_command("sft", config, more), single), 1);
  EXPECT_TRUE(testing::contains(single,
                                "was trained on 2 rank(s), this run has 1: resume it on "
                                "as many (mpirun -np 2)"));
}

// The elements of every tensor of a safetensors file.
int64_t elements(const std::string& path) {
  int64_t n = 0;
  for (const auto& [name, t] : testing::read_tensors(path)) n += t.numel();
  return n;
}

// train.shard on two ranks trains as the whole state does on two ranks (the same rows in the same
// order, two micro-batches a step): optimizer gives the same losses, gradient norms within double
// round-off (the norm sums the shards, then the ranks) and the same weights; gradients sums each
// micro-batch over the ranks before accumulating, so its sums round differently (f32, relative
// ~1e-7; AdamW turns that into weight differences of about lr x 1e-7 per step, more where a
// gradient is near 0: measured 2.4e-7, bound 2e-6). Each rank's checkpoint holds half the moments,
// and with sharded gradients each rank keeps half the gradients; the step's memory estimate
// follows each.
TEST(DataParallel, ShardingTrainsAsTheWholeStateOnTwoRanks) {
  TempDir dir;
  const std::string config = testing::write_tiny_config(dir);
  std::map<std::string, std::string> outputs;
  for (const std::string shard : {"none", "optimizer", "gradients"})
    ASSERT_EQ(run(mpirun(2) + train_command("sft", config,
                                            {"train.max_steps=5", "log.every_steps=1",
                                             "train.grad_accumulation_steps=2",
                                             "train.shard=" + shard, "run_dir=" + (dir / shard)}),
                  outputs[shard]),
              0)
        << outputs[shard];
  const auto whole = metrics_of(dir / "none");
  const auto whole_weights = testing::latest_weights(dir / "none");
  ASSERT_EQ(whole.size(), 5u);
  // sprig plan's estimate of each (docs/semantics.md §10.12) is within 10% of rank 0's peak.
  for (const std::string shard : {"none", "optimizer", "gradients"}) {
    PlannedStep step = plan_step(
        load_train_config(config, {"train.grad_accumulation_steps=2", "train.shard=" + shard}));
    step.compute = DType::f32;
    step.ranks = 2;
    const double estimate =
        estimate_step_memory(step.shapes(), step.trained_parameters, step.compute).total();
    const double peak = testing::peak_memory_of(dir / shard);
    std::cout << shard << ": estimate " << estimate << " bytes, peak " << peak << "\n";
    EXPECT_NEAR(estimate / peak, 1.0, 0.1) << shard;
  }
  for (const std::string shard : {"optimizer", "gradients"}) {
    const double tolerance = shard == "optimizer" ? 1e-9 : 1e-6;
    const auto sharded = metrics_of(dir / shard);
    ASSERT_EQ(sharded.size(), 5u);
    for (size_t i = 0; i < 5; ++i) {
      EXPECT_NEAR(sharded[i].at("loss").get<double>(), whole[i].at("loss").get<double>(),
                  tolerance * whole[i].at("loss").get<double>())
          << shard << " step " << i + 1;
      EXPECT_NEAR(sharded[i].at("grad_norm").get<double>(), whole[i].at("grad_norm").get<double>(),
                  tolerance * whole[i].at("grad_norm").get<double>())
          << shard << " step " << i + 1;
    }
    const auto sharded_weights = testing::latest_weights(dir / shard);
    ASSERT_EQ(sharded_weights.size(), whole_weights.size());
    double worst = 0;
    for (const auto& [name, w] : whole_weights)
      worst = std::max(worst, max_abs_difference(sharded_weights.at(name), w));
    EXPECT_LE(worst, shard == "optimizer" ? 0.0 : 2e-6) << shard;
    std::cout << shard << ": largest weight difference " << worst << "\n";

    // The moments: optimizer.safetensors whole, one file per rank of half of them each (its shard
    // of every bucket, a bucket padded by at most one element).
    const std::string whole_ck = dir / "none/checkpoints/step_00000005",
                      sharded_ck = dir / (shard + "/checkpoints/step_00000005");
    EXPECT_FALSE(fs::exists(sharded_ck + "/optimizer.safetensors"));
    const int64_t all = elements(whole_ck + "/optimizer.safetensors");
    const int64_t buckets = static_cast<int64_t>(
        testing::read_tensors(sharded_ck + "/optimizer.rank0.safetensors").size() / 2);
    for (const std::string rank : {"0", "1"}) {
      const int64_t mine = elements(sharded_ck + "/optimizer.rank" + rank + ".safetensors");
      std::cout << shard << ": rank " << rank << " keeps " << mine << " of " << all << " moments\n";
      EXPECT_LE(std::abs(2 * mine - all), 2 * buckets) << "rank " << rank;
    }
    EXPECT_EQ(nlohmann::json::parse(testing::read_text(sharded_ck + "/trainer_state.json"))
                  .at("optimizer_shards"),
              2);
  }
  // A sharded checkpoint's model is whole: it exports as any other.
  std::string exported;
  ASSERT_EQ(run(std::string(SPRIG_BIN) + " convert --to-hf " +
                    (dir / "gradients/checkpoints/latest") + " --out " + (dir / "hf"),
                exported),
            0)
      << exported;
  testing::expect_bit_identical(testing::read_tensors(dir / "hf/model.safetensors"),
                                testing::latest_weights(dir / "gradients"));
  // 78208 f32 parameters: 0.60 MiB of moments and 0.30 MiB of gradients.
  EXPECT_TRUE(testing::contains(outputs["optimizer"],
                                "train.shard optimizer: each rank keeps 0.30 of the 0.60 MiB of "
                                "AdamW moments and all the 0.30 MiB of gradients"))
      << outputs["optimizer"];
  EXPECT_TRUE(testing::contains(outputs["gradients"],
                                "train.shard gradients: each rank keeps 0.30 of the 0.60 MiB of "
                                "AdamW moments and 0.15 of the 0.30 MiB of gradients"))
      << outputs["gradients"];
}

// A run with sharded gradients whose rank is killed (SIGKILL) or stopped (SIGTERM) resumes to the
// uninterrupted run's weights, bit for bit; a checkpoint resumes with the other sharding too.
TEST(DataParallel, AShardedRunResumesBitForBitAndWithTheOtherSharding) {
  TempDir dir;
  const std::string config = testing::write_tiny_config(dir);
  const std::vector<std::string> common = {"train.max_steps=6", "checkpoint.every_steps=2",
                                           "log.every_steps=1", "train.shard=gradients"};
  std::vector<std::string> reference = common;
  reference.push_back("run_dir=" + (dir / "reference"));
  std::string output;
  ASSERT_EQ(run(mpirun(2) + train_command("sft", config, reference), output), 0) << output;
  for (const int sig : {SIGKILL, SIGTERM}) {
    const std::string name = sig == SIGKILL ? "killed" : "stopped", log = dir / (name + ".log");
    std::vector<std::string> interrupted = common;
    interrupted.push_back("run_dir=" + (dir / name));
    EXPECT_NE(interrupt_rank(train_command("sft", config, interrupted), dir / name, sig, log), 0)
        << testing::read_text(log);
    EXPECT_LT(metrics_of(dir / name).size(), 6u) << "the run finished first";
    interrupted.push_back("resume");
    output.clear();
    ASSERT_EQ(run(mpirun(2) + train_command("sft", config, interrupted), output), 0) << output;
    EXPECT_TRUE(testing::contains(output, "resumed from "));
    testing::expect_bit_identical(testing::latest_weights(dir / name),
                                  testing::latest_weights(dir / "reference"));
  }

  // A checkpoint resumes with the other sharding: a sharded one with the moments whole (each rank
  // joins every rank's shards), a whole one sharded (each rank takes its shards of the whole
  // moments). Each continues as with its own sharding, up to the rounding of the gradient norm.
  std::vector<std::string> whole = common;
  whole.insert(whole.end(), {"run_dir=" + (dir / "whole"), "train.shard=none"});
  ASSERT_EQ(run(mpirun(2) + train_command("sft", config, whole), output), 0) << output;
  const auto continued = [&](const std::string& from, const std::string& shard) {
    const std::string name = from + "_" + shard;
    fs::copy(dir / from, dir / name, fs::copy_options::recursive);
    std::vector<std::string> o = common;
    o.insert(o.end(),
             {"run_dir=" + (dir / name), "train.max_steps=10", "train.shard=" + shard, "resume"});
    std::string out;
    EXPECT_EQ(run(mpirun(2) + train_command("sft", config, o), out), 0) << out;
    EXPECT_EQ(metrics_of(dir / name).size(), 10u) << out;
    return testing::latest_weights(dir / name);
  };
  for (const auto& [from, other] :
       {std::pair<std::string, std::string>{"reference", "none"}, {"whole", "gradients"}}) {
    const auto same = continued(from, from == "reference" ? "gradients" : "none"),
               converted = continued(from, other);
    double worst = 0;
    for (const auto& [name, w] : same)
      worst = std::max(worst, max_abs_difference(converted.at(name), w));
    std::cout << from << " resumed with train.shard " << other << ": largest weight difference "
              << worst << "\n";
    EXPECT_LT(worst, 1e-6) << from;
  }
}

// Rank 0 of a two-rank run holds the run directory's lock for the whole run: a second run in it is
// refused with rank 0's pid, and changes nothing.
TEST(DataParallel, ASecondRunIsRefusedWhileATwoRankRunHoldsTheDirectory) {
  TempDir dir;
  const std::string config = testing::write_tiny_config(dir);
  const std::string run_dir = dir / "run", log = dir / "pair.log";
  ChildProcess pair = ChildProcess::shell(
      "exec " + mpirun(2) +
      train_command("sft", config, {"run_dir=" + run_dir, "train.max_steps=1000000"}) + " >" + log +
      " 2>&1");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!testing::contains(testing::read_text(run_dir + "/sprig-run.lock"), "\"pid\":")) {
    int status = 0;
    ASSERT_FALSE(pair.exited(status)) << testing::read_text(log);
    ASSERT_LT(std::chrono::steady_clock::now(), deadline)
        << "the two-rank run took no lock: " << testing::read_text(log);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const std::string lock = testing::read_text(run_dir + "/sprig-run.lock");
  const std::vector<pid_t> ranks = children_of(pair.pid());
  ASSERT_EQ(ranks.size(), 2u) << testing::read_text(log);
  EXPECT_TRUE(testing::contains(lock, "\"pid\":" + std::to_string(ranks[0])) ||
              testing::contains(lock, "\"pid\":" + std::to_string(ranks[1])))
      << lock;
  std::string output;
  EXPECT_EQ(run(train_command("sft", config, {"run_dir=" + run_dir, "train.max_steps=1"}), output),
            1)
      << output;
  EXPECT_TRUE(testing::contains(output, "is in use by another sprig run (pid ")) << output;
  EXPECT_EQ(testing::read_text(run_dir + "/sprig-run.lock"), lock);
  int status = 0;
  EXPECT_FALSE(pair.exited(status)) << "the two-rank run ended: " << testing::read_text(log);
}

TEST(DataParallel, AFailingRankEndsEveryRankWithItsError) {
  TempDir dir;
  const std::string config = testing::write_tiny_config(dir);
  const std::string run_dir = "run_dir=" + (dir / "run");
  std::string output;
  const auto start = std::chrono::steady_clock::now();
  // Rank 1 cannot read its config; rank 0 waits for it in the first collective.
  const int status = run(std::string(MPIRUN) + " -np 1 " + train_command("sft", config, {run_dir}) +
                             " : -np 1 " + train_command("sft", dir / "missing.yaml", {run_dir}),
                         output, 120);
  EXPECT_NE(status, 0) << output;
  EXPECT_NE(status, 124) << "a rank waited for the failed one until the time limit\n" << output;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
  EXPECT_TRUE(testing::contains(output, "missing.yaml")) << output;
  EXPECT_FALSE(fs::exists(dir / "run")) << "a failed start wrote the run directory";

  // A different setting on one rank: every rank refuses to start.
  output.clear();
  EXPECT_EQ(run(std::string(MPIRUN) + " -np 1 " + train_command("sft", config, {run_dir}) +
                    " : -np 1 " + train_command("sft", config, {run_dir, "optimizer.lr=0.5"}),
                output, 120),
            1)
      << output;
  EXPECT_TRUE(testing::contains(output,
                                "rank 1 was given a different config than rank 0: "
                                "optimizer.lr"))
      << output;
}

}  // namespace
}  // namespace sprig
