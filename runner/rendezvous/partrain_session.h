// partrain's own protocol (protocol.h) on one connection of the store's event loop: frames are
// checked (magic, version, token, sizes) before anything is allocated or served, served in
// order, and a GET / WAIT whose keys are missing parks the connection until they appear or its
// deadline passes, without holding up the loop.
#pragma once

#include <cstdint>

#include "runner/rendezvous/store_connection.h"

namespace partrain::rendezvous::detail {

// Serves the whole frames buffered on `connection` until one parks it, its replies back up, or
// a frame is rejected (kCloseAfterReply, the reply saying why).
Verdict serve_partrain(Connection& connection, SessionContext& context);

// The parked GET / WAIT ends: its keys are all set, or (timed_out) its deadline passed.
void finish_partrain_wait(Connection& connection, SessionContext& context, bool timed_out);

// The most a connection needs buffered at once: one whole frame.
uint64_t partrain_frame_bound(const StoreLimits& limits);

}  // namespace partrain::rendezvous::detail
