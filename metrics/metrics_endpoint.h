// `--metrics-port` of `partrain launch` and `partrain trace`: a Prometheus / OpenMetrics
// endpoint for the node's run, served from the launcher process while the run goes on (and its
// final page for a while after, cli::finish_metrics). The socket is bound before the job starts
// (a port in use stops the command first); pages come from a PageRefresher following the node's
// trace file. Metrics: docs/metrics.md.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "core/status.h"
#include "metrics/metrics_server.h"
#include "metrics/page_refresher.h"

namespace partrain::metrics {

// Every interface, as node_exporter and dcgm-exporter listen: Prometheus scrapes from another
// host (docs/decisions.md, "The metrics endpoint listens on every interface").
inline constexpr std::string_view kDefaultMetricsAddress = "0.0.0.0";

// How long the endpoint may outlive its run to have the final page scraped (--metrics-linger):
// Prometheus' default scrape interval, so one scrape falls within it whatever the interval up to
// that (docs/metrics.md, docs/decisions.md).
inline constexpr std::chrono::milliseconds kDefaultMetricsLinger{60'000};

struct EndpointOptions {
  std::string address = std::string(kDefaultMetricsAddress);
  uint16_t port = 0;  // 0: a free port, printed
  std::filesystem::path trace;
  std::chrono::milliseconds linger = kDefaultMetricsLinger;  // 0: none
};

class MetricsEndpoint {
 public:
  // Binds, then starts serving and refreshing; logs where it listens. The errors of
  // MetricsServer::listen.
  static StatusOr<std::unique_ptr<MetricsEndpoint>> start(const EndpointOptions& options);
  uint16_t port() const { return server_->port(); }
  std::chrono::milliseconds linger() const { return linger_; }

  // Once the run has ended: one last refresh (its final status and figures, a diagnosis made as
  // it ended), after which the server serves that page alone until the endpoint is destroyed.
  void finish() { refresher_->finish(); }
  // Requests answered so far (a scraper is watching), and whether one got the final page.
  int64_t requests_answered() const { return requests_answered_.load(); }
  bool final_page_served() const { return final_page_served_.load(); }

 private:
  MetricsEndpoint() = default;
  // The page a request gets (on the server's thread), counted.
  std::shared_ptr<const MetricsPage> page_for_request();
  // Declared before the server so they are destroyed after it: its thread reads pages from the
  // refresher and counts into these.
  std::unique_ptr<PageRefresher> refresher_;
  std::chrono::milliseconds linger_{0};
  std::atomic<int64_t> requests_answered_{0};
  std::atomic<bool> final_page_served_{false};
  std::unique_ptr<MetricsServer> server_;
};

}  // namespace partrain::metrics
