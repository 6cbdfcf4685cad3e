#include "metrics/metrics_endpoint.h"

#include "core/log.h"

namespace partrain::metrics {

StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::start(const EndpointOptions& options) {
  std::unique_ptr<MetricsEndpoint> endpoint(new MetricsEndpoint());
  endpoint->refresher_ = std::make_unique<PageRefresher>(options.trace);
  endpoint->linger_ = options.linger;
  MetricsEndpoint* self = endpoint.get();
  ASSIGN_OR_RETURN(endpoint->server_, MetricsServer::listen(options.address, options.port, [self] {
                     return self->page_for_request();
                   }));
  endpoint->refresher_->start();
  endpoint->server_->start();
  log::info("metrics: http://{}/metrics (Prometheus and OpenMetrics text)",
            endpoint->server_->bound());
  return endpoint;
}

std::shared_ptr<const MetricsPage> MetricsEndpoint::page_for_request() {
  std::shared_ptr<const MetricsPage> page = refresher_->page();
  ++requests_answered_;
  if (page->final) final_page_served_ = true;
  return page;
}

}  // namespace partrain::metrics
