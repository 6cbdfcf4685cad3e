#include "cli/usage_error.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <regex>
#include <string_view>
#include <vector>

#include "cli/app.h"
#include "cli/command.h"
#include "cli/suggestions.h"

namespace partrain::cli {
namespace {

const CLI::App& chosen_command(const CLI::App& root) {
  const CLI::App* app = &root;
  for (auto chosen = app->get_subcommands(); !chosen.empty(); chosen = app->get_subcommands()) {
    app = chosen.front();
  }
  return *app;
}

// The commands a user may type under `parent`: not the hidden ones (the launcher's `worker`).
std::vector<std::string> visible_commands(const CLI::App& parent) {
  std::vector<std::string> names;
  for (const CLI::App* sub : parent.get_subcommands({})) {
    if (!sub->get_group().empty()) names.push_back(sub->get_name());
  }
  return names;
}

// The long flags `command` takes, its own and (through fallthrough) its parents'.
std::vector<std::string> long_flags(const CLI::App& command) {
  std::vector<std::string> flags;
  for (const CLI::App* app = &command; app != nullptr; app = app->get_parent()) {
    for (const CLI::Option* option : app->get_options()) {
      if (option->get_group().empty()) continue;  // torchrun's flags launch refuses by name
      for (const std::string& name : option->get_lnames()) flags.push_back("--" + name);
    }
  }
  return flags;
}

std::vector<std::string> leftovers(const CLI::App& root) { return root.remaining(true); }

std::string unknown_command_message(const CLI::App& parent, const std::string& typed,
                                    const std::string& path) {
  const std::vector<std::string> known = visible_commands(parent);
  std::string list;
  for (const std::string& name : known) list += (list.empty() ? "" : ", ") + name;
  const std::string where = path == "partrain" ? "" : fmt::format(" for `{}`", path);
  return fmt::format("unknown command '{}'{}{} (commands: {})", typed, where,
                     did_you_mean(closest_names(typed, known)), list);
}

// torchrun's elastic form, --nnodes MIN:MAX: partrain starts a fixed number of nodes.
std::string elastic_range_message(const std::string& message) {
  static const std::regex kRange(R"(Could not convert: --nnodes = (\d+):(\d+))");
  std::smatch range;
  if (!std::regex_search(message, range, kRange)) return "";
  return fmt::format(
      "--nnodes {}:{}: elastic node ranges (torchrun's --nnodes MIN:MAX) are not supported: "
      "partrain starts a fixed number of nodes and does not wait for more; pass the count you "
      "start, e.g. --nnodes {} (or leave --nnodes out under Slurm or mpirun, which give it)",
      range[1].str(), range[2].str(), range[2].str());
}

// A numeric flag's value that is not a number: CLI11 says "Could not convert: --seq = 1e3" or,
// behind a range check, "--dp: Value 8x not in range 1 to 1048576", as if 8x were too large.
// Said as what is wrong, with the digits when the value is a whole number in another notation.
std::string numeric_value_message(const std::string& message) {
  static const std::regex kConvert(R"(Could not convert: (--[a-z][a-z0-9-]*) = (.*))");
  static const std::regex kRange(R"((--[a-z][a-z0-9-]*): Value (.*) not in range (\S+) to (\S+))");
  std::smatch m;
  std::string flag, value, range;
  if (std::regex_search(message, m, kConvert)) {
    flag = m[1].str(), value = m[2].str();
    // A flag given twice reads "2,auto": its last value is the one taken.
    if (const size_t comma = value.rfind(','); comma != std::string::npos) {
      value = value.substr(comma + 1);
    }
    if (flag == "--nproc-per-node" && (value == "auto" || value == "cpu" || value == "gpu")) {
      return fmt::format(
          "--nproc-per-node {}: give the count of workers (torchrun's {} counts the node's {}): "
          "e.g. --nproc-per-node $(nproc), or the GPUs nvidia-smi -L lists",
          value, value, value == "cpu" ? "cores" : "GPUs, else its cores");
    }
  } else if (std::regex_search(message, m, kRange)) {
    flag = m[1].str(), value = m[2].str(),
    range = fmt::format(" from {} to {}", m[3].str(), m[4].str());
    char* end = nullptr;
    const double number = std::strtod(value.c_str(), &end);
    const double low = std::strtod(m[3].str().c_str(), nullptr);
    const double high = std::strtod(m[4].str().c_str(), nullptr);
    // A number out of the range (--dp 0, --dropout 1e3): CLI11's words are right. One inside it
    // was refused for its notation (--dp 1e3, --dp 2.5: the flag takes whole numbers).
    if (!value.empty() && end != nullptr && *end == '\0' && (number < low || number > high)) {
      return "";
    }
  } else {
    return "";
  }
  char* end = nullptr;
  const double number = std::strtod(value.c_str(), &end);
  const bool whole = !value.empty() && end != nullptr && *end == '\0' && std::isfinite(number) &&
                     number == std::trunc(number) && std::abs(number) < 9e15;
  return fmt::format("{}: '{}' is not a number the flag takes{}{}", flag, value,
                     range.empty() ? std::string() : " (a whole number" + range + ")",
                     whole ? fmt::format(": write it in digits, {} {:.0f}", flag, number) : "");
}

// Where a flag's bad value came from, when not from the command line: CLI11 says "Could not
// convert: --nproc-per-node = abc" for PARTRAIN_NPROC_PER_NODE=abc too, naming a flag nobody
// typed.
std::string value_source(const std::string& message, int argc, const char* const* argv) {
  static const std::regex kFlag(R"(--[a-z][a-z0-9-]*)");
  std::smatch flag;
  if (message.find("PARTRAIN_") != std::string::npos || !std::regex_search(message, flag, kFlag)) {
    return "";
  }
  const std::string name = flag.str();
  bool typed = false;
  bool config = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--") break;
    typed = typed || arg == name || arg.starts_with(name + "=");
    config = config || arg == "--config" || arg.starts_with("--config=");
  }
  if (typed) return "";
  // PARTRAIN_<FLAG>, or torchrun's PET_<FLAG> that a flag both share falls back on.
  const std::string variable = flag_env_name(name.substr(2));
  for (const std::string& candidate : {variable, torchrun_env_name(name.substr(2))}) {
    if (const char* value = std::getenv(candidate.c_str());
        value != nullptr && *value != '\0' && message.find(value) != std::string::npos) {
      return fmt::format(" (from {}='{}' in the environment: fix or unset it)", candidate, value);
    }
  }
  return config ? " (from the --config file)" : "";
}

// A boolean flag's value that is none: CLI11's "Could not convert: --json = maybe" read as "not a
// number". From PARTRAIN_<FLAG> the variable is named, as it may have been set for something else.
std::string boolean_value_message(const CLI::App& root, const std::string& message, int argc,
                                  const char* const* argv) {
  static const std::regex kConvert(R"(Could not convert: (--[a-z][a-z0-9-]*) = (.*))");
  std::smatch m;
  if (!std::regex_search(message, m, kConvert)) return "";
  const std::string flag = m[1].str();
  bool boolean = false;  // a switch: it expects no value
  for (const CLI::App* app = &chosen_command(root); app != nullptr; app = app->get_parent()) {
    for (const CLI::Option* option : app->get_options()) {
      for (const std::string& name : option->get_lnames()) {
        if ("--" + name == flag) boolean = boolean || option->get_expected_max() == 0;
      }
    }
  }
  if (!boolean) return "";
  std::string value = m[2].str();
  if (const size_t comma = value.rfind(','); comma != std::string::npos) {
    value = value.substr(comma + 1);
  }
  const std::string source = value_source(message, argc, argv);
  const std::string variable = flag_env_name(flag.substr(2));
  if (const char* set = std::getenv(variable.c_str());
      set != nullptr && value == set && source.find(variable) != std::string::npos) {
    return fmt::format("{}={} is not a boolean ({}) for {}; unset it", variable, set,
                       kBooleanSpellings, flag);
  }
  return fmt::format("{}: '{}' is not a boolean ({}){}", flag, value, kBooleanSpellings, source);
}

}  // namespace

