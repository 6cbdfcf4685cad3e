// Placeholder: `partrain merge` is being written (issue 4).
#include "cli/command.h"

namespace partrain::cli {

Subcommand add_merge_command(CLI::App& parent) {
  CLI::App* cmd = parent.add_subcommand("merge", "(not yet available)");
  return {cmd, [] { return 1; }};
}

}  // namespace partrain::cli
