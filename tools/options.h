// Option helpers shared by the subcommands: readable checks for numeric options and the
// --overwrite flag of every command that writes.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace sprig::tools {

// "--tile: must be a positive number, got 0" instead of CLI11's range with 300 digits.
inline const CLI::Validator kPositive(
    [](std::string& value) -> std::string {
      try {
        size_t used = 0;
        if (std::stod(value, &used) > 0 && used == value.size()) return "";
      } catch (const std::exception&) {
      }
      return "must be a positive number, got " + value;
    },
    "POSITIVE");

inline const CLI::Validator kNonNegative(
    [](std::string& value) -> std::string {
      try {
        size_t used = 0;
        if (std::stod(value, &used) >= 0 && used == value.size()) return "";
      } catch (const std::exception&) {
      }
      return "must be zero or positive, got " + value;
    },
    "NON-NEGATIVE");

// --overwrite: lets the command replace an earlier output of its own kind (tensor/output.h).
inline CLI::Option* add_overwrite_flag(CLI::App* cmd, bool& overwrite) {
  return cmd->add_flag("--overwrite", overwrite,
                       "replace an existing output of the same kind (a checkpoint directory, a "
                       "safetensors, PNG or JSON Lines file); anything else is never replaced");
}

}  // namespace sprig::tools
