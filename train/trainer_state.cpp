#include "train/trainer_state.h"

#include <cmath>
#include <cstdint>
#include <optional>
#include <stdexcept>

namespace sprig {

using json = nlohmann::json;

json trainer_state_json(const TrainerState& s, const std::string& recipe, int64_t total_steps,
                        const std::vector<json>& recipe_by_rank) {
  json j = {{"recipe_name", recipe},
            {"step", s.step},
            {"total_steps", total_steps},
            {"updates", s.updates},
            {"loader", {{"epoch", s.loader.epoch}, {"batch", s.loader.batch}}},
            {"rng", {{"seed", s.rng_seed}, {"offset", s.rng_offset}}},
            {"skipped_steps", s.skipped_steps},
            {"skipped_micro_batches", s.skipped_micro_batches},
            {"tokens", s.tokens},
            {"world_size", static_cast<int64_t>(recipe_by_rank.size())}};
  if (s.window.steps > 0)
    j["log_window"] = {{"steps", s.window.steps}, {"loss", s.window.loss}, {"sums", s.window.sums}};
  if (!recipe_by_rank[0].is_null()) j["recipe"] = recipe_by_rank[0];
  if (recipe_by_rank.size() > 1) j["recipe_by_rank"] = recipe_by_rank;
  return j;
}

std::string recipe_that_saved(const json& state) {
  if (state.is_object() && state.contains("recipe_name") && state["recipe_name"].is_string())
    return state["recipe_name"].get<std::string>();
  if (state.is_object() && state.contains("recipe") && state["recipe"].is_object()) {
    const json& r = state["recipe"];
    return r.contains("recipe") && r["recipe"].is_string() ? r["recipe"].get<std::string>()
                                                           : "dflash";
  }
  return "sft";
}

TrainerState read_trainer_state(const json& j) {
  if (!j.is_object()) throw std::runtime_error("it is not a JSON object");
  // The value at a dotted path ("loader.epoch"), or nullptr when absent.
  const auto find = [&](const std::string& path) -> const json* {
    const json* node = &j;
    for (size_t start = 0; start <= path.size();) {
      const size_t dot = std::min(path.find('.', start), path.size());
      const std::string key = path.substr(start, dot - start);
      if (!node->is_object() || !node->contains(key)) return nullptr;
      node = &(*node)[key];
      start = dot + 1;
    }
    return node;
  };
  const auto count = [&](const std::string& path, int64_t min,
                         std::optional<int64_t> fallback = std::nullopt) -> int64_t {
    const json* v = find(path);
    if (v == nullptr) {
      if (fallback) return *fallback;
      throw std::runtime_error("it has no " + path);
    }
    if (!v->is_number_integer() || v->get<int64_t>() < min ||
        (v->is_number_unsigned() && v->get<uint64_t>() > INT64_MAX))
      throw std::runtime_error(path + " is " + v->dump() +
                               ", not an integer >= " + std::to_string(min));
    return v->get<int64_t>();
  };
  const auto unsigned_of = [&](const std::string& path) -> uint64_t {
    const json* v = find(path);
    if (v == nullptr) throw std::runtime_error("it has no " + path);
    if (!v->is_number_unsigned())
      throw std::runtime_error(path + " is " + v->dump() + ", not an integer in [0, 2^64)");
    return v->get<uint64_t>();
  };
  TrainerState s;
  s.step = count("step", 1);  // a checkpoint follows a step
  // The schedule it was saved in reaches its step (absent: saved before it was kept).
  if (const int64_t total = count("total_steps", 1, s.step); s.step > total)
    throw std::runtime_error("step " + std::to_string(s.step) + " is past total_steps " +
                             std::to_string(total) + ", the schedule it was saved in");
  s.skipped_steps = count("skipped_steps", 0);
  // Every step updated or was skipped (checkpoints from before the count: every step updated).
  s.updates = count("updates", 0, s.step - s.skipped_steps);
  if (s.updates + s.skipped_steps != s.step)
    throw std::runtime_error("updates " + std::to_string(s.updates) + " and skipped_steps " +
                             std::to_string(s.skipped_steps) + " do not add up to step " +
                             std::to_string(s.step) + " (every step updates or is skipped)");
  s.loader.epoch = count("loader.epoch", 0);
  s.loader.batch = count("loader.batch", 0);
  s.rng_seed = unsigned_of("rng.seed");
  s.rng_offset = unsigned_of("rng.offset");
  s.skipped_micro_batches = count("skipped_micro_batches", 0, 0);
  s.tokens = count("tokens", 0);
  if (find("log_window") != nullptr) {  // absent: saved where a window closed
    s.window.steps = count("log_window.steps", 1);
    if (s.window.steps > s.step)
      throw std::runtime_error("log_window.steps " + std::to_string(s.window.steps) +
                               " is more than step " + std::to_string(s.step));
    // A window holding a skipped step sums a non-finite loss, which JSON writes as null.
    const auto number = [&](const std::string& path, const json* v) {
      if (v == nullptr || !(v->is_number() || v->is_null()))
        throw std::runtime_error(path + " is " + (v ? v->dump() : "absent") + ", not a number");
      return v->is_null() ? std::nan("") : v->get<double>();
    };
    s.window.loss = number("log_window.loss", find("log_window.loss"));
    const json* sums = find("log_window.sums");
    if (sums == nullptr || !sums->is_object())
      throw std::runtime_error("log_window.sums is not an object of numbers");
    for (const auto& [name, value] : sums->items())
      s.window.sums[name] = number("log_window.sums." + name, &value);
  }
  return s;
}

void check_optimizer_state(const std::string& dir, const TensorMap& model,
                           const std::vector<std::pair<std::string, Var>>& params,
                           const std::string& moments_file, const TensorMap& moments,
                           const TensorMap& expected_moments) {
  const auto check = [&](const std::string& file, const TensorMap& tensors, const std::string& name,
                         const Shape& shape, bool non_negative) {
    const std::string where = "[train] checkpoint " + dir + ": " + file + ".safetensors: ";
    const auto it = tensors.find(name);
    if (it == tensors.end()) throw std::runtime_error(where + "it has no tensor \"" + name + "\"");
    const Tensor& t = it->second;
    if (t.dtype() != DType::f32)
      throw std::runtime_error(where + "\"" + name + "\" is " + dtype_name(t.dtype()) +
                               ", not f32 (masters and moments are kept in f32)");
    if (t.shape() != shape)
      throw std::runtime_error(where + "\"" + name + "\" has shape " + shape_str(t.shape()) +
                               ", this run's " + shape_str(shape));
    const Tensor values = t.to(Device::cpu()).contiguous();
    const float* v = values.data<float>();
    int64_t non_finite = 0, negative = 0;
    for (int64_t i = 0; i < values.numel(); ++i) {
      non_finite += !std::isfinite(v[i]);
      negative += v[i] < 0;
    }
    const std::string of = " of " + std::to_string(values.numel());
    if (non_finite > 0)
      throw std::runtime_error(where + "\"" + name + "\" holds " + std::to_string(non_finite) +
                               " non-finite values (NaN or inf)" + of);
    if (non_negative && negative > 0)
      throw std::runtime_error(where + "\"" + name + "\" holds " + std::to_string(negative) +
                               " negative values" + of + ": a second moment is never negative");
  };
  for (const auto& [name, param] : params) check("model", model, name, param.shape(), false);
  for (const auto& [name, moment] : expected_moments)
    check(moments_file, moments, name, moment.shape(), name.ends_with(".exp_avg_sq"));
}

}  // namespace sprig
