// Option helpers shared by the subcommands: the one rule integer options are read by, readable
// checks for numeric options, model paths that follow a run's latest checkpoint, --device and
// --dtype, the --overwrite flag of every command that writes, the --strict-positions flag of every
// command that runs a model and the end of decoding with --max-new-tokens.
#pragma once

#include <CLI/CLI.hpp>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "train/checkpoint.h"

namespace sprig::tools {

// An integer option, declared through this so that every one is read by one rule: base 10, the
// whole string, no '+' and no leading zero, within T's range ("--seed: must be an integer in [0,
// 18446744073709551615], got -1"). CLI11's own conversion (strtoll in base 0) reads 010 as octal
// 8, takes 0x3 and saturates values past the range; it only ever sees values this rule passed.
template <class T>
CLI::Option* add_int_option(CLI::App* cmd, const std::string& name, T& value,
                            const std::string& help) {
  static_assert(std::is_integral_v<T>);
  return cmd->add_option(name, value, help)->check([](const std::string& text) -> std::string {
    const size_t digits = text.rfind('-', 0) == 0 ? 1 : 0;  // where the digits start
    if (text.size() == digits ||
        text.find_first_not_of("0123456789", digits) != std::string::npos ||
        (text[digits] == '0' && text.size() > 1))
      return "must be a base-10 integer (no leading zero or '+'), got " + text;
    T parsed{};
    if (std::from_chars(text.data(), text.data() + text.size(), parsed).ec == std::errc())
      return "";
    return "must be an integer in [" + std::to_string(std::numeric_limits<T>::min()) + ", " +
           std::to_string(std::numeric_limits<T>::max()) + "], got " + text;
  });
}

// A number option's check: "--tile: must be a positive number, got 0" instead of CLI11's range
// with 300 digits. Every numeric option goes through one of these (an integer option after the
// rule above): nan and inf are refused by all.
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

// One past the last position of decoding a `prompt_tokens`-token prompt with --max-new-tokens
// `max_new_tokens` (positive). A count past int64 is refused with its true value, `what` naming
// the decoding ("[generate] decoding a 3-token prompt with --max-new-tokens 9223372036854775807").
inline int64_t decoding_end(size_t prompt_tokens, int64_t max_new_tokens, const std::string& what) {
  const uint64_t end = prompt_tokens + static_cast<uint64_t>(max_new_tokens);
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  if (end > static_cast<uint64_t>(kMax))
    throw std::runtime_error(what + " makes " + std::to_string(end) +
                             " tokens, past the largest int64 " + std::to_string(kMax));
  return static_cast<int64_t>(end);
}

}  // namespace sprig::tools
