#include "cli/app.h"

#include <fmt/format.h>
#include <poll.h>
#include <stdio_ext.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <regex>
#include <sstream>

#include "cli/command.h"
#include "cli/command_config.h"
#include "cli/help_text.h"
#include "cli/usage_error.h"
#include "cli/version.h"
#include "core/log.h"

namespace partrain::cli {
namespace {

// without_env_var's mark, kept on the option itself (CLI11 has no user data on an option): a
// validator by this name that checks nothing and is never run.
constexpr const char* kNoEnvVarMark = "partrain:no-env-var";

// also_from_torchrun_env's mark: a validator named this prefix and the variables, comma-separated.
constexpr std::string_view kTorchrunEnvMark = "partrain:torchrun-env:";

// The variables also_from_torchrun_env gave `option`, in order.
std::vector<std::string> torchrun_env_names(CLI::Option* option) {
  for (int i = 0;; ++i) {
    const CLI::Validator* validator = nullptr;
    try {
      validator = option->get_validator(i);
    } catch (const CLI::OptionNotFound&) {
      return {};
    }
    const std::string& name = validator->get_name();
    if (!name.starts_with(kTorchrunEnvMark)) continue;
    std::vector<std::string> names;
    std::stringstream list(name.substr(kTorchrunEnvMark.size()));
    for (std::string variable; std::getline(list, variable, ',');) names.push_back(variable);
    return names;
  }
}

// The variable a flag reads: PARTRAIN_<FLAG>, or when that is unset the first of torchrun's that
// is set.
std::string bound_env_name(CLI::Option* option) {
  const std::string own = flag_env_name(option->get_lnames().front());
  if (const char* value = std::getenv(own.c_str()); value != nullptr) return own;
  for (const std::string& name : torchrun_env_names(option)) {
    if (std::getenv(name.c_str()) != nullptr) return name;
  }
  return own;
}

bool has_no_env_var_mark(const CLI::Option* option) {
  try {
    // CLI11 2.1 looks validators up only through a non-const option; the lookup changes nothing.
    return const_cast<CLI::Option*>(option)->get_validator(kNoEnvVarMark) != nullptr;
  } catch (const CLI::OptionNotFound&) {
    return false;
  }
}

bool is_bindable(const CLI::Option* option) {
  if (option->get_lnames().empty()) return false;  // positionals: the worker command, files
  if (has_no_env_var_mark(option)) return false;
  if (option->get_group().empty()) return false;  // hidden: torchrun's flags launch refuses
  const std::string& name = option->get_lnames().front();
  return name != "help" && name != "version" && name != "config" && name != "help-all";
}

// Every long flag of the command being run reads PARTRAIN_<FLAG> when not given on the command
// line or in --config. A command's variables are bound when it is chosen (CLI11 runs a
// subcommand's pre-parse callback as it meets its name), not before: CLI11 reads the variables of
// every command, and a launch's PARTRAIN_STEPS=1:1 or PARTRAIN_LAYERS=abc made `partrain memory`
// fail to convert flags it was not given.
void bind_own_env_vars(CLI::App& command) {
  for (CLI::Option* option : command.get_options()) {
    if (is_bindable(option)) option->envname(bound_env_name(option));
  }
}

void bind_all_env_vars(CLI::App& command) {
  bind_own_env_vars(command);
  for (CLI::App* sub : command.get_subcommands({})) bind_all_env_vars(*sub);
}

void bind_flag_env_vars_when_chosen(CLI::App& command) {
  for (CLI::App* sub : command.get_subcommands({})) {
    sub->preparse_callback([sub](size_t) { bind_own_env_vars(*sub); });
    bind_flag_env_vars_when_chosen(*sub);
  }
}

// --help-all expands every level of commands: CLI11's stops at the first, so `bench
// collectives`' flags were not in it.
class ExpandingFormatter final : public CLI::Formatter {
 public:
  std::string make_expanded(const CLI::App* sub) const override {
    std::stringstream out;
    out << sub->get_display_name(true) << "\n";
    out << make_description(sub);
    out << make_positionals(sub);
    out << make_groups(sub, CLI::AppFormatMode::Sub);
    out << make_subcommands(sub, CLI::AppFormatMode::All);
    std::string text = CLI::detail::find_and_replace(out.str(), "\n\n", "\n");
    text = text.substr(0, text.size() - 1);  // as CLI11's: no final newline before indenting
    return CLI::detail::find_and_replace(text, "\n", "\n  ") + "\n";
  }

