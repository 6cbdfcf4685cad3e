// How a subcommand plugs into the `partrain` binary: it adds itself (flags, help) to its parent
// and hands back the function that runs it and returns the process exit code.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace partrain::cli {

struct Subcommand {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

Subcommand add_launch_command(CLI::App& parent);
Subcommand add_bench_command(CLI::App& parent);
Subcommand add_worker_command(CLI::App& parent);
Subcommand add_memory_command(CLI::App& parent);
Subcommand add_trace_command(CLI::App& parent);
Subcommand add_export_command(CLI::App& parent);
Subcommand add_merge_command(CLI::App& parent);
Subcommand add_import_command(CLI::App& parent);
Subcommand add_analyze_command(CLI::App& parent);
Subcommand add_recommend_command(CLI::App& parent);
Subcommand add_top_command(CLI::App& parent);
// Hidden: generate the shell completions and the man page from the command tree.
Subcommand add_completion_command(CLI::App& parent);
Subcommand add_manpage_command(CLI::App& parent);

// Checks for flags that take a positive (or a non-negative) number, with messages that say so:
// CLI11's PositiveNumber and NonNegativeNumber name their range with DBL_MAX's 309 digits.
CLI::Validator positive_number();
CLI::Validator non_negative_number();
CLI::Validator probability();  // a number in [0, 1)

// The first of `flags` (name, whether it was given) that was given, or nullptr: how a command
// names the flag that does not apply where it was given.
const char* first_given(std::initializer_list<std::pair<const char*, bool>> flags);

// "8,8,16" (or with another `separator`, "15/17"): positive integers; kInvalidArgument names
// `flag` and the text otherwise.
StatusOr<std::vector<int64_t>> parse_positive_list(std::string_view text, std::string_view flag,
                                                   char separator = ',');

// `status`'s message on stderr; returns its exit code.
int report_error(const Status& status);
// A rendered report on stdout and exit 0, or its error on stderr and the error's exit code.
int print_report(const StatusOr<std::string>& text);
// `exit_code`, or 1 with "writing stdout failed: No space left on device" when what was printed
// could not be written (`> /dev/full`), as coreutils do; a closed pipe (`| head`) is not an error.
int checked_stdout(int exit_code);
// After a command said itself why stdout could not be written: drops what is still buffered, so
// that checked_stdout does not say it again. Returns `exit_code`.
int stdout_failure_said(int exit_code);

// This process's command line as typed (shell-quoted where needed), for a trace's run row;
// partrain's own --token value reads REDACTED.
std::string invocation_line();

// Marks a flag that does not read PARTRAIN_<FLAG>: a trace-reading command's selection (--steps,
// --rank), whose variable names another command's flag (launch's --steps, a step count) and
// which, set for a launch, would silently narrow every analysis after it. Returns `option`.
CLI::Option* without_env_var(CLI::Option* option);
// Marks a flag torchrun has too: when PARTRAIN_<FLAG> is unset it reads the first of `names`
// that is set (torchrun's PET_<FLAG>, which Kubeflow's PyTorchJob exports, then any variable of
// torchrun's own), so a job set up for torchrun runs the same under partrain launch. Returns
// `option`.
CLI::Option* also_from_torchrun_env(CLI::Option* option, const std::vector<std::string>& names);
// Marks flags that are alternatives (each gives the same thing, e.g. the model: --model,
// --model-file, --params): one given on the command line or in --config makes the others' PARTRAIN_
// variables not apply, as the command line wins over the environment. Without this, a
// PARTRAIN_MODEL exported for one job conflicted with `--params` typed for the next.
void env_yields_to_alternatives(std::vector<CLI::Option*> group);
// PARTRAIN_<FLAG> for a long flag name: "nproc-per-node" -> "PARTRAIN_NPROC_PER_NODE".
std::string flag_env_name(const std::string& long_name);
// "PARTRAIN_TRACE=run.db" when a flag's variable is set (to `value`, when given: the flag's value
// may have come from it), for a message about a flag the user may not have typed; else "".
std::string set_in_environment(const std::string& flag,
                               const std::optional<std::string>& value = std::nullopt);
// " (from PARTRAIN_JSON=1 in the environment: unset it for a command)" when a refused flag's
// variable is set, else "".
std::string from_environment_note(const std::string& flag);
// A report that is either JSON or --explain's text: both given is refused (kInvalidArgument,
// naming PARTRAIN_JSON when it is set), as memory and recommend both refuse it.
Status check_json_or_explain(bool json, bool explain, std::string_view what_explain_shows);
// torchrun's PET_<FLAG> for it (argparse's env action): "nproc-per-node" -> "PET_NPROC_PER_NODE".
std::string torchrun_env_name(const std::string& long_name);
// The PARTRAIN_<FLAG> variables of every flag of this command (the launcher strips its own
// from the workers' environment).
std::vector<std::string> flag_env_names(const CLI::App& command);

}  // namespace partrain::cli
