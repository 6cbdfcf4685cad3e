// PyTorch's TCPStore protocol (tcpstore_protocol.h) on one connection of the store's event loop,
// served as torch's own (libuv) server serves it: VALIDATE first, then queries in order; WAIT and
// BARRIER answer when their keys appear, while the connection goes on being served (the client
// may CANCEL_WAIT). The protocol has no authentication and no error reply: a query that breaks
// the rules closes the connection, as torch's server does. Its keys are a space of their own.
#pragma once

#include "runner/rendezvous/store_connection.h"

namespace partrain::rendezvous::detail {

// Serves the whole queries buffered on `connection` until its replies back up; kClose (with
// connection.close_reason) for a query that breaks the protocol or does not fit the store.
Verdict serve_tcpstore(Connection& connection, SessionContext& context);

// A WAIT or BARRIER of this connection completed.
void finish_tcpstore_wait(Connection& connection);

}  // namespace partrain::rendezvous::detail
