// What a usage error says: CLI11's parse errors rewritten to name the mistake and its fix (an
// unknown command or flag with the nearest names, a torchrun form partrain does not take).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace partrain::cli {

// The values a boolean flag takes, on the command line or in its PARTRAIN_<FLAG> variable, as
// every message and the help name them (CLI11 reads more: on/off, enable/disable, t/f, y/n).
inline constexpr const char* kBooleanSpellings = "1/0, true/false, yes/no";

// "partrain bench": the commands chosen so far on `root`'s command line.
std::string command_path(const CLI::App& root);

// The line after "partrain: error: " for a parse error of `root`'s command line (argv as typed).
std::string usage_error_message(const CLI::App& root, const CLI::ParseError& error, int argc,
                                const char* const* argv);

// The unknown command word left on `root`'s command line (`partrain lauch --help`), or "".
std::string unknown_command(const CLI::App& root);

}  // namespace partrain::cli
