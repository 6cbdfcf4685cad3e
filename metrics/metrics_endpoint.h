// `--metrics-port` of `partrain launch` and `partrain trace`: a Prometheus / OpenMetrics
// endpoint for the node's run, served from the launcher process while the run goes on. The
// socket is bound before the job starts (a port in use stops the command first); pages come
// from a PageRefresher following the node's trace file. Metrics: docs/metrics.md.
#pragma once

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

struct EndpointOptions {
  std::string address = std::string(kDefaultMetricsAddress);
  uint16_t port = 0;  // 0: a free port, printed
  std::filesystem::path trace;
};

class MetricsEndpoint {
 public:
  // Binds, then starts serving and refreshing; logs where it listens. The errors of
  // MetricsServer::listen.
  static StatusOr<std::unique_ptr<MetricsEndpoint>> start(const EndpointOptions& options);
  uint16_t port() const { return server_->port(); }

 private:
  MetricsEndpoint() = default;
  // Declared first so it is destroyed last: the server's thread reads pages from it.
  std::unique_ptr<PageRefresher> refresher_;
  std::unique_ptr<MetricsServer> server_;
};

}  // namespace partrain::metrics