  // CLI11 shows a flag's type with its checks' own descriptions (`INT:INT in [1 - 1048576]`).
  std::string make_option_opts(const CLI::Option* option) const override {
    std::string text = CLI::Formatter::make_option_opts(option);
    const std::string type = option->get_type_name();
    if (option->get_option_text().empty() && option->get_type_size() != 0 && !type.empty() &&
        text.rfind(" " + type, 0) == 0) {
      // "INT 1 to 1024" with a default reads "INT=20 (1 to 1024)": the value's limits after it.
      const std::string words = type_in_words(type);
      std::string rest = text.substr(type.size() + 1);
      const size_t space = words.front() == '{' ? std::string::npos : words.find(' ');
      if (space == std::string::npos) {
        text = " " + words + rest;
      } else {
        const std::string given_default =
            rest.starts_with("=") ? rest.substr(0, rest.find(' ')) : std::string();
        text = " " + words.substr(0, space) + given_default + " (" + words.substr(space + 1) +
               ")" + rest.substr(given_default.size());
      }
    }
    return text;
  }
};

}  // namespace

CLI::Option* without_env_var(CLI::Option* option) {
  CLI::Validator mark([](std::string&) { return std::string(); }, "", kNoEnvVarMark);
  mark.active(false);
  return option->check(std::move(mark));
}

CLI::Option* also_from_torchrun_env(CLI::Option* option, const std::vector<std::string>& names) {
  std::string mark(kTorchrunEnvMark);
  for (const std::string& name : names) mark += (mark.back() == ':' ? "" : ",") + name;
  CLI::Validator validator([](std::string&) { return std::string(); }, "", mark);
  validator.active(false);
  return option->check(std::move(validator));
}

void env_yields_to_alternatives(std::vector<CLI::Option*> group) {
  // CLI11 reads PARTRAIN_<FLAG> after the command line and the --config file, for flags still
  // unset. A check runs when a flag's value is parsed (at once, with trigger_on_parse) and is the
  // one hook before that: the given flag takes its alternatives' variables away. From the
  // environment a value is checked after every variable was read, so the variables stay.
  for (CLI::Option* given : group) {
    given->trigger_on_parse();
    given->check(CLI::Validator(
        [group, given](std::string&) {
          for (CLI::Option* other : group) {
            if (other != given) other->envname("");
          }
          return std::string();
        },
        "", ""));
  }
}

namespace {

std::string env_name(std::string name, const std::string& long_name) {
  for (char c : long_name) {
    name += (c == '-') ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  return name;
}

}  // namespace

std::string flag_env_name(const std::string& long_name) { return env_name("PARTRAIN_", long_name); }

std::string torchrun_env_name(const std::string& long_name) { return env_name("PET_", long_name); }

std::string set_in_environment(const std::string& flag, const std::optional<std::string>& value) {
  const std::string name = flag_env_name(flag);
  const char* set = std::getenv(name.c_str());
  if (set == nullptr || *set == '\0' || (value && *value != set)) return "";
  return fmt::format("{}={}", name, set);
}

std::string from_environment_note(const std::string& flag) {
  const std::string exported = set_in_environment(flag);
  if (exported.empty()) return "";
  return fmt::format(" (from {} in the environment: unset it for a command)", exported);
}

Status check_json_or_explain(bool json, bool explain, std::string_view what_explain_shows) {
  if (!json || !explain) return Status::ok();
  return invalid_argument("--explain shows {} as text: drop --json or --explain{}",
                          what_explain_shows, from_environment_note("json"));
}

std::vector<std::string> flag_env_names(const CLI::App& command) {
  std::vector<std::string> names;
  for (const CLI::Option* option : command.get_options()) {
    if (is_bindable(option)) names.push_back(flag_env_name(option->get_lnames().front()));
  }
  return names;
}

int run(int argc, char** argv) {
  // Named, not argv[0]: help's "Usage:" line reads `partrain`, not the path it was run by.
  CLI::App app{"partrain: launch, trace, analyse and size distributed LLM training jobs.", "partrain"};
  app.set_help_all_flag("--help-all", "Print help for every subcommand and exit");
  app.formatter(std::make_shared<ExpandingFormatter>());
  app.set_version_flag("--version", std::function<std::string()>(version_text),
                       "Print the version and compiled-in backends");
  bool verbose = false;
  bool quiet = false;
  app.add_flag("-v,--verbose", verbose, "Print debug messages on stderr");
  app.add_flag("-q,--quiet", quiet, "Print only warnings and errors on stderr");
  app.set_config("--config", "", "TOML file with flags of the subcommand (key = long flag name)")
      ->check(CLI::ExistingFile);
  app.config_formatter(std::make_shared<CommandConfig>(&app));
  app.allow_config_extras(CLI::config_extras_mode::error);  // a misspelt key is an error
  app.require_subcommand(1);
  // A flag given twice takes its last value, as argparse (torchrun, python) and most shells'
  // tools do: `partrain launch ... --steps 4 --steps 8` trains 8 steps. Repeatable flags (lists)
  // keep every value. Subcommands inherit this.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.fallthrough();  // `partrain launch --config x.toml -v` reaches the root's flags
  app.footer(fmt::format(
      "Every flag can also be set through PARTRAIN_<FLAG> (e.g. PARTRAIN_NPROC_PER_NODE=4) or a "
      "--config TOML file; the command line wins, then the config file, then the environment "
      "(not --steps and --rank of analyze and export: PARTRAIN_STEPS is launch's step count; "
      "not launch's --prefix: module files set PARTRAIN_PREFIX to the install prefix). A "
      "boolean flag's variable takes {}.\n"
      "Exit codes: 0 success, 1 failure, 2 usage or invalid configuration, 3 unreadable input, "
      "124 collective or rendezvous timeout, 126 command not executable, 127 command not found, "
      "128+N killed by signal N "
      "(130 Ctrl-C); `launch` returns the first failing rank's code.",
      kBooleanSpellings));

  std::map<const CLI::App*, std::function<int()>> runners;
  for (auto add : {add_launch_command, add_trace_command, add_bench_command, add_memory_command,
                   add_export_command, add_merge_command, add_import_command,
                   add_analyze_command, add_top_command, add_recommend_command,
                   add_worker_command, add_completion_command, add_manpage_command}) {
    Subcommand sub = add(app);
    runners.emplace(sub.app, std::move(sub.run));
  }
  bind_own_env_vars(app);
  bind_flag_env_vars_when_chosen(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const bool help = e.get_name() == "CallForHelp" || e.get_name() == "CallForAllHelp";
    if (help && unknown_command(app).empty()) {
      // --help, --help-all: every command's variables show beside its flags.
      bind_all_env_vars(app);
      const std::string text = e.get_name() == "CallForHelp"
                                   ? app.help()
                                   : app.help("", CLI::AppFormatMode::All);
      std::fputs(wrap_help(text, help_width()).c_str(), stdout);
      return checked_stdout(0);
    }
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success) && !help) {
      return checked_stdout(app.exit(e));  // --version, said to fail as --help does
    }
    // A --config file that is not there is input that cannot be read, as a missing trace is.
    const std::string message = e.what();
    const std::string kMissingConfig = "--config: File does not exist: ";
    if (message.rfind(kMissingConfig, 0) == 0) {
      std::fprintf(stderr, "partrain: error: cannot read --config %s: no such file\n",
                   message.substr(kMissingConfig.size()).c_str());
      return 3;
    }
    if (e.get_name() == "FileError") {  // a --config file that cannot be read whole
      std::fprintf(stderr, "partrain: error: %s\n", message.c_str());
      return 3;
    }
    std::fprintf(stderr, "partrain: error: %s\nRun '%s --help' for usage.\n",
                 usage_error_message(app, e, argc, argv).c_str(), command_path(app).c_str());
    return 2;
  }
  if (verbose) log::set_level(log::Level::kDebug);
  if (quiet) log::set_level(log::Level::kWarning);

