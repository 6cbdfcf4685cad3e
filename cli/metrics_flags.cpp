#include "cli/metrics_flags.h"

#include "core/env.h"
#include "profiler/rank_tracer.h"
#include "runner/launch/run_identity.h"
#include "runner/launch/trace_path.h"

namespace partrain::cli {
namespace {

StatusOr<metrics::EndpointOptions> endpoint_options(const MetricsFlags& flags) {
  metrics::EndpointOptions options;
  if (!flags.port) {
    return invalid_argument(
        "--metrics-addr {} names where --metrics-port listens: add "
        "--metrics-port PORT",
        flags.address.value_or(""));
  }
  if (*flags.port < 0 || *flags.port > 65535) {
    return invalid_argument("--metrics-port must be in 0..65535 (0: a free port), got {}",
                            *flags.port);
  }
  options.port = static_cast<uint16_t>(*flags.port);
  if (flags.address) {
    if (flags.address->empty()) {
      return invalid_argument(
          "--metrics-addr is empty: give an address of this host, or leave "
          "it out for {}",
          metrics::kDefaultMetricsAddress);
    }
    options.address = *flags.address;
  }
  return options;
}

StatusOr<std::unique_ptr<metrics::MetricsEndpoint>> start_for(
    const MetricsFlags& flags, const launch::TracePathRequest& request) {
  ASSIGN_OR_RETURN(metrics::EndpointOptions options, endpoint_options(flags));
  ASSIGN_OR_RETURN(options.trace, launch::decide_trace_path(request));
  return metrics::MetricsEndpoint::start(options);
}

}  // namespace

void add_metrics_flags(CLI::App& command, MetricsFlags& flags) {
  command.add_option("--metrics-port", flags.port,
                     "Serve the run's live metrics for Prometheus on this port (GET /metrics; "
                     "OpenMetrics when asked), from the launcher, while the run goes on; 0: a "
                     "free port, printed (docs/metrics.md)");
  command.add_option("--metrics-addr", flags.address,
                     "The address --metrics-port listens on (default: 0.0.0.0, every IPv4 "
                     "interface, as node_exporter; 127.0.0.1: this host only; '::' IPv6 too)");
}

StatusOr<std::unique_ptr<metrics::MetricsEndpoint>> start_launch_metrics(
    const MetricsFlags& flags, launch::LaunchConfig& config) {
  if (!flags.port && !flags.address) return std::unique_ptr<metrics::MetricsEndpoint>();
  if (!config.trace) {
    return invalid_argument(
        "--metrics-port serves figures read from the run's trace: drop "
        "--no-trace, or --metrics-port");
  }
  if (env::get(profiler::kCollectorEnv).has_value()) {
    return invalid_argument(
        "under `partrain trace` the run records into the outer trace: give "
        "--metrics-port to `partrain trace` instead");
  }
  const int node_rank = config.node_rank.value_or(0);
  if (node_rank > 0 && !config.run_id && !config.trace_file) {
    return invalid_argument(
        "--metrics-port on node {} follows this node's trace file, named "
        "after node 0's run id, which the rendezvous reveals only later: "
        "pass the same --run-id to every node (e.g. $SLURM_JOB_ID), or "
        "--trace FILE",
        node_rank);
  }
  if (!config.run_id) {
    ASSIGN_OR_RETURN(std::string run_id, launch::new_run_id());
    config.run_id = run_id;
  }
  return start_for(flags, {config.trace_file, *config.run_id, node_rank});
}

StatusOr<std::unique_ptr<metrics::MetricsEndpoint>> start_trace_metrics(
    const MetricsFlags& flags, launch::TracedCommandConfig& config) {
  if (!flags.port && !flags.address) return std::unique_ptr<metrics::MetricsEndpoint>();
  if (!config.run_id) {
    std::string run_id = env::get("PARTRAIN_RUN_ID").value_or("");
    if (run_id.empty()) {
      ASSIGN_OR_RETURN(run_id, launch::new_run_id());
    }
    config.run_id = run_id;
  }
  return start_for(flags, {config.output, *config.run_id, 0});
}

}  // namespace partrain::cli
