// `partrain launch --tui`: the run under the live dashboard. The launcher runs on a thread of its
// own while the dashboard (tui::run_dashboard, the same loop as `partrain top`) owns the
// terminal and follows the node's trace; the ranks' output goes to per-rank log files and the
// launcher's own messages to a file. Once the dashboard closes and the run has ended, the
// launcher's messages and the lowest rank's output (a built-in workload's summary) are printed
// and the log directory named.
#pragma once

#include "core/status.h"
#include "runner/launch/launch_config.h"

namespace partrain::cli {

// The run's exit code, as `partrain launch` without --tui. kInvalidArgument (exit 2) when the
// dashboard cannot be shown: no terminal, one smaller than 80x24, tracing off, an outer
// `partrain trace` owning the trace file, the trace file already there, or a node other than 0
// whose trace is named by a run id it does not know yet (no --run-id, no --trace).
StatusOr<int> launch_with_dashboard(launch::LaunchConfig config);

}  // namespace partrain::cli
