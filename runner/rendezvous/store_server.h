// The rendezvous store served over TCP by node 0's launcher, as a server that faces a network:
// one event-loop thread (epoll) for every connection, partrain's framed protocol and PyTorch's
// TCPStore protocol told apart by a connection's first byte, each in a key space of its own.
// Everything a peer can make it spend is bounded: connections (the ones that never said a valid
// word are dropped first when descriptors run short), the time to send a first valid request
// or to finish one begun, bytes buffered per connection and in all, bytes stored. Blocking
// GET / WAIT park their connection and never the loop.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "core/duration.h"
#include "core/status.h"
#include "runner/rendezvous/key_liveness.h"
#include "runner/rendezvous/protocol.h"
#include "runner/rendezvous/tcpstore_protocol.h"

namespace partrain::rendezvous {

struct StoreServerOptions {
  StoreLimits limits;
  tcpstore::Limits tcpstore_limits;
  // Whether TCPStore clients are served (commands that may be torch programs); built-in
  // workloads never need it, and then the port speaks partrain's protocol only.
  bool serve_tcpstore = true;
  // Connections at once; 0: the descriptor limit (RLIMIT_NOFILE) less reserved_fds, which the
  // rest of the launcher needs (its workers' pipes, the collector, the trace).
  size_t max_connections = 0;
  size_t reserved_fds = 256;
  // A connection that sends no valid first request within this is dropped.
  Nanoseconds handshake_timeout = std::chrono::seconds(10);
  // A request begun must arrive whole within this.
  Nanoseconds request_timeout = std::chrono::seconds(30);
  // A peer that reads none of its replies for this long is dropped.
  Nanoseconds write_timeout = std::chrono::seconds(30);
  uint64_t max_stored_bytes = 512ull << 20;           // partrain's key space
  uint64_t max_tcpstore_stored_bytes = 256ull << 20;  // the TCPStore clients' key space
  // Requests being received, all connections together; a connection over it waits its turn.
  uint64_t max_buffered_bytes = 256ull << 20;
  // partrain keys under this prefix are watched (see watched_keys()): the launchers' heartbeats.
  std::string watched_prefix;
};

// What the loop has seen, for tests and the scale benchmark.
struct StoreServerStats {
  uint64_t open_connections = 0;
  uint64_t accepted = 0;
  uint64_t refused = 0;    // closed at once: no room, and none to shed
  uint64_t shed = 0;       // dropped before their handshake to make room
  uint64_t timed_out = 0;  // handshake, request or write timeout
  uint64_t rejected = 0;   // wrong token, foreign or malformed bytes
  uint64_t stored_bytes = 0;
  uint64_t tcpstore_stored_bytes = 0;
  size_t max_connections = 0;
};

class StoreServer {
 public:
  // Listens on bind_host:port (port 0 picks a free one; see port()). A port already in use is
  // kUnavailable naming the port and what to do.
  static StatusOr<std::unique_ptr<StoreServer>> start(const std::string& bind_host, uint16_t port,
                                                      std::string token,
                                                      StoreServerOptions options = {});
  uint16_t port() const;
  StoreServerStats stats() const;
  // The keys under options.watched_prefix (without it): when each was last SET, its value, and
  // whether the connection that set it is still open. Safe from any thread.
  std::map<std::string, KeyLiveness> watched_keys() const;
  // Stops promptly: clients parked in GET / WAIT see their connection close.
  ~StoreServer();

  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

 private:
  struct State;
  explicit StoreServer(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace partrain::rendezvous
