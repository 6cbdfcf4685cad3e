#include "cli/metrics_flags.h"

#include <poll.h>

#include <algorithm>
#include <chrono>

#include "core/clock.h"
#include "core/duration.h"
#include "core/env.h"
#include "core/log.h"
#include "profiler/rank_tracer.h"
#include "runner/launch/run_identity.h"
#include "runner/launch/signal_channel.h"
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
  if (flags.linger) {
    StatusOr<Nanoseconds> linger = parse_duration(*flags.linger);
    if (!linger.is_ok() || linger->count() < 0) {
      return invalid_argument(
          "--metrics-linger must be a duration (30s, 2m; 0: exit as soon as the run ends), got "
          "'{}'",
          *flags.linger);
    }
    options.linger = std::chrono::duration_cast<std::chrono::milliseconds>(*linger);
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
  command.add_option("--metrics-linger", flags.linger,
                     "Once the run ends, serve its final page (status, last figures, a hang "
                     "diagnosis) until one scrape fetched it, for at most this long; only when the "
                     "endpoint was scraped during the run; Ctrl-C ends it, the exit code stays the "
                     "run's (default: 60s; 0: none)");
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

void finish_metrics(metrics::MetricsEndpoint* endpoint, int exit_code) {
  if (endpoint == nullptr) return;
  endpoint->finish();
  const std::chrono::milliseconds linger = endpoint->linger();
  if (linger.count() <= 0 || endpoint->requests_answered() == 0) return;
  if (endpoint->final_page_served()) return;
  for (int signal : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) {
    if (exit_code == launch::exit_code_for_signal(signal)) return;  // asked to exit: no wait
  }
  // The launcher's own channel is closed by now: a stop signal would kill the process outright,
  // skipping the trace's settling; read as events, it ends the wait instead.
  StatusOr<launch::SignalChannel> signals = launch::SignalChannel::open();
  if (!signals.is_ok()) {
    log::debug("metrics: no linger: {}", signals.status().message());
    return;
  }
  log::info(
      "metrics: serving the run's final page until it is scraped, for at most {} "
      "(--metrics-linger; Ctrl-C ends it)",
      format_duration(linger));
  constexpr int64_t kCheckMs = 50;  // how soon a scrape of the final page ends the wait
  const int64_t until = monotonic_ns() + std::chrono::nanoseconds(linger).count();
  while (!endpoint->final_page_served()) {
    const int64_t left_ms = (until - monotonic_ns()) / 1'000'000;
    if (left_ms <= 0) return;
    pollfd ready{signals->fd(), POLLIN, 0};
    if (::poll(&ready, 1, static_cast<int>(std::min(left_ms, kCheckMs))) <= 0) continue;
    for (int signal : signals->drain()) {
      if (launch::is_stop_signal(signal)) return;
    }
  }
}

}  // namespace partrain::cli
