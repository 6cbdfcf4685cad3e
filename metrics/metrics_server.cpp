#include "metrics/metrics_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <list>
#include <vector>

#include "core/clock.h"
#include "core/log.h"

namespace partrain::metrics {
namespace {

// After accept fails for want of descriptors, the listening socket rests this long (polling it
// at once would spin: the peer stays queued).
constexpr int kAcceptPauseMs = 100;
constexpr size_t kReadChunk = 4096;

struct Connection {
  int fd = -1;
  int64_t deadline_ns = 0;
  std::string received;
  std::string reply;  // set once the request is answered
  size_t sent = 0;
  bool answered = false;
};

std::string describe(const sockaddr_storage& address) {
  char host[INET6_ADDRSTRLEN] = {};
  uint16_t port = 0;
  if (address.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&address);
    ::inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
    port = ntohs(a->sin6_port);
    return fmt::format("[{}]:{}", host, port);
  }
  const auto* a = reinterpret_cast<const sockaddr_in*>(&address);
  ::inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
  port = ntohs(a->sin_port);
  return fmt::format("{}:{}", host, port);
}

// Queues `response` as the connection's reply; it is then written and the connection closed.
void reply_with(Connection& c, const HttpResponse& response, int64_t now_ns,
                const ServerLimits& limits) {
  c.reply = serialize(response);
  c.sent = 0;
  c.answered = true;
  c.deadline_ns = now_ns + limits.write_timeout_ns;
  ::shutdown(c.fd, SHUT_RD);  // nothing more is read from it
}

// Reads what the peer sent; answers once its head is complete or too large. False: close it.
bool read_request(Connection& c, int64_t now_ns, const ServerLimits& limits,
                  const MetricsServer::PageSource& pages) {
  char buffer[kReadChunk];
  while (true) {
    const ssize_t n = ::recv(c.fd, buffer, sizeof(buffer), 0);
    if (n == 0) return false;  // closed before asking anything whole
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    // Only what can still belong to a head is kept.
    const size_t room =
        kMaxRequestHeadBytes + 4 - std::min(c.received.size(), kMaxRequestHeadBytes + 4);
    c.received.append(buffer, std::min(static_cast<size_t>(n), room));
    if (const auto length = request_head_length(c.received)) {
      const ParsedHead parsed = parse_request_head(std::string_view(c.received).substr(0, *length));
      if (!parsed.request) {
        reply_with(c, parsed.error, now_ns, limits);
      } else {
        const std::shared_ptr<const MetricsPage> page = pages();
        reply_with(c, answer(*parsed.request, page ? *page : MetricsPage{}), now_ns, limits);
      }
      return true;
    }
    if (c.received.size() > kMaxRequestHeadBytes) {
      reply_with(c, refusal(431, fmt::format("request head over {} bytes", kMaxRequestHeadBytes)),
                 now_ns, limits);
      return true;
    }
  }
}

// Writes what the reply has left; false once it is all sent or the peer is gone.
bool write_reply(Connection& c) {
  while (c.sent < c.reply.size()) {
    const ssize_t n = ::send(c.fd, c.reply.data() + c.sent, c.reply.size() - c.sent, MSG_NOSIGNAL);
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    c.sent += static_cast<size_t>(n);
  }
  return false;
}

}  // namespace

StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::listen(const std::string& address,
                                                               uint16_t port, PageSource pages,
                                                               ServerLimits limits) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = ::getaddrinfo(address.c_str(), service.c_str(), &hints, &found); rc != 0) {
    return invalid_argument(
        "--metrics-addr {}: {}; give an address of this host (0.0.0.0: "
        "every IPv4 interface, :: every interface, 127.0.0.1 this host only)",
        address, gai_strerror(rc));
  }
  Status error = unavailable("--metrics-addr {}: no address to listen on", address);
  int fd = -1;
  for (addrinfo* ai = found; ai != nullptr && fd < 0; ai = ai->ai_next) {
    const int s =
        ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
    if (s < 0) {
      error = unavailable("cannot create the metrics socket: {}", std::strerror(errno));
      continue;
    }
    // A restarted job rebinds while the last scrapes' connections sit in TIME_WAIT.
    const int one = 1;
    ::setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(s, ai->ai_addr, ai->ai_addrlen) == 0 && ::listen(s, 64) == 0) {
      fd = s;
      break;
    }
    const int bind_error = errno;
    ::close(s);
    if (bind_error == EADDRINUSE) {
      error = unavailable(
          "--metrics-port {}: the port is already in use on {} (another job's "
          "exporter, node_exporter?): choose a free port, or 0 for any",
          port, address);
    } else if (bind_error == EADDRNOTAVAIL) {
      error = unavailable(
          "--metrics-addr {}: not an address of this host; give one of its "
          "interfaces' addresses, or 0.0.0.0 for all",
          address);
    } else if (bind_error == EACCES) {
      error = unavailable(
          "--metrics-port {}: ports below 1024 need privileges; choose one "
          "above (9400 and up are the usual exporters' range)",
          port);
    } else {
      error = unavailable("cannot listen on {}:{} for metrics: {}", address, port,
                          std::strerror(bind_error));
    }
  }
  ::freeaddrinfo(found);
  if (fd < 0) return error;
  const int wake = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) {
    ::close(fd);
    return failed("cannot create an eventfd for the metrics server: {}", std::strerror(errno));
  }
  std::unique_ptr<MetricsServer> server(new MetricsServer(fd, wake, std::move(pages), limits));
  sockaddr_storage bound{};
  socklen_t length = sizeof(bound);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length);
  server->bound_ = describe(bound);
  server->port_ = bound.ss_family == AF_INET6
                      ? ntohs(reinterpret_cast<const sockaddr_in6*>(&bound)->sin6_port)
                      : ntohs(reinterpret_cast<const sockaddr_in*>(&bound)->sin_port);
  return server;
}