  for (const auto& [command, run_command] : runners) {
    if (command->parsed()) return checked_stdout(run_command());
  }
  std::fprintf(stderr, "partrain: error: no subcommand given\nRun 'partrain --help'.\n");
  return 2;
}

namespace {

// A number as CLI11 reads it, or nothing; then whether it passes `wanted`.
CLI::Validator number_check(bool (*wanted)(double), const char* what) {
  return CLI::Validator(
      [wanted, what](std::string& input) -> std::string {
        char* end = nullptr;
        const double value = std::strtod(input.c_str(), &end);
        if (input.empty() || end != input.c_str() + input.size()) {
          return fmt::format("'{}' is not a number", input);
        }
        if (!std::isfinite(value) || !wanted(value)) {
          return fmt::format("must be {}, got {}", what, input);
        }
        return {};
      },
      "", "");
}

}  // namespace

CLI::Validator positive_number() {
  return number_check([](double v) { return v > 0; }, "a positive number");
}

CLI::Validator non_negative_number() {
  return number_check([](double v) { return v >= 0; }, "0 or more");
}

CLI::Validator probability() {
  return number_check([](double v) { return v >= 0 && v < 1; }, "a probability in [0, 1)");
}

StatusOr<std::vector<int64_t>> parse_positive_list(std::string_view text, std::string_view flag,
                                                   char separator) {
  std::vector<int64_t> values;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(separator, start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view item = text.substr(start, end - start);
    int64_t value = 0;
    auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (ec != std::errc() || ptr != item.data() + item.size() || value < 1) {
      return invalid_argument(
          "{} '{}': expected positive integers separated by {}", flag, text,
          separator == ',' ? std::string("commas") : fmt::format("'{}'", separator));
    }
    values.push_back(value);
    start = end + 1;
  }
  return values;
}

