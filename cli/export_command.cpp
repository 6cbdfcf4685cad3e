// Placeholder: `partrain export` is being written (issue 4).
#include "cli/command.h"

namespace partrain::cli {

Subcommand add_export_command(CLI::App& parent) {
  CLI::App* cmd = parent.add_subcommand("export", "(not yet available)");
  return {cmd, [] { return 1; }};
}

}  // namespace partrain::cli
