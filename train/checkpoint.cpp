#include "train/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

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

std::vector<SafetensorsEntry> entries_of(const std::map<std::string, Tensor>& tensors) {
  std::vector<SafetensorsEntry> out;
  for (const auto& [name, t] : tensors) out.push_back({name, t});
  return out;
}

std::map<std::string, Tensor> read_all(const fs::path& p) {
  SafetensorsFile f(p.string());
  std::map<std::string, Tensor> out;
  for (const StTensorInfo& t : f.tensors()) out[t.name] = f.load(t.name);
  return out;
}

std::string step_name(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step_%08lld", static_cast<long long>(step));
  return buf;
}

}  // namespace

CheckpointManager::CheckpointManager(std::string run_dir, int64_t keep_last)
    : run_dir_(std::move(run_dir)), keep_last_(std::max<int64_t>(keep_last, 1)) {}

std::string CheckpointManager::checkpoints_dir() const {
  return (fs::path(run_dir_) / "checkpoints").string();
}

std::string CheckpointManager::save(const QwenConfig& config,
                                    const std::map<std::string, Tensor>& model,
                                    const std::map<std::string, Tensor>& optimizer,
                                    const TrainerState& state) const {
  const fs::path root = checkpoints_dir();
  fs::create_directories(root);
  const std::string name = step_name(state.step);
  const fs::path tmp = root / (".tmp-" + name), final_dir = root / name;
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  write_text(tmp / "config.json", config.to_json().dump(2) + "\n");
  save_safetensors((tmp / "model.safetensors").string(), entries_of(model));
  save_safetensors((tmp / "optimizer.safetensors").string(), entries_of(optimizer));
  const json st = {{"step", state.step},
                   {"loader", {{"epoch", state.loader.epoch}, {"batch", state.loader.batch}}},
                   {"rng", {{"seed", state.rng_seed}, {"offset", state.rng_offset}}},
                   {"skipped_steps", state.skipped_steps},
                   {"tokens", state.tokens}};
  write_text(tmp / "trainer_state.json", st.dump(2) + "\n");
  for (const char* f :
       {"config.json", "model.safetensors", "optimizer.safetensors", "trainer_state.json"})
    fsync_path(tmp / f);
  fsync_path(tmp);
  fs::remove_all(final_dir);
  fs::rename(tmp, final_dir);
  // `latest` switches last, by an atomic rename of a fully written file.
  write_text(root / ".latest.tmp", name + "\n");
  fsync_path(root / ".latest.tmp");
  fs::rename(root / ".latest.tmp", root / "latest");
  fsync_path(root);

  std::vector<fs::path> steps;
  for (const auto& e : fs::directory_iterator(root)) {
    const std::string n = e.path().filename().string();
    if (e.is_directory() && n.rfind("step_", 0) == 0) steps.push_back(e.path());
  }
  std::sort(steps.begin(), steps.end());
  for (size_t i = 0; i + static_cast<size_t>(keep_last_) < steps.size(); ++i)
    if (steps[i] != final_dir) fs::remove_all(steps[i]);
  return final_dir.string();
}

bool CheckpointManager::has_checkpoint() const {
  return fs::exists(fs::path(checkpoints_dir()) / "latest");
}

std::optional<LoadedCheckpoint> CheckpointManager::load_latest() const {
  const fs::path root = checkpoints_dir();
  const fs::path latest = root / "latest";
  if (!fs::exists(latest)) return std::nullopt;
  std::string name;
  std::ifstream(latest) >> name;
  const fs::path dir = root / name;
  if (name.empty() || !fs::is_directory(dir))
    throw std::runtime_error(latest.string() + " names a checkpoint \"" + name +
                             "\" that does not exist");
  LoadedCheckpoint ck;
  ck.dir = dir.string();
  try {
    ck.model = read_all(dir / "model.safetensors");
    ck.optimizer = read_all(dir / "optimizer.safetensors");
    std::ifstream in(dir / "trainer_state.json");
    const json st = json::parse(in);
    ck.state.step = st.at("step").get<int64_t>();
    ck.state.loader.epoch = st.at("loader").at("epoch").get<int64_t>();
    ck.state.loader.batch = st.at("loader").at("batch").get<int64_t>();
    ck.state.rng_seed = st.at("rng").at("seed").get<uint64_t>();
    ck.state.rng_offset = st.at("rng").at("offset").get<uint64_t>();
    ck.state.skipped_steps = st.at("skipped_steps").get<int64_t>();
    ck.state.tokens = st.at("tokens").get<int64_t>();
  } catch (const std::exception& e) {
    throw std::runtime_error("checkpoint " + dir.string() + " is corrupt: " + e.what());
  }
  return ck;
}

}  // namespace sprig
