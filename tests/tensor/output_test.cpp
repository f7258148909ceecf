// Output (tensor/output.h): a target is checked before any work, written under a temporary name and
// renamed on commit(); what is at the target is never touched unless --overwrite names an earlier
// output of the same kind, and an uncommitted Output leaves nothing behind.
#include "tensor/output.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <iterator>
#include <set>
#include <thread>

#include "tensor/safetensors.h"
#include "tensor/tensor.h"
#include "tests/child_process.h"

namespace sprig {
namespace {

namespace fs = std::filesystem;

// A fresh directory for one test, removed afterwards.
struct Scratch {
  Scratch() : root(fs::temp_directory_path() / ("sprig_output_" + std::to_string(::getpid()))) {
    fs::remove_all(root);
    fs::create_directories(root);
  }
  ~Scratch() { fs::remove_all(root); }
  std::string operator/(const std::string& name) const { return (root / name).string(); }
  std::set<std::string> entries() const {
    std::set<std::string> out;
    for (const auto& e : fs::directory_iterator(root)) out.insert(e.path().filename().string());
    return out;
  }
  fs::path root;
};

void write_text(const std::string& path, const std::string& text) { std::ofstream(path) << text; }
std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

std::string never(const fs::path&, const OutputKind& kind) {
  return "is not a " + std::string(kind.name) + " that sprig wrote";
}
std::string refuses_unmarked(const fs::path& dir, const OutputKind& kind) {
  return fs::exists(dir / "marker") ? "" : never(dir, kind);
}
const OutputKind kTestDir{"test directory", nullptr, true, refuses_unmarked};
const OutputKind kUnrecognisable{"test file", nullptr, false, never};

TEST(Output, WritesThroughATemporaryRenamedOnCommit) {
  Scratch s;
  Output out(s / "a.txt", kUnrecognisable);
  EXPECT_EQ(fs::path(out.temp()).parent_path(), s.root);
  EXPECT_FALSE(fs::exists(s / "a.txt"));
  write_text(out.temp(), "new");
  EXPECT_FALSE(fs::exists(s / "a.txt"));  // invisible until commit
  out.commit();
  EXPECT_EQ(read_text(s / "a.txt"), "new");
  EXPECT_EQ(s.entries(), std::set<std::string>{"a.txt"});
}

TEST(Output, AnUncommittedOutputLeavesNothing) {
  Scratch s;
  {
    Output file(s / "a.txt", kUnrecognisable);
    write_text(file.temp(), "half");
    Output dir(s / "d", kTestDir);
    EXPECT_TRUE(fs::is_directory(dir.temp()));
    write_text(dir.temp() + "/x", "half");
  }
  EXPECT_EQ(s.entries(), std::set<std::string>{});
}

TEST(Output, RefusesExistingFilesUnlessOverwriteRecognisesThem) {
  Scratch s;
  write_text(s / "a.txt", "keep");
  EXPECT_EQ(error_of([&] { Output o(s / "a.txt", kUnrecognisable); }),
            "[--out] " + (s / "a.txt") +
                " already exists: choose another name, or give --overwrite to replace it");
  EXPECT_EQ(error_of([&] { Output o(s / "a.txt", kUnrecognisable, true); }),
            "[--out] " + (s / "a.txt") +
                " is not a test file that sprig wrote: refusing to replace it, even with "
                "--overwrite");
  EXPECT_EQ(read_text(s / "a.txt"), "keep");

  // A safetensors file the same command wrote is recognised and replaced whole on commit, not
  // before.
  save_safetensors(s / "t.safetensors", {{"x", Tensor::zeros({2}, DType::f32)}},
                   {{kOutputKey, "score"}});
  Output out(s / "t.safetensors", safetensors_output("score"), true);
  EXPECT_EQ(out.metadata(), (std::map<std::string, std::string>{{kOutputKey, "score"}}));
  save_safetensors(out.temp(), {{"y", Tensor::zeros({3}, DType::f32)}}, out.metadata());
  EXPECT_TRUE(SafetensorsFile(s / "t.safetensors").info("x").shape == Shape{2});
  out.commit();
  EXPECT_TRUE(SafetensorsFile(s / "t.safetensors").info("y").shape == Shape{3});

  // An empty file counts as nothing.
  write_text(s / "empty", "");
  EXPECT_NO_THROW(Output(s / "empty", kUnrecognisable));
}

TEST(Output, ReplacesOnlyASafetensorsFileTheSameCommandWrote) {
  Scratch s;
  const std::string t = s / "t.safetensors";
  const auto refusal = [&](const std::string& why) {
    return "[--out] " + t + " " + why + ": refusing to replace it, even with --overwrite";
  };
  const auto replace = [&] { Output o(t, safetensors_output("score"), true); };
  // Written by another program: a header without metadata, or without sprig's key.
  save_safetensors_raw(t, {});
  EXPECT_EQ(error_of(replace), refusal("is a safetensors file that sprig did not write (its "
                                       "metadata has no \"sprig.output\")"));
  // Written by sprig, but by another command (an optimizer state, a mask).
  save_safetensors(t, {{"m", Tensor::zeros({2}, DType::f32)}}, {{kOutputKey, "mask"}});
  EXPECT_EQ(error_of(replace), refusal("is the output of sprig mask, not of sprig score (its "
                                       "metadata's \"sprig.output\")"));
  EXPECT_TRUE(SafetensorsFile(t).contains("m"));
  write_text(t, "not safetensors");
  EXPECT_EQ(error_of(replace), refusal("is not a safetensors file that sprig wrote"));
}

TEST(Output, NeverReplacesOrEntersAnInput) {
  Scratch s;
  fs::create_directories(s / "model");
  write_text(s / "model/model.safetensors", "weights");
  write_text(s / "in.jsonl", "{}\n");
  fs::create_hard_link(s / "in.jsonl", s / "hard.jsonl");
  fs::create_symlink(s / "in.jsonl", s / "soft.jsonl");
  fs::create_directory_symlink(s / "model", s / "model_link");
  const std::vector<InputPath> inputs = {{"--model", s / "model", true},
                                         {"--input", s / "in.jsonl"}};
  const std::string never_input =
      ": an output never replaces or enters one of the command's inputs, even with --overwrite; "
      "choose another path";
  for (const bool overwrite : {false, true}) {
    const auto error = [&](const std::string& path, const OutputKind& kind) {
      return error_of([&] { Output o(path, kind, overwrite, "--out", inputs); });
    };
    EXPECT_EQ(error(s / "in.jsonl", kUnrecognisable),
              "[--out] " + (s / "in.jsonl") + " is also --input" + never_input);
    EXPECT_EQ(error(s / "hard.jsonl", kUnrecognisable), "[--out] " + (s / "hard.jsonl") +
                                                            " is the same file as --input " +
                                                            (s / "in.jsonl") + never_input);
    EXPECT_EQ(error(s / "soft.jsonl", kUnrecognisable), "[--out] " + (s / "soft.jsonl") +
                                                            " is the same file as --input " +
                                                            (s / "in.jsonl") + never_input);
    EXPECT_EQ(error(s / "model/model.safetensors", kUnrecognisable),
              "[--out] " + (s / "model/model.safetensors") + " lies inside --model " +
                  (s / "model") + never_input);
    EXPECT_EQ(error(s / "model_link/new.safetensors", kUnrecognisable),
              "[--out] " + (s / "model_link/new.safetensors") + " lies inside --model " +
                  (s / "model") + never_input);
    EXPECT_EQ(error(s.root.string(), kTestDir),
              "[--out] " + s.root.string() + " holds --model " + (s / "model") + never_input);
  }
  EXPECT_EQ(read_text(s / "model/model.safetensors"), "weights");
  EXPECT_EQ(read_text(s / "in.jsonl"), "{}\n");
}

TEST(Output, TwoOutputsOfOneCommandNeverShareAPath) {
  Scratch s;
  Output out(s / "a", kUnrecognisable);
  EXPECT_EQ(error_of([&] { Output png(s / "./a", kUnrecognisable, false, "--png"); }),
            "[--png] " + (s / "./a") + " is also --out: give each output a path of its own");
  fs::create_directories(s / "d");
  Output dir(s / "d", kTestDir, false, "--dir");
  EXPECT_EQ(error_of([&] { Output inner(s / "d/x", kUnrecognisable, false, "--png"); }),
            "[--png] " + (s / "d/x") + " lies inside --dir " + (s / "d") +
                ": give each output a path of its own");
  EXPECT_TRUE(fs::is_empty(s / "d"));
  // Once committed, an output may be replaced by a later one.
  write_text(out.temp(), "1");
  out.commit();
  EXPECT_EQ(error_of([&] { Output again(s / "a", kUnrecognisable); }),
            "[--out] " + (s / "a") +
                " already exists: choose another name, or give --overwrite to replace it");
}

TEST(Output, RefusesWrongTypesAndMissingParents) {
  Scratch s;
  fs::create_directories(s / "dir");
  write_text(s / "file", "keep");
  EXPECT_EQ(error_of([&] { Output o(s / "dir", kUnrecognisable, true, "--png"); }),
            "[--png] " + (s / "dir") + " is a directory, not a file: choose a file name");
  EXPECT_EQ(error_of([&] { Output o(s / "file", kTestDir, true); }),
            "[--out] " + (s / "file") + " is a file, not a directory: choose a directory");
  EXPECT_EQ(
      error_of([&] { Output o(s / "missing/x", kUnrecognisable); }),
      "[--out] " + (s / "missing/x") + ": the directory " + (s / "missing") + " does not exist");
  EXPECT_EQ(error_of([&] { Output o("", kUnrecognisable); }), "[--out] the output path is empty");
  EXPECT_EQ(read_text(s / "file"), "keep");
}

// A place that cannot be written is one sentence naming the path and the reason, before any work
// (not a raw filesystem error).
TEST(Output, UnwritablePlacesAreNamedWithTheReason) {
  const std::string in_proc = error_of([] { Output o("/proc/sprig_x", kTestDir); });
  EXPECT_TRUE(in_proc.starts_with("[--out] /proc/sprig_x: cannot ")) << in_proc;
  EXPECT_EQ(in_proc.find("filesystem error"), std::string::npos) << in_proc;
  if (::geteuid() == 0) return;  // root writes anywhere chmod can forbid
  Scratch s;
  fs::create_directories(s / "ro");
  fs::permissions(s / "ro", fs::perms::owner_read | fs::perms::owner_exec);
  EXPECT_EQ(error_of([&] { Output o(s / "ro/x", kUnrecognisable); }),
            "[--out] " + (s / "ro/x") + ": cannot write in " + (s / "ro") + " (Permission denied)");
  fs::permissions(s / "ro", fs::perms::owner_all);
}

TEST(Output, DirectoriesAreReplacedOnlyWhenRecognised) {
  Scratch s;
  // A user's directory with other files is never touched, with or without --overwrite.
  fs::create_directories(s / "project/src");
  write_text(s / "project/src/main.py", "x");
  EXPECT_EQ(error_of([&] { Output o(s / "project", kTestDir); }),
            "[--out] " + (s / "project") +
                " already exists and is not empty: choose a new directory, or give --overwrite "
                "to replace it");
  EXPECT_EQ(error_of([&] { Output o(s / "project/", kTestDir, true); }),
            "[--out] " + (s / "project/") +
                " is not a test directory that sprig wrote: refusing to replace it, even with "
                "--overwrite");
  EXPECT_EQ(read_text(s / "project/src/main.py"), "x");

  // An empty directory is taken; a recognised one is replaced whole at commit.
  fs::create_directories(s / "empty");
  Output first(s / "empty", kTestDir);
  write_text(first.temp() + "/marker", "1");
  first.commit();
  EXPECT_EQ(read_text(s / "empty/marker"), "1");
  Output second(s / "empty", kTestDir, true);
  write_text(second.temp() + "/marker", "2");
  EXPECT_EQ(read_text(s / "empty/marker"), "1");
  second.commit();
  EXPECT_EQ(read_text(s / "empty/marker"), "2");
  EXPECT_EQ(s.entries(), (std::set<std::string>{"empty", "project"}));
}

TEST(Output, NeverReplacesTheCurrentDirectory) {
  Scratch s;
  fs::create_directories(s / "run/inner");
  write_text(s / "run/marker", "keep");
  const fs::path cwd = fs::current_path();
  fs::current_path(s / "run/inner");
  const std::string inner = error_of([&] { Output o(".", kTestDir, true); });
  const std::string outer = error_of([&] { Output o("..", kTestDir, true); });
  fs::current_path(cwd);
  EXPECT_EQ(inner, "[--out] . is or holds the current directory: choose another directory");
  EXPECT_EQ(outer, "[--out] .. is or holds the current directory: choose another directory");
  EXPECT_EQ(read_text(s / "run/marker"), "keep");
}

// A symbolic link at the target, dangling or not, is replaced only with --overwrite, as a link:
// the file it points to stays as it was, and the commit says so.
TEST(Output, ASymbolicLinkIsReplacedOnlyOnRequestAndNeverItsTarget) {
  const Scratch dir;
  write_text(dir / "theirs.txt", "keep me");
  write_text(dir / "empty.txt", "");
  fs::create_symlink(dir / "theirs.txt", dir / "link");
  fs::create_symlink(dir / "empty.txt", dir / "to_empty");
  fs::create_symlink(dir / "nowhere", dir / "dangling");
  for (const char* name : {"link", "to_empty", "dangling"})
    EXPECT_EQ(error_of([&] { Output(dir / name, kUnrecognisable); }),
              "[--out] " + dir / name + " is a symbolic link to " +
                  fs::read_symlink(dir / name).string() +
                  ": choose another name, or give --overwrite to replace the link (what it points "
                  "to stays as it is)")
        << name;
  for (const char* name : {"link", "dangling"}) {
    Output out(dir / name, kUnrecognisable, /*overwrite=*/true);
    write_text(out.temp(), "new");
    ::testing::internal::CaptureStderr();
    out.commit();
    EXPECT_EQ(::testing::internal::GetCapturedStderr(),
              "sprig: [--out] " + dir / name + " was a symbolic link to " +
                  (name == std::string("link") ? dir / "theirs.txt" : dir / "nowhere") +
                  ": the link is replaced, " +
                  (name == std::string("link") ? dir / "theirs.txt" : dir / "nowhere") +
                  " stays as it was\n");
    EXPECT_FALSE(fs::is_symlink(dir / name)) << name;
    EXPECT_EQ(read_text(dir / name), "new") << name;
  }
  EXPECT_EQ(read_text(dir / "theirs.txt"), "keep me");
  EXPECT_FALSE(fs::exists(dir / "nowhere"));
  // A directory output over a link to a directory: the link goes, the directory stays.
  fs::create_directories(dir / "their_dir");
  write_text(dir / "their_dir/notes", "mine");
  fs::create_symlink(dir / "their_dir", dir / "dir_link");
  Output out(dir / "dir_link", kTestDir, /*overwrite=*/true);
  write_text(out.temp() + "/marker", "");
  ::testing::internal::CaptureStderr();
  out.commit();
  ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(fs::is_symlink(dir / "dir_link"));
  EXPECT_TRUE(fs::exists(dir / "dir_link/marker"));
  EXPECT_EQ(read_text(dir / "their_dir/notes"), "mine");
}

// Where the inner test below writes, set by the outer one.
const char* signal_dir() { return std::getenv("SPRIG_OUTPUT_SIGNAL_DIR"); }

// Run only by the test below (disabled otherwise): a file and a directory output, part written,
// then a wait for the signal.
TEST(OutputSignal, DISABLED_WritesUntilSignalled) {
  if (!signal_dir()) GTEST_SKIP() << "run by Output.ASignalRemovesTheTemporaries";
  const std::string dir = signal_dir();
  Output file(dir + "/out.jsonl", kUnrecognisable);
  write_text(file.temp(), "partial");
  Output directory(dir + "/model", kTestDir);
  write_text(directory.temp() + "/model.safetensors", "partial");
  write_text(directory.temp() + "/config.json", "{}");
  write_text(dir + "/ready", "");
  std::this_thread::sleep_for(std::chrono::seconds(60));
}

// A command ended by SIGTERM or SIGINT while it writes leaves no temporary behind, and ends by
// the signal.
TEST(Output, ASignalRemovesTheTemporaries) {
  for (const int sig : {SIGTERM, SIGINT}) {
    const Scratch dir;
    testing::ChildProcess inner = testing::ChildProcess::shell(
        "SPRIG_OUTPUT_SIGNAL_DIR=" + dir.root.string() + " exec /proc/" +
        std::to_string(::getpid()) +
        "/exe --gtest_also_run_disabled_tests --gtest_filter=OutputSignal.DISABLED_* >" +
        dir.root.string() + ".log 2>&1");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!fs::exists(dir / "ready") && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ASSERT_TRUE(fs::exists(dir / "ready")) << read_text(dir.root.string() + ".log");
    EXPECT_EQ(dir.entries(),
              (std::set<std::string>{".out.jsonl.tmp-" + std::to_string(inner.pid()),
                                     ".model.tmp-" + std::to_string(inner.pid()), "ready"}));
    inner.signal(sig);
    EXPECT_EQ(inner.wait_for(std::chrono::seconds(30)), -sig);
    EXPECT_EQ(dir.entries(), std::set<std::string>{"ready"}) << sig;
    fs::remove(dir.root.string() + ".log");
  }
}

TEST(Output, CommitRechecksTheTarget) {
  Scratch s;
  Output out(s / "a.txt", kUnrecognisable);
  write_text(out.temp(), "new");
  write_text(s / "a.txt", "appeared meanwhile");
  EXPECT_NE(error_of([&] { out.commit(); }).find("already exists"), std::string::npos);
  EXPECT_EQ(read_text(s / "a.txt"), "appeared meanwhile");
}

}  // namespace
}  // namespace sprig