const char* first_given(std::initializer_list<std::pair<const char*, bool>> flags) {
  for (const auto& [flag, given] : flags) {
    if (given) return flag;
  }
  return nullptr;
}

int report_error(const Status& status) {
  log::error("{}", status.message());
  return status.exit_code();
}

int print_report(const StatusOr<std::string>& text) {
  if (!text.is_ok()) return report_error(text.status());
  std::fwrite(text->data(), 1, text->size(), stdout);
  return checked_stdout(0);
}

namespace {

// Why a write to stdout failed before now, its errno since reused: a large write is not buffered
// and failed at once, so the flush finds only the stream's error mark. A write of no bytes is
// checked as any write is (EBADF on a descriptor not open for writing, ENOSPC from /dev/full);
// else `last`, the errno left by the write that failed when nothing since has set one.
int earlier_write_error(int last) {
  if (::write(STDOUT_FILENO, "", 0) < 0) return errno;
  // A pipe whose reader has gone is not found by an empty write: poll says so.
  pollfd out{.fd = STDOUT_FILENO, .events = POLLOUT, .revents = 0};
  if (::poll(&out, 1, 0) == 1 && (out.revents & POLLERR) != 0) return EPIPE;
  return last;
}

}  // namespace

int checked_stdout(int exit_code) {
  const int last = errno;
  const bool failed_before = std::ferror(stdout) || !std::cout.good();
  errno = 0;
  const bool written = std::fflush(stdout) == 0 && !std::ferror(stdout) && std::cout.good();
  if (written) return exit_code;
  int error = errno;
  if (error == 0 && failed_before) error = earlier_write_error(last);
  std::clearerr(stdout);  // said once
  std::cout.clear();
  if (error == EPIPE) return exit_code;  // `| head`: the reader has what it wanted
  log::error("writing stdout failed: {}", error ? std::strerror(error) : "write error");
  return exit_code == 0 ? 1 : exit_code;
}

int stdout_failure_said(int exit_code) {
  __fpurge(stdout);  // what is still buffered would fail again at exit, and be said again
  std::clearerr(stdout);
  std::cout.clear();
  return exit_code;
}

std::string invocation_line() {
  std::ifstream cmdline("/proc/self/cmdline", std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(cmdline)), std::istreambuf_iterator<char>());
  std::string line;
  // The trace is shared (exported for Perfetto, attached to bug reports): --token's secret, the
  // rendezvous password, is left out. Only partrain's own, before `--`: the rest is the command.
  bool own_flags = true;
  bool secret_next = false;
  for (size_t begin = 0; begin < text.size();) {
    size_t end = text.find('\0', begin);
    if (end == std::string::npos) end = text.size();
    std::string word = text.substr(begin, end - begin);
    if (own_flags) {
      if (secret_next) {
        word = "REDACTED";
        secret_next = false;
      } else if (word == "--") {
        own_flags = false;
      } else if (word == "--token") {
        secret_next = true;
      } else if (word.starts_with("--token=")) {
        word = "--token=REDACTED";
      }
    }
    if (!line.empty()) line += ' ';
    const bool plain = !word.empty() && word.find_first_of(" \t\n'\"$\\*?;&|<>()") ==
                                            std::string::npos;
    line += plain ? word : "'" + word + "'";
    begin = end + 1;
  }
  return line;
}

}  // namespace partrain::cli
