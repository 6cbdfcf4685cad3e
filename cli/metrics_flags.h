// --metrics-port and --metrics-addr, spelled alike in `partrain launch` and `partrain trace`, and
// the endpoint they start for the node's trace before the job starts (metrics/metrics_endpoint.h).
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>

#include "core/status.h"
#include "metrics/metrics_endpoint.h"
#include "runner/launch/launch_config.h"
#include "runner/launch/traced_command.h"

namespace partrain::cli {

struct MetricsFlags {
  std::optional<int> port;
  std::optional<std::string> address;
  std::optional<std::string> linger;  // --metrics-linger, a duration
};

void add_metrics_flags(CLI::App& command, MetricsFlags& flags);

// `partrain launch`: null without --metrics-port. Otherwise settles the run id and the node's
// trace file in `config` (as the launcher would), binds and starts serving. kInvalidArgument
// (exit 2) for a port out of range, --metrics-addr alone, --no-trace, a launch under `partrain
// trace` (its ranks record into the outer trace: give --metrics-port to the outer command), a
// node other than 0 without --run-id or --trace; kUnavailable (exit 1) for a port in use.
StatusOr<std::unique_ptr<metrics::MetricsEndpoint>> start_launch_metrics(
    const MetricsFlags& flags, launch::LaunchConfig& config);

// `partrain trace`: the same, settling the run id and trace file in `config`.
StatusOr<std::unique_ptr<metrics::MetricsEndpoint>> start_trace_metrics(
    const MetricsFlags& flags, launch::TracedCommandConfig& config);

// Once the run has ended with `exit_code`: the endpoint's final refresh, then, when a request
// reached the endpoint during the run (a scraper is watching: not a CI job that never asked),
// its final page served until one scrape has fetched it or for at most --metrics-linger. No
// linger after a run a stop signal ended (130, 143, 129, 131: someone asked for the exit), and
// SIGINT, SIGTERM, SIGHUP or SIGQUIT during it end it at once. Nothing for a null endpoint.
// The exit code stays the caller's.
void finish_metrics(metrics::MetricsEndpoint* endpoint, int exit_code);

}  // namespace partrain::cli
