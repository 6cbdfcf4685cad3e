#include "runner/rendezvous/listen_socket.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace partrain::rendezvous {

StatusOr<int> listen_on(const std::string& bind_host, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  int rc = ::getaddrinfo(bind_host.empty() ? nullptr : bind_host.c_str(), service.c_str(), &hints,
                         &found);
  if (rc != 0) {
    return unavailable("cannot listen on '{}': {}", bind_host, gai_strerror(rc));
  }
  Status last_error = unavailable("no address to listen on for '{}'", bind_host);
  for (addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                      ai->ai_protocol);
    if (fd < 0) {
      last_error = unavailable("cannot create a socket: {}", std::strerror(errno));
      continue;
    }
    // SO_REUSEADDR: a restarted launcher can rebind while old connections sit in TIME_WAIT.
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && ::listen(fd, SOMAXCONN) == 0) {
      ::freeaddrinfo(found);
      return fd;
    }
    const int error = errno;
    ::close(fd);
    const std::string where = bind_host.empty() ? "all interfaces" : bind_host;
    if (error == EADDRINUSE) {
      last_error = unavailable(
          "port {} on {} is already in use (another partrain/torchrun run?): pass --master-port "
          "with a free port (every node the same one), or 0 to pick one on a single node",
          port, where);
      break;
    }
    if (error == EADDRNOTAVAIL) {
      last_error = unavailable(
          "cannot listen on {}:{}: it is not an address of this host. Node 0 listens on "
          "--master-addr's interface: run node 0 where that address lives, or pass "
          "--rdzv-bind-all to listen on every interface",
          where, port);
      continue;
    }
    last_error = unavailable("cannot listen on {}:{}: {}", where, port, std::strerror(error));
  }
  ::freeaddrinfo(found);
  return last_error;
}

uint16_t bound_port(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  if (address.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6&>(address).sin6_port);
  }
  return ntohs(reinterpret_cast<const sockaddr_in&>(address).sin_port);
}

std::string describe_address(const sockaddr_storage& address) {
  char host[INET6_ADDRSTRLEN] = "?";
  if (address.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(address);
    inet_ntop(AF_INET, &v4.sin_addr, host, sizeof(host));
    return fmt::format("{}:{}", host, ntohs(v4.sin_port));
  }
  uint16_t port = 0;
  if (address.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(address);
    inet_ntop(AF_INET6, &v6.sin6_addr, host, sizeof(host));
    port = ntohs(v6.sin6_port);
  }
  return fmt::format("[{}]:{}", host, port);
}

}  // namespace partrain::rendezvous
