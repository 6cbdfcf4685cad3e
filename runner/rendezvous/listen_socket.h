// The store's listening socket: bound to one address (the master's interface, or every
// interface when asked), and the peers' addresses as messages print them.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>

#include "core/status.h"

namespace partrain::rendezvous {

// A non-blocking listening socket on the first address of bind_host that binds; the port-in-use
// error names the port so the user knows which flag to change.
StatusOr<int> listen_on(const std::string& bind_host, uint16_t port);
uint16_t bound_port(int fd);
// "host:port" ("[v6]:port").
std::string describe_address(const sockaddr_storage& address);

}  // namespace partrain::rendezvous
