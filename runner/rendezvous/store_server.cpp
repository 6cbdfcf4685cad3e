#include "runner/rendezvous/store_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "core/clock.h"
#include "core/duration.h"
#include "core/log.h"

namespace partrain::rendezvous {
namespace {

// The shared map. Waits end early when the server stops, so the destructor never waits on a GET.
class KeyValueTable {
 public:
  void set(std::string key, std::string value) {
    {
      std::lock_guard lock(mutex_);
      values_.insert_or_assign(std::move(key), std::move(value));
    }
    changed_.notify_all();
  }

  // nullopt when the deadline passed (or the server is stopping) before the key was set.
  std::optional<std::string> get(const std::string& key, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    changed_.wait_for(lock, timeout, [&] { return stopping_ || values_.contains(key); });
    auto it = values_.find(key);
    if (it == values_.end()) return std::nullopt;
    return it->second;
  }

  StatusOr<int64_t> add(const std::string& key, int64_t delta) {
    int64_t result = 0;
    {
      std::lock_guard lock(mutex_);
      int64_t current = 0;
      // Counters are stored as decimal text, as torch's TCPStore does, so GET reads them too.
      if (auto it = values_.find(key); it != values_.end()) {
        const std::string& text = it->second;
        auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), current);
        if (ec != std::errc() || end != text.data() + text.size()) {
          return failed("rendezvous key '{}' does not hold an integer", key);
        }
      }
      if (__builtin_add_overflow(current, delta, &result)) {
        return failed("adding {} to rendezvous key '{}' ({}) overflows", delta, key, current);
      }
      values_.insert_or_assign(key, std::to_string(result));
    }
    changed_.notify_all();
    return result;
  }

  // The keys still missing when the deadline passed; empty when all are set.
  std::vector<std::string> wait(const std::vector<std::string>& keys,
                                std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    changed_.wait_for(lock, timeout, [&] { return stopping_ || missing_locked(keys).empty(); });
    return missing_locked(keys);
  }

  bool check(const std::vector<std::string>& keys) {
    std::lock_guard lock(mutex_);
    return missing_locked(keys).empty();
  }

  void stop() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_all();
  }

 private:
  std::vector<std::string> missing_locked(const std::vector<std::string>& keys) const {
    std::vector<std::string> missing;
    for (const auto& key : keys) {
      if (!values_.contains(key)) missing.push_back(key);
    }
    return missing;
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::string, std::less<>> values_;
  bool stopping_ = false;
};

std::string describe_peer(const sockaddr_storage& address) {
  char host[INET6_ADDRSTRLEN] = "?";
  uint16_t port = 0;
  if (address.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(address);
    inet_ntop(AF_INET, &v4.sin_addr, host, sizeof(host));
    port = ntohs(v4.sin_port);
    return fmt::format("{}:{}", host, port);
  }
  if (address.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(address);
    inet_ntop(AF_INET6, &v6.sin6_addr, host, sizeof(host));
    port = ntohs(v6.sin6_port);
  }
  return fmt::format("[{}]:{}", host, port);
}

std::string timeout_message(const std::vector<std::string>& missing, uint32_t timeout_ms) {
  const std::string within = format_duration(std::chrono::milliseconds(timeout_ms));
  if (missing.size() == 1) {
    return fmt::format("rendezvous key '{}' was not set within {}", missing.front(), within);
  }
  std::string names;
  for (const auto& key : missing) names += (names.empty() ? "'" : ", '") + key + "'";
  return fmt::format("rendezvous keys not set within {}: {}", within, names);
}

Reply error_reply(ReplyCode code, std::string message) {
  Reply reply;
  reply.code = code;
  reply.message = std::move(message);
  return reply;
}

Reply shutting_down_reply() {
  return error_reply(ReplyCode::kFailed, "the rendezvous store is shutting down");
}

// Closing a socket with unread input makes the kernel send a reset, which can destroy the
// error reply before the peer reads it. So: send FIN, then discard what the peer still sends,
// bounded in bytes and time so a hostile peer cannot hold the thread.
void close_gracefully(int fd) {
  ::shutdown(fd, SHUT_WR);
  std::array<uint8_t, 4096> sink{};
  const int64_t deadline_ns = monotonic_ns() + 500'000'000;
  for (size_t drained = 0; drained < (1u << 20);) {
    const int64_t left_ms = (deadline_ns - monotonic_ns()) / 1'000'000;
    pollfd entry{fd, POLLIN, 0};
    if (left_ms <= 0 || ::poll(&entry, 1, static_cast<int>(left_ms)) <= 0) return;
    ssize_t got = ::recv(fd, sink.data(), sink.size(), 0);
    if (got <= 0) return;
    drained += static_cast<size_t>(got);
  }
}

