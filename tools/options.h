// Option helpers shared by the subcommands: readable checks for numeric options, model paths that
// follow a run's latest checkpoint, --device and --dtype, the --overwrite flag of every command
// that writes and the --strict-positions flag of every command that runs a model.
#pragma once

#include <CLI/CLI.hpp>
#include <cmath>
#include <string>

#include "train/checkpoint.h"

namespace sprig::tools {

// A number option's check: "--tile: must be a positive number, got 0" instead of CLI11's range
// with 300 digits. Every numeric option goes through one of these: nan and inf are refused by all.
inline CLI::Validator number_check(bool (*ok)(double), const std::string& requirement,
                                   const std::string& name) {
  return CLI::Validator(
      [ok, requirement](std::string& value) -> std::string {
        try {
          size_t used = 0;
          const double v = std::stod(value, &used);
          if (std::isfinite(v) && ok(v) && used == value.size()) return "";
        } catch (const std::exception&) {
        }
        return "must be " + requirement + ", got " + value;
      },
      name);
}

inline const CLI::Validator kPositive =
    number_check([](double v) { return v > 0; }, "a positive number", "POSITIVE");
inline const CLI::Validator kNonNegative =
    number_check([](double v) { return v >= 0; }, "zero or positive", "NON-NEGATIVE");
inline const CLI::Validator kFinite =
    number_check([](double) { return true; }, "a finite number", "FINITE");
inline const CLI::Validator kUnitInterval =
    number_check([](double v) { return v >= 0 && v <= 1; }, "a number in [0, 1]", "[0, 1]");

// For a --model, --target or --draft option (a transform: it rewrites the value): a training run
// (its directory, checkpoints/ or checkpoints/latest) stands for its newest checkpoint
// (train/checkpoint.h: follow_latest).
inline const CLI::Validator kFollowsLatest(
    [](std::string& path) {
      path = follow_latest(path);
      return std::string();
    },
    "", "follows a run's latest checkpoint");

// --device cpu|cuda|auto (resolve_device of tensor/dtype.h reads it; auto is cuda when present).
inline CLI::Option* add_device_option(CLI::App* cmd, std::string& device) {
  return cmd->add_option("--device", device, "cpu, cuda or auto (cuda when present)")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}))
      ->capture_default_str();
}

// --dtype f32|bf16: the compute dtype of a model's weights and activations.
inline CLI::Option* add_compute_dtype_option(CLI::App* cmd, std::string& dtype) {
  return cmd->add_option("--dtype", dtype, "Compute dtype: f32 or bf16")
      ->check(CLI::IsMember({"f32", "bf16"}))
      ->capture_default_str();
}

// --overwrite: lets the command replace an earlier output of its own kind (tensor/output.h).
inline CLI::Option* add_overwrite_flag(CLI::App* cmd, bool& overwrite) {
  return cmd->add_flag("--overwrite", overwrite,
                       "replace an existing output of the same kind (a checkpoint directory or "
                       "safetensors file this command wrote, a PNG or JSON Lines file); never an "
                       "input, nor anything else");
}

// --strict-positions: refuse an input that reaches past the model's max_position_embeddings
// instead of warning (nn/positions.h).
inline CLI::Option* add_strict_positions_flag(CLI::App* cmd, bool& strict) {
  return cmd->add_flag("--strict-positions", strict,
                       "refuse an input that reaches past the model's max_position_embeddings "
                       "(default: compute it, as transformers does, with one warning)");
}

}  // namespace sprig::tools
