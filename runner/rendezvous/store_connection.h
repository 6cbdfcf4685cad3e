// One client connection of the rendezvous store's event loop, and what its two protocols'
// sessions (partrain_session.h, tcpstore_session.h) need to serve it: the bytes received and not
// yet served, the replies not yet written, and the deadlines the loop enforces. Internal to the
// server: only its loop thread touches a connection.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "runner/rendezvous/key_liveness.h"
#include "runner/rendezvous/key_space.h"
#include "runner/rendezvous/protocol.h"
#include "runner/rendezvous/tcpstore_protocol.h"

namespace partrain::rendezvous::detail {

// Told apart by a connection's first byte: 'P' starts partrain's frame magic "PTRZ", 0 is
// TCPStore's VALIDATE query.
enum class Protocol { kUnknown, kPartrain, kTcpStore };

// A piece of a reply: bytes of its own, or a stored value shared with the key space (so a
// thousand readers of one large value hold one copy).
struct Outgoing {
  std::string bytes;
  Value value;
  size_t size() const { return value ? value->size() : bytes.size(); }
  const char* data() const { return value ? value->data() : bytes.data(); }
};

struct Connection {
  uint64_t id = 0;
  int fd = -1;
  std::string peer;  // "host:port", for messages
  Protocol protocol = Protocol::kUnknown;
  // A first request that passed (partrain: the run's token; TCPStore: VALIDATE). Until then the
  // connection is the first to go when descriptors run short, and must pass within the
  // handshake timeout.
  bool handshaken = false;

  std::vector<uint8_t> in;  // received, from in_start on not yet served
  size_t in_start = 0;
  size_t wanted = 0;  // TCPStore: the bytes the query begun needs at least (0: unknown)
  std::deque<Outgoing> out;  // replies not yet written, out.front() from out_offset on
  size_t out_offset = 0;
  uint64_t out_bytes = 0;

  int64_t accepted_ns = 0;
  int64_t request_started_ns = -1;  // first byte of a request not yet whole
  int64_t write_blocked_ns = -1;    // replies waiting for the peer to read since then
  // partrain's GET / WAIT blocks its connection until the keys appear or the deadline passes.
  std::optional<Request> parked;
  int64_t parked_until_ns = -1;
  // Rejected: the reply is being flushed; then the connection closes (or at closing_until_ns).
  bool closing = false;
  std::string close_reason;  // set by a session that rejects or drops the peer
  int64_t closing_until_ns = -1;

  bool paused = false;  // not read while the store's buffer budget is spent
  uint32_t epoll_events = 0;  // the interest registered now
  int64_t timer_at_ns = -1;   // its entry in the loop's timer set

  size_t buffered() const { return in.size() - in_start; }
  std::span<const uint8_t> unserved() const {
    return std::span<const uint8_t>(in).subspan(in_start);
  }
  void consume(size_t bytes) {
    in_start += bytes;
    if (in_start == in.size()) {
      in.clear();
      in_start = 0;
      // A large request's buffer is given back once served.
      if (in.capacity() > 64 * 1024) in.shrink_to_fit();
    }
  }
  void send(std::string bytes) {
    out_bytes += bytes.size();
    out.push_back(Outgoing{std::move(bytes), nullptr});
  }
  void send(Value value) {
    out_bytes += value->size();
    out.push_back(Outgoing{{}, std::move(value)});
  }
};

// What a session may use besides its connection.
struct SessionContext {
  const std::string& token;
  const StoreLimits& limits;
  const tcpstore::Limits& tcpstore_limits;
  KeySpace& keys;  // the connection's protocol's own key space
  int64_t now_ns = 0;
  KeyLivenessTable* liveness = nullptr;  // partrain's heartbeat keys, when watched
};

// What the loop does with a connection after its session served what was buffered.
enum class Verdict {
  kKeep,
  kCloseAfterReply,  // rejected: flush the reply that says why, then close
  kClose,            // close now (TCPStore has no way to say why: torch's server closes too)
};

}  // namespace partrain::rendezvous::detail