struct Connection {
  int fd = -1;
  std::string peer;
  std::thread thread;
  bool finished = false;
};

}  // namespace

struct StoreServer::State {
  std::string token;
  StoreLimits limits;
  int listen_fd = -1;
  std::array<int, 2> wake_pipe = {-1, -1};
  uint16_t port = 0;
  KeyValueTable table;
  std::atomic<bool> stopping{false};
  std::thread accept_thread;
  std::mutex connections_mutex;
  std::list<Connection> connections;

  void accept_loop();
  void serve_connection(Connection* connection);
  // Reads and answers one request; false when the connection should close.
  bool serve_one_request(int fd, const std::string& peer);
  Reply execute(const Request& request);
  void reap_finished_connections();
};

void StoreServer::State::accept_loop() {
  while (!stopping.load()) {
    std::array<pollfd, 2> watched = {pollfd{listen_fd, POLLIN, 0}, pollfd{wake_pipe[0], POLLIN, 0}};
    if (::poll(watched.data(), watched.size(), -1) < 0) {
      if (errno == EINTR) continue;
      log::error("rendezvous store stopped accepting connections: {}", std::strerror(errno));
      return;
    }
    if (watched[1].revents != 0 || stopping.load()) return;
    sockaddr_storage address{};
    socklen_t length = sizeof(address);
    int fd = ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&address), &length, SOCK_CLOEXEC);
    if (fd < 0) continue;  // the peer gave up before we accepted (ECONNABORTED) or EINTR
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    reap_finished_connections();
    std::lock_guard lock(connections_mutex);
    Connection& connection = connections.emplace_back();
    connection.fd = fd;
    connection.peer = describe_peer(address);
    connection.thread = std::thread([this, &connection] { serve_connection(&connection); });
  }
}

void StoreServer::State::reap_finished_connections() {
  std::list<Connection> finished;
  {
    std::lock_guard lock(connections_mutex);
    for (auto it = connections.begin(); it != connections.end();) {
      auto next = std::next(it);
      if (it->finished) finished.splice(finished.end(), connections, it);
      it = next;
    }
  }
  for (auto& connection : finished) connection.thread.join();
}

void StoreServer::State::serve_connection(Connection* connection) {
  // connection->fd is only closed here, under the mutex, so the destructor's shutdown never hits
  // a descriptor number that was already reused.
  while (!stopping.load() && serve_one_request(connection->fd, connection->peer)) {
  }
  std::lock_guard lock(connections_mutex);
  ::close(connection->fd);
  connection->fd = -1;
  connection->finished = true;
}

bool StoreServer::State::serve_one_request(int fd, const std::string& peer) {
  std::array<uint8_t, kFrameHeaderBytes> header_bytes{};
  // A closed or shut-down connection ends here quietly: ranks disconnect when they are done.
  if (!receive_exact(fd, header_bytes, -1).is_ok()) return false;

  // The reply echoes the op bytes as sent, so the client can match it even if the rest was bad.
  const uint16_t sent_op = static_cast<uint16_t>(header_bytes[6] | (header_bytes[7] << 8));
  auto reject = [&](const Status& why) {
    log::warn("rendezvous store rejected a client from {}: {}", peer, why.message());
    (void)send_all(fd, encode_reply(static_cast<Op>(sent_op),
                                    error_reply(ReplyCode::kRejected, why.message())));
    close_gracefully(fd);
    return false;
  };
  auto header = decode_frame_header(header_bytes, max_request_payload_bytes(limits));
  if (!header.is_ok()) return reject(header.status());

  std::array<uint8_t, kMaxTokenBytes> token_bytes{};
  std::span<uint8_t> presented(token_bytes.data(), header->token_bytes);
  if (!receive_exact(fd, presented, -1).is_ok()) return false;
  if (!token_matches(token, presented)) {
    return reject(failed("wrong token (the run's PARTRAIN_TOKEN)"));
  }

  // Safe to allocate now: the header's payload size passed the limits above.
  std::vector<uint8_t> payload(header->payload_bytes);
  if (!receive_exact(fd, payload, -1).is_ok()) return false;
  const Op op = static_cast<Op>(header->op);
  auto request = decode_request_payload(op, payload, limits);
  if (!request.is_ok()) return reject(request.status());

  return send_all(fd, encode_reply(op, execute(*request))).is_ok();
}

