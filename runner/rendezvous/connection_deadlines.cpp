#include "runner/rendezvous/connection_deadlines.h"

#include <fmt/format.h>

#include "core/duration.h"

namespace partrain::rendezvous::detail {
namespace {

std::string within(int64_t ns) { return format_duration(Nanoseconds(ns)); }

}  // namespace

int64_t next_deadline(const Connection& connection, const Timeouts& timeouts, int64_t now_ns) {
  int64_t deadline = -1;
  auto consider = [&](int64_t at) {
    if (at >= 0 && (deadline < 0 || at < deadline)) deadline = at;
  };
  if (connection.closing) {
    // Until the reply is flushed the write timeout applies; then the linger.
    consider(connection.closing_until_ns >= 0 ? connection.closing_until_ns
                                              : now_ns + timeouts.write_ns);
    return deadline;
  }
  if (!connection.handshaken) consider(connection.accepted_ns + timeouts.handshake_ns);
  if (connection.request_started_ns >= 0) {
    consider(connection.request_started_ns + timeouts.request_ns);
  }
  consider(connection.parked_until_ns);
  if (connection.write_blocked_ns >= 0) {
    consider(connection.write_blocked_ns + timeouts.write_ns);
  }
  return deadline;
}

std::string missed_deadline(const Connection& connection, const Timeouts& timeouts,
                            int64_t now_ns) {
  if (!connection.handshaken && connection.accepted_ns + timeouts.handshake_ns <= now_ns) {
    return fmt::format("sent no valid request within {}", within(timeouts.handshake_ns));
  }
  if (connection.request_started_ns >= 0 &&
      connection.request_started_ns + timeouts.request_ns <= now_ns) {
    return fmt::format("began a request and did not finish it within {}",
                       within(timeouts.request_ns));
  }
  if (connection.write_blocked_ns >= 0 &&
      connection.write_blocked_ns + timeouts.write_ns <= now_ns) {
    return fmt::format("read none of its replies for {}", within(timeouts.write_ns));
  }
  return "";
}

}  // namespace partrain::rendezvous::detail
