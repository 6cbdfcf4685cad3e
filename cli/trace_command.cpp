// Placeholder: `partrain trace` is being written (issue 4).
#include "cli/command.h"

namespace partrain::cli {

Subcommand add_trace_command(CLI::App& parent) {
  CLI::App* cmd = parent.add_subcommand("trace", "(not yet available)");
  return {cmd, [] { return 1; }};
}

}  // namespace partrain::cli
