#include "train/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "nn/checkpoint.h"
#include "tensor/json_text.h"
#include "tensor/safetensors.h"

namespace sprig {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

void fsync_path(const fs::path& p) {
  const int fd = ::open(p.c_str(), O_RDONLY);
  if (fd < 0) throw std::runtime_error(p.string() + ": cannot open to fsync");
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) throw std::runtime_error(p.string() + ": fsync failed");
}

void write_text(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::trunc);
  out << text;
  out.flush();
  if (!out) throw std::runtime_error(p.string() + ": write failed");
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<SafetensorsEntry> entries_of(const TensorMap& tensors) {
  std::vector<SafetensorsEntry> out;
  for (const auto& [name, t] : tensors) out.push_back({name, t});
  return out;
}

TensorMap read_all(const fs::path& p) {
  SafetensorsFile f(p.string());
  TensorMap out;
  for (const StTensorInfo& t : f.tensors()) out[t.name] = f.load(t.name);
  return out;
}

std::string step_name(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step_%08lld", static_cast<long long>(step));
  return buf;
}

// Where the checkpoint of `step` is written before it is renamed into place.
fs::path staged_dir(const fs::path& root, int64_t step) {
  return root / (".tmp-" + step_name(step));
}

// The checkpoint directory root/latest names. `latest` holds the name of a directory beside it
// (docs/semantics.md §10.10): a path that leaves checkpoints/ would resume another run's weights.
fs::path named_by_latest(const fs::path& root) {
  const fs::path latest = root / "latest";
  std::string name = read_text(latest);
  while (!name.empty() && std::isspace(static_cast<unsigned char>(name.back()))) name.pop_back();
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos)
    throw std::runtime_error(latest.string() + " holds \"" + name +
                             "\", which is not the name of a checkpoint in " + root.string() +
                             " (a step_<N> directory beside it)");
  const fs::path dir = root / name;
  if (!fs::is_directory(dir))
    throw std::runtime_error(latest.string() + " names a checkpoint \"" + name +
                             "\" that does not exist");
  return dir;
}

// The step of a directory named as step_name names checkpoints (step_ and eight digits or more),
// or -1 for any other name.
int64_t checkpoint_step(const std::string& name) {
  const std::string digits = name.rfind("step_", 0) == 0 ? name.substr(5) : "";
  if (digits.size() < 8 || digits.size() > 18 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return -1;
  return std::stoll(digits);
}

// Why `dir`, named like a checkpoint, is not one sprig wrote ("" when it is): a checkpoint holds a
// trainer_state.json of its directory's step. Only sprig's are replaced or pruned: a user's
// step_00000002_backup, step_00000003.bak or step_1x is never touched.
std::string not_sprigs_because(const fs::path& dir) {
  const int64_t step = checkpoint_step(dir.filename().string());
  if (step < 0) return "it is not named step_<N>";
  const fs::path file = dir / "trainer_state.json";
  if (!fs::is_regular_file(file)) return "it has no trainer_state.json";
  std::ifstream in(file);
  const json state = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!state.is_object() || !state.contains("step"))
    return file.string() + " is not a trainer state with a step";
  if (!state["step"].is_number_integer() || state["step"].get<int64_t>() != step)
    return file.string() + " says step " + state["step"].dump() + ", its directory step " +
           std::to_string(step);
  return "";
}

bool is_sprig_checkpoint(const fs::path& dir) { return not_sprigs_because(dir).empty(); }

}  // namespace

CheckpointManager::CheckpointManager(std::string run_dir, int64_t keep_last)
    : run_dir_(std::move(run_dir)), keep_last_(std::max<int64_t>(keep_last, 1)) {}

std::string CheckpointManager::checkpoints_dir() const {
  return (fs::path(run_dir_) / "checkpoints").string();
}

void CheckpointManager::check_checkpoints_are_sprigs() const {
  const fs::path root = checkpoints_dir();
  if (!fs::is_directory(root)) return;
  for (const auto& e : fs::directory_iterator(root)) {
    const std::string name = e.path().filename().string();
    if (checkpoint_step(name) < 0) continue;
    if (const std::string why = not_sprigs_because(e.path()); !why.empty())
      throw std::runtime_error(
          e.path().string() + " is named like a checkpoint but is not one sprig wrote (" + why +
          "): a checkpoint of that step would replace it; move it out of " + root.string());
  }
}

void save_tensor_file(const std::string& dir, const std::string& name, const TensorMap& tensors) {
  const fs::path path = fs::path(dir) / (name + ".safetensors");
  save_safetensors(path.string(), entries_of(tensors));
  fsync_path(path);  // by the process that wrote it: another host's fsync may not reach it
}

