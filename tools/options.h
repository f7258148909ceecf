// Option helpers shared by the subcommands: readable checks for numeric options and the
// --overwrite flag of every command that writes.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace sprig::tools {

// A number option's check: "--tile: must be a positive number, got 0" instead of CLI11's range
// with 300 digits.
inline CLI::Validator number_check(bool (*ok)(double), const std::string& requirement,
                                   const std::string& name) {
  return CLI::Validator(
      [ok, requirement](std::string& value) -> std::string {
        try {
          size_t used = 0;
          if (ok(std::stod(value, &used)) && used == value.size()) return "";
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

// --overwrite: lets the command replace an earlier output of its own kind (tensor/output.h).
inline CLI::Option* add_overwrite_flag(CLI::App* cmd, bool& overwrite) {
  return cmd->add_flag("--overwrite", overwrite,
                       "replace an existing output of the same kind (a checkpoint directory, a "
                       "safetensors, PNG or JSON Lines file); anything else is never replaced");
}

}  // namespace sprig::tools
