// The rendezvous store served over TCP by node 0's launcher: one thread per connected rank over a
// shared key-value map. Blocking GET / WAIT wait server-side; clients with a wrong token, a foreign
// protocol or an oversized frame get an error reply and are dropped without disturbing the others.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"
#include "runner/rendezvous/protocol.h"

namespace partrain::rendezvous {

class StoreServer {
 public:
  // Listens on bind_host:port (port 0 picks a free one; see port()). A port already in use is
  // kUnavailable naming the port and what to do.
  static StatusOr<std::unique_ptr<StoreServer>> start(const std::string& bind_host, uint16_t port,
                                                      std::string token, StoreLimits limits = {});
  uint16_t port() const;
  // Stops promptly even while clients are blocked in GET / WAIT: their sockets are shut down.
  ~StoreServer();

  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

 private:
  struct State;
  explicit StoreServer(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace partrain::rendezvous