MetricsServer::MetricsServer(int listen_fd, int wake_fd, PageSource pages, ServerLimits limits)
    : listen_fd_(listen_fd), wake_fd_(wake_fd), pages_(std::move(pages)), limits_(limits) {}

MetricsServer::~MetricsServer() {
  if (thread_.joinable()) {
    const uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof(one));
    thread_.join();
  }
  ::close(listen_fd_);
  ::close(wake_fd_);
}

void MetricsServer::start() {
  thread_ = std::thread([this] { serve(); });
}

void MetricsServer::serve() {
  ::pthread_setname_np(::pthread_self(), "metrics-http");
  std::list<Connection> connections;
  int64_t accept_paused_until = 0;
  std::vector<pollfd> fds;
  while (true) {
    const int64_t now = monotonic_ns();
    // Deadlines: a head not received in time is answered 408; a reply not read in time, closed.
    int64_t next_deadline = now + 1'000'000'000;
    for (auto it = connections.begin(); it != connections.end();) {
      if (now >= it->deadline_ns) {
        if (!it->answered) {
          reply_with(*it, refusal(408, "request not received in time"), now, limits_);
          (void)write_reply(*it);  // one try: a peer this slow gets what fits
        }
        ::close(it->fd);
        it = connections.erase(it);
        continue;
      }
      next_deadline = std::min(next_deadline, it->deadline_ns);
      ++it;
    }
    fds.clear();
    fds.push_back({wake_fd_, POLLIN, 0});
    const bool accepting = now >= accept_paused_until;
    fds.push_back({accepting ? listen_fd_ : -1, POLLIN, 0});
    for (const Connection& c : connections) {
      fds.push_back({c.fd, static_cast<short>(c.answered ? POLLOUT : POLLIN), 0});
    }
    int64_t wait_ns = next_deadline - now;
    if (!accepting) wait_ns = std::min(wait_ns, accept_paused_until - now);
    const int ready =
        ::poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(wait_ns / 1'000'000, 1)));
    if (ready < 0 && errno != EINTR) {
      log::warn("metrics server: poll failed ({}); it stops serving", std::strerror(errno));
      break;
    }
    if (fds[0].revents != 0) break;  // stop
    const int64_t after = monotonic_ns();
    size_t index = 2;
    for (auto it = connections.begin(); it != connections.end(); ++index) {
      const short events = fds[index].revents;
      bool keep = true;
      if (events != 0) {
        if (!it->answered) keep = read_request(*it, after, limits_, pages_);
        if (keep && it->answered) keep = write_reply(*it);
      }
      if (!keep) {
        ::close(it->fd);
        it = connections.erase(it);
      } else {
        ++it;
      }
    }
    if (accepting && fds[1].revents != 0) {
      while (true) {
        const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
          if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
            accept_paused_until = after + kAcceptPauseMs * 1'000'000;
          }
          break;
        }
        if (connections.size() >= limits_.max_connections) {
          // Room is made by the oldest connection that has not sent a whole request (a scraper
          // sends it at once): peers trickling bytes cannot hold every slot. With every slot
          // answering, the newcomer is shed: a scraper retries at its next interval.
          auto silent = std::find_if(connections.begin(), connections.end(),
                                     [](const Connection& c) { return !c.answered; });
          if (silent == connections.end()) {
            ::close(fd);
            continue;
          }
          ::close(silent->fd);
          connections.erase(silent);
        }
        connections.push_back(Connection{fd, after + limits_.request_timeout_ns, {}, {}, 0, false});
      }
    }
  }
  for (Connection& c : connections) ::close(c.fd);
}

}  // namespace partrain::metrics
