// When the store's loop must look at a connection again, and which of its deadlines it missed:
// the handshake (a first valid request), a request begun and not finished, replies not read, a
// parked GET / WAIT, and a rejected peer's last chance to read why.
#pragma once

#include <cstdint>
#include <string>

#include "runner/rendezvous/store_connection.h"

namespace partrain::rendezvous::detail {

struct Timeouts {
  int64_t handshake_ns = 0;
  int64_t request_ns = 0;
  int64_t write_ns = 0;
};

// The earliest deadline of `connection`, a monotonic instant; -1 when it has none.
int64_t next_deadline(const Connection& connection, const Timeouts& timeouts, int64_t now_ns);

// What the connection failed to do in time at now_ns ("sent no valid request within 10 s"), for
// the message that closes it; "" when it missed no deadline of that kind (a parked request's
// and a closing one's are the loop's to handle).
std::string missed_deadline(const Connection& connection, const Timeouts& timeouts,
                            int64_t now_ns);

}  // namespace partrain::rendezvous::detail