std::string command_path(const CLI::App& root) {
  std::string path = "partrain";
  for (const CLI::App* app = &root;;) {
    auto chosen = app->get_subcommands();
    if (chosen.empty()) return path;
    app = chosen.front();
    path += " " + app->get_name();
  }
}

std::string unknown_command(const CLI::App& root) {
  const CLI::App& command = chosen_command(root);
  if (visible_commands(command).empty()) return "";
  for (const std::string& word : leftovers(root)) {
    if (!word.empty() && word.front() != '-') return word;
    return "";
  }
  return "";
}

std::string usage_error_message(const CLI::App& root, const CLI::ParseError& error, int argc,
                                const char* const* argv) {
  std::string message = error.what();
  const std::string path = command_path(root);
  if (std::string range = elastic_range_message(message); !range.empty()) {
    return range + value_source(message, argc, argv);  // PET_NNODES=1:2 names the variable
  }
  if (std::string boolean = boolean_value_message(root, message, argc, argv); !boolean.empty()) {
    return boolean;
  }
  if (std::string numeric = numeric_value_message(message); !numeric.empty()) {
    return numeric + value_source(message, argc, argv);
  }
  if (const std::string typed = unknown_command(root); !typed.empty()) {
    return unknown_command_message(chosen_command(root), typed, path);
  }
  const std::string kUnknownKey = "INI was not able to parse ";
  if (message.rfind(kUnknownKey, 0) == 0) {
    message = fmt::format("--config: '{}' is not a flag of `{}` (keys are long flag names)",
                          message.substr(kUnknownKey.size()), path);
  }
  if (dynamic_cast<const CLI::ExtrasError*>(&error) != nullptr) {
    for (const std::string& word : leftovers(root)) {
      if (!word.starts_with("-") || word == "-" || word == "--") continue;
      const std::string flag = word.substr(0, word.find('='));
      return fmt::format("unknown flag '{}' for `{}`{}", flag, path,
                         did_you_mean(closest_names(flag, long_flags(chosen_command(root)))));
    }
  }
  return message + value_source(message, argc, argv);
}

}  // namespace partrain::cli
