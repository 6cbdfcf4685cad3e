// The metrics endpoint's socket: one thread, one poll loop, every peer hostile until its request
// is complete. Bounded: connections at once (more are closed on accept), bytes of a request head
// (431), the time to send one (408: slowloris) and to read the answer back (then closed). It
// serves a page it is given (PageSource); it computes nothing.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "core/status.h"
#include "metrics/http_request.h"

namespace partrain::metrics {

struct ServerLimits {
  size_t max_connections = 64;
  int64_t request_timeout_ns = 5'000'000'000;  // accept to a complete request head
  int64_t write_timeout_ns = 10'000'000'000;   // to have the response read
};

class MetricsServer {
 public:
  // The page to serve now; called on the server's thread for every request it answers.
  using PageSource = std::function<std::shared_ptr<const MetricsPage>()>;

  // Listens on address:port (port 0: a free one). kUnavailable naming the port and what to do
  // when it is in use or the address is not this host's; kInvalidArgument for an address that
  // is none. Serving starts with start().
  static StatusOr<std::unique_ptr<MetricsServer>> listen(const std::string& address, uint16_t port,
                                                         PageSource pages,
                                                         ServerLimits limits = {});
  ~MetricsServer();  // stops the thread and closes every connection
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  void start();
  uint16_t port() const { return port_; }
  // "127.0.0.1:9400", "[::]:9400".
  const std::string& bound() const { return bound_; }

 private:
  MetricsServer(int listen_fd, int wake_fd, PageSource pages, ServerLimits limits);
  void serve();

  int listen_fd_;
  int wake_fd_;  // an eventfd the destructor writes to end the loop
  PageSource pages_;
  ServerLimits limits_;
  uint16_t port_ = 0;
  std::string bound_;
  std::thread thread_;
};

}  // namespace partrain::metrics