Reply StoreServer::State::execute(const Request& request) {
  Reply reply;
  switch (request.op) {
    case Op::kSet: table.set(request.key, request.value); break;
    case Op::kGet: {
      auto value = table.get(request.key, std::chrono::milliseconds(request.timeout_ms));
      if (!value && stopping.load()) return shutting_down_reply();
      if (!value) {
        return error_reply(ReplyCode::kTimeout, timeout_message({request.key}, request.timeout_ms));
      }
      reply.value = std::move(*value);
      break;
    }
    case Op::kAdd: {
      auto sum = table.add(request.key, request.delta);
      if (!sum.is_ok()) return error_reply(ReplyCode::kFailed, sum.status().message());
      reply.number = *sum;
      break;
    }
    case Op::kWait: {
      auto missing = table.wait(request.keys, std::chrono::milliseconds(request.timeout_ms));
      if (!missing.empty() && stopping.load()) return shutting_down_reply();
      if (!missing.empty()) {
        return error_reply(ReplyCode::kTimeout, timeout_message(missing, request.timeout_ms));
      }
      break;
    }
    case Op::kCheck: reply.all_present = table.check(request.keys); break;
    case Op::kPing: reply.number = monotonic_ns(); break;
  }
  return reply;
}

namespace {

// A listening socket on the first address of bind_host that binds; the port-in-use error names
// the port so the user knows which flag to change.
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
    int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
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
    if (error == EADDRINUSE) {
      last_error = unavailable(
          "port {} on {} is already in use (another partrain/torchrun run?): pass --master-port "
          "with a free port, or 0 to pick one",
          port, bind_host.empty() ? "all interfaces" : bind_host);
      break;
    }
    last_error = unavailable("cannot listen on {}:{}: {}", bind_host, port, std::strerror(error));
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

}  // namespace

StatusOr<std::unique_ptr<StoreServer>> StoreServer::start(const std::string& bind_host,
                                                          uint16_t port, std::string token,
                                                          StoreLimits limits) {
  if (token.size() > kMaxTokenBytes) {
    return invalid_argument("the rendezvous token has {} bytes, more than the limit of {}",
                            token.size(), kMaxTokenBytes);
  }
  auto state = std::make_unique<State>();
  state->token = std::move(token);
  state->limits = limits;
  ASSIGN_OR_RETURN(state->listen_fd, listen_on(bind_host, port));
  state->port = bound_port(state->listen_fd);
  if (::pipe2(state->wake_pipe.data(), O_CLOEXEC) != 0) {
    ::close(state->listen_fd);
    return failed("cannot create the rendezvous store's wake-up pipe: {}", std::strerror(errno));
  }
  State* raw = state.get();
  state->accept_thread = std::thread([raw] { raw->accept_loop(); });
  log::debug("rendezvous store listening on {}:{}", bind_host, state->port);
  return std::unique_ptr<StoreServer>(new StoreServer(std::move(state)));
}

StoreServer::StoreServer(std::unique_ptr<State> state) : state_(std::move(state)) {}

uint16_t StoreServer::port() const { return state_->port; }

StoreServer::~StoreServer() {
  State& s = *state_;
  s.stopping.store(true);
  s.table.stop();
  const uint8_t wake = 1;
  (void)::write(s.wake_pipe[1], &wake, 1);
  s.accept_thread.join();
  {
    // Wakes connection threads blocked in recv; those blocked in GET / WAIT were woken by stop().
    std::lock_guard lock(s.connections_mutex);
    for (auto& connection : s.connections) {
      if (connection.fd >= 0) ::shutdown(connection.fd, SHUT_RDWR);
    }
  }
  for (auto& connection : s.connections) connection.thread.join();
  ::close(s.listen_fd);
  ::close(s.wake_pipe[0]);
  ::close(s.wake_pipe[1]);
}

}  // namespace partrain::rendezvous
