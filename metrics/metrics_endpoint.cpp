#include "metrics/metrics_endpoint.h"

#include "core/log.h"

namespace partrain::metrics {

StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::start(const EndpointOptions& options) {
  std::unique_ptr<MetricsEndpoint> endpoint(new MetricsEndpoint());
  endpoint->refresher_ = std::make_unique<PageRefresher>(options.trace);
  PageRefresher* refresher = endpoint->refresher_.get();
  ASSIGN_OR_RETURN(endpoint->server_,
                   MetricsServer::listen(options.address, options.port,
                                         [refresher] { return refresher->page(); }));
  endpoint->refresher_->start();
  endpoint->server_->start();
  log::info("metrics: http://{}/metrics (Prometheus and OpenMetrics text)",
            endpoint->server_->bound());
  return endpoint;
}

}  // namespace partrain::metrics