TensorMap load_tensor_file(const std::string& dir, const std::string& name) {
  try {
    return read_all(fs::path(dir) / (name + ".safetensors"));
  } catch (const std::exception& e) {
    throw std::runtime_error("checkpoint " + dir + " is corrupt: " + e.what());
  }
}

std::string CheckpointManager::stage(int64_t step) const {
  const fs::path root = checkpoints_dir();
  fs::create_directories(root);
  const fs::path final_dir = root / step_name(step);
  if (fs::exists(final_dir) && !is_sprig_checkpoint(final_dir))
    throw std::runtime_error(final_dir.string() +
                             " exists and sprig did not write it: the checkpoint of step " +
                             std::to_string(step) + " is not saved over it");
  for (const auto& e : fs::directory_iterator(root))
    if (e.path().filename().string().rfind(".removing-", 0) == 0) fs::remove_all(e.path());
  const fs::path tmp = staged_dir(root, step);
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  return fs::absolute(tmp).string();
}

std::string CheckpointManager::commit(const CheckpointPayload& payload, int64_t step) const {
  const fs::path root = checkpoints_dir();
  const std::string name = step_name(step);
  const fs::path tmp = staged_dir(root, step), final_dir = root / name;
  // A checkpoint leaves under a name of its own (atomically) before it is removed, so a run killed
  // meanwhile leaves no half checkpoint named step_<N>; stage() cleared what such a kill left.
  const auto discard = [&](const fs::path& dir) {
    const fs::path aside = root / (".removing-" + dir.filename().string());
    fs::remove_all(aside);
    fs::rename(dir, aside);
    fs::remove_all(aside);
  };
  write_text(tmp / "config.json", payload.config.dump(2) + "\n");
  for (const auto& [tensors_name, tensors] : payload.tensors)
    save_tensor_file(tmp.string(), tensors_name, tensors);
  write_text(tmp / "trainer_state.json", payload.state.dump(2) + "\n");
  if (!payload.resolved_config.empty())
    write_text(tmp / "config.resolved.yaml", payload.resolved_config);
  if (!payload.companions_from.empty()) copy_companion_files(payload.companions_from, tmp.string());
  // What every rank wrote, the companion files included.
  for (const auto& e : fs::recursive_directory_iterator(tmp))
    if (e.is_regular_file()) fsync_path(e.path());
  fsync_path(tmp);
  if (fs::exists(final_dir)) discard(final_dir);
  fs::rename(tmp, final_dir);
  // `latest` switches last, by an atomic rename of a fully written file.
  write_text(root / ".latest.tmp", name + "\n");
  fsync_path(root / ".latest.tmp");
  fs::rename(root / ".latest.tmp", root / "latest");
  fsync_path(root);

  std::map<int64_t, fs::path> steps;  // in step order
  for (const auto& e : fs::directory_iterator(root))
    if (e.is_directory() && is_sprig_checkpoint(e.path()))
      steps[checkpoint_step(e.path().filename().string())] = e.path();
  for (auto it = steps.begin(); steps.size() > static_cast<size_t>(keep_last_);
       it = steps.erase(it))
    if (it->second != final_dir) discard(it->second);
  return final_dir.string();
}

bool CheckpointManager::has_checkpoint() const {
  return fs::exists(fs::path(checkpoints_dir()) / "latest");
}

std::string follow_latest(const std::string& path) {
  const fs::path p(path);
  if (p.filename() == "latest" && fs::is_regular_file(p))
    return named_by_latest(p.parent_path()).string();
  for (const fs::path& root : {p, p / "checkpoints"})
    if (fs::is_regular_file(root / "latest")) return named_by_latest(root).string();
  return path;
}

std::optional<LoadedCheckpoint> CheckpointManager::load_latest(
    const std::vector<std::string>& names) const {
  const fs::path root = checkpoints_dir();
  if (!fs::exists(root / "latest")) return std::nullopt;
  const fs::path dir = named_by_latest(root);
  LoadedCheckpoint ck;
  ck.dir = dir.string();
  try {
    for (const std::string& n : names) ck.payload.tensors[n] = read_all(dir / (n + ".safetensors"));
    ck.payload.config = read_json_file((dir / "config.json").string());
    ck.payload.state = read_json_file((dir / "trainer_state.json").string());
    if (fs::exists(dir / "config.resolved.yaml"))
      ck.payload.resolved_config = read_text(dir / "config.resolved.yaml");
  } catch (const std::exception& e) {
    throw std::runtime_error("checkpoint " + dir.string() + " is corrupt: " + e.what());
  }
  return ck;
}

}  // namespace sprig
