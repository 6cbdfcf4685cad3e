#include "runner/rendezvous/store_server.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <set>
#include <thread>
#include <unordered_map>

#include "core/clock.h"
#include "core/log.h"
#include "core/thread_start.h"
#include "runner/rendezvous/connection_deadlines.h"
#include "runner/rendezvous/listen_socket.h"
#include "runner/rendezvous/partrain_session.h"
#include "runner/rendezvous/store_connection.h"
#include "runner/rendezvous/store_notices.h"
#include "runner/rendezvous/tcpstore_session.h"

namespace partrain::rendezvous {
namespace {

using detail::Connection;
using detail::Protocol;
using detail::Verdict;

// epoll tags of the two descriptors that are not connections; connection ids start above.
constexpr uint64_t kListenTag = 0;
constexpr uint64_t kWakeTag = 1;
constexpr size_t kAcceptsPerWake = 64;     // then the ready connections get their turn
constexpr size_t kReadChunkBytes = 64 * 1024;  // per connection per wake: no peer starves others
constexpr int64_t kAcceptBackoffNs = 100'000'000;  // no descriptor at all: listen again after this
constexpr int64_t kLingerNs = 1'000'000'000;  // a rejected peer's last chance to read why

int64_t to_ns(Nanoseconds d) { return d.count(); }

size_t connection_limit(const StoreServerOptions& options) {
  if (options.max_connections != 0) return options.max_connections;
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return 65536;
  const size_t soft = static_cast<size_t>(limit.rlim_cur);
  return soft > options.reserved_fds + 16 ? soft - options.reserved_fds : 16;
}

void tune_client_socket(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  // A vanished node's connections are found dead within ~2 minutes instead of hours (the
  // launchers' heartbeats name it much sooner; this only returns the descriptors).
  int idle = 60, interval = 10, count = 6;
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
}

}  // namespace

struct StoreServer::State {
  std::string token;
  StoreServerOptions options;
  detail::Timeouts timeouts;
  size_t max_connections = 0;
  int listen_fd = -1;
  int wake_fd = -1;
  int epoll_fd = -1;
  int spare_fd = -1;  // given up to accept-and-close a peer when no descriptor is left
  uint16_t port = 0;
  std::thread loop_thread;
  std::atomic<bool> stopping{false};

  KeySpace partrain_keys;
  KeySpace tcpstore_keys;
  KeyLivenessTable liveness;
  std::unordered_map<uint64_t, std::unique_ptr<Connection>> connections;
  uint64_t next_id = 2;
  // Connections yet to say a valid word, oldest first: the first to go when room runs out.
  std::set<std::pair<int64_t, uint64_t>> unproven;
  std::set<std::pair<int64_t, uint64_t>> timers;  // (deadline, connection id)
  uint64_t buffered_bytes = 0;                    // unserved request bytes, every connection
  std::vector<uint64_t> paused_for_budget;
  int64_t listen_paused_until_ns = -1;
  int64_t now_ns = 0;
  std::vector<uint8_t> scratch = std::vector<uint8_t>(kReadChunkBytes);
  detail::Notices notices;

  std::atomic<uint64_t> accepted{0}, refused{0}, shed{0}, timed_out{0}, rejected{0};
  std::atomic<uint64_t> stored_bytes{0}, tcpstore_stored_bytes{0}, open_connections{0};

  State(std::string token_in, StoreServerOptions options_in)
      : token(std::move(token_in)),
        options(std::move(options_in)),
        timeouts{to_ns(options.handshake_timeout), to_ns(options.request_timeout),
                 to_ns(options.write_timeout)},
        partrain_keys(options.max_stored_bytes),
        tcpstore_keys(options.max_tcpstore_stored_bytes),
        liveness(options.watched_prefix) {}

  void run();
  int wait_ms() const;
  void accept_ready();
  void out_of_descriptors();
  bool shed_oldest_unproven(const char* why);
  void add_connection(int fd, const sockaddr_storage& address);
  void on_event(Connection& connection, uint32_t events);
  bool read_some(Connection& connection);
  void serve(Connection& connection);
  bool flush(Connection& connection);
  void begin_closing(Connection& connection);
  void close_connection(uint64_t id);
  void fire_timers();
  void finish_ready_waits(KeySpace& keys, Protocol protocol);
  void resume_paused();
  void update(Connection& connection);
  uint64_t buffer_bound(const Connection& connection) const;
  KeySpace& keys_of(const Connection& connection) {
    return connection.protocol == Protocol::kTcpStore ? tcpstore_keys : partrain_keys;
  }
  detail::SessionContext context_for(Connection& connection) {
    const bool partrain = connection.protocol != Protocol::kTcpStore;
    return detail::SessionContext{token,  options.limits, options.tcpstore_limits,
                                  keys_of(connection), now_ns, partrain ? &liveness : nullptr};
  }
};

void StoreServer::State::run() {
  std::array<epoll_event, 256> events{};
  while (!stopping.load()) {
    const int ready = ::epoll_wait(epoll_fd, events.data(), events.size(), wait_ms());
    if (ready < 0 && errno != EINTR) {
      log::error("the rendezvous store stopped: epoll_wait failed: {}", std::strerror(errno));
      return;
    }
    now_ns = monotonic_ns();
    for (int i = 0; i < std::max(ready, 0); ++i) {
      const uint64_t tag = events[i].data.u64;
      if (tag == kWakeTag) continue;  // stopping is checked by the loop
      if (tag == kListenTag) {
        accept_ready();
        continue;
      }
      auto it = connections.find(tag);
      if (it != connections.end()) on_event(*it->second, events[i].events);
    }
    fire_timers();
    notices.tick(now_ns);
    finish_ready_waits(partrain_keys, Protocol::kPartrain);
    finish_ready_waits(tcpstore_keys, Protocol::kTcpStore);
    resume_paused();
    stored_bytes.store(partrain_keys.bytes_used());
    tcpstore_stored_bytes.store(tcpstore_keys.bytes_used());
    open_connections.store(connections.size());
  }
  notices.flush();
}

int StoreServer::State::wait_ms() const {
  int64_t next = -1;
  if (!timers.empty()) next = timers.begin()->first;
  if (listen_paused_until_ns >= 0 && (next < 0 || listen_paused_until_ns < next)) {
    next = listen_paused_until_ns;
  }
  if (next < 0) return notices.pending() ? 10'000 : -1;
  const int64_t left_ns = next - monotonic_ns();
  if (left_ns <= 0) return 0;
  return static_cast<int>(std::min<int64_t>((left_ns + 999'999) / 1'000'000, 60'000));
}

void StoreServer::State::accept_ready() {
  if (listen_paused_until_ns >= 0) return;
  for (size_t i = 0; i < kAcceptsPerWake; ++i) {
    sockaddr_storage address{};
    socklen_t length = sizeof(address);
    int fd = ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&address), &length,
                       SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        out_of_descriptors();
      }
      return;  // EAGAIN: the backlog is empty
    }
    // Accepted first, so only a peer that is really there can make the oldest silent one go.
    if (connections.size() >= max_connections &&
        !shed_oldest_unproven("the connection limit was reached")) {
      // No room and nobody to make room: the peer is turned away, not left in the backlog
      // (which would make the listening socket ready forever and the loop spin).
      refused.fetch_add(1);  // counted before the peer can see its connection closed
      ::close(fd);
      notices.note(detail::Notice::kRefused,
                   fmt::format("the rendezvous store has {} connections, its limit: refusing new "
                               "ones (raise `ulimit -n`)",
                               connections.size()));
      continue;
    }
    add_connection(fd, address);
  }
}

// The process has no descriptor left (others of the launcher hold some too): make one, by
// dropping a connection that has not said a valid word, or by accepting with the spare one and
// closing at once; failing both, stop listening for a moment rather than spin on accept.
void StoreServer::State::out_of_descriptors() {
  if (shed_oldest_unproven("the launcher ran out of file descriptors")) return;
  if (spare_fd >= 0) {
    ::close(spare_fd);
    spare_fd = -1;
    int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) {
      refused.fetch_add(1);
      ::close(fd);
    }
    spare_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    notices.note(detail::Notice::kRefused,
                 "the launcher is out of file descriptors: refusing new connections to the "
                 "rendezvous store (raise `ulimit -n`)");
    if (spare_fd >= 0) return;
  }
  listen_paused_until_ns = now_ns + kAcceptBackoffNs;
  epoll_event event{};
  event.data.u64 = kListenTag;
  ::epoll_ctl(epoll_fd, EPOLL_CTL_MOD, listen_fd, &event);
}

bool StoreServer::State::shed_oldest_unproven(const char* why) {
  if (unproven.empty()) return false;
  const uint64_t id = unproven.begin()->second;
  const std::string peer = connections.at(id)->peer;
  shed.fetch_add(1);  // counted before the peer can see its connection closed
  close_connection(id);
  notices.note(detail::Notice::kShed,
               fmt::format("{}: closing connections that have sent no valid request yet, "
                           "oldest first ({})",
                           why, peer));
  return true;
}

void StoreServer::State::add_connection(int fd, const sockaddr_storage& address) {
  tune_client_socket(fd);
  auto connection = std::make_unique<Connection>();
  connection->id = next_id++;
  connection->fd = fd;
  connection->peer = describe_address(address);
  connection->accepted_ns = now_ns;
  Connection& added = *connection;
  epoll_event event{};
  event.events = EPOLLIN | EPOLLRDHUP;
  event.data.u64 = added.id;
  if (::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &event) != 0) {
    ::close(fd);
    return;
  }
  added.epoll_events = event.events;
  connections.emplace(added.id, std::move(connection));
  unproven.emplace(added.accepted_ns, added.id);
  accepted.fetch_add(1);
  // Most clients send their first request with the connection: served now, before more
  // accepts could shed it.
  on_event(added, EPOLLIN);
}

void StoreServer::State::on_event(Connection& connection, uint32_t events) {
  const uint64_t id = connection.id;
  if ((events & EPOLLERR) != 0) return close_connection(id);
  if ((events & EPOLLOUT) != 0 && !flush(connection)) return close_connection(id);
  if ((events & (EPOLLIN | EPOLLHUP | EPOLLRDHUP)) != 0 && !read_some(connection)) {
    return close_connection(id);
  }
  serve(connection);
}

// One read of at most kReadChunkBytes; false when the peer is gone.
bool StoreServer::State::read_some(Connection& connection) {
  if (connection.closing) {
    std::array<uint8_t, 4096> sink{};
    const ssize_t got = ::recv(connection.fd, sink.data(), sink.size(), 0);
    return got > 0 || (got < 0 && (errno == EAGAIN || errno == EINTR));
  }
  const uint64_t room = buffer_bound(connection) - std::min(buffer_bound(connection),
                                                            uint64_t{connection.buffered()});
  if (room == 0) return true;  // served before more is read
  if (buffered_bytes >= options.max_buffered_bytes) {
    // Not read again until others' requests are served (update() drops its EPOLLIN meanwhile).
    if (!connection.paused) paused_for_budget.push_back(connection.id);
    connection.paused = true;
    return true;
  }
  const size_t chunk = static_cast<size_t>(std::min<uint64_t>(
      {kReadChunkBytes, room, options.max_buffered_bytes - buffered_bytes}));
  // Read into the loop's scratch and keep only what came: a thousand idle connections then hold
  // nothing, not a chunk each.
  const ssize_t got = ::recv(connection.fd, scratch.data(), chunk, 0);
  if (got == 0) return false;
  if (got < 0) return errno == EAGAIN || errno == EINTR;
  if (connection.in_start > 0) {
    connection.in.erase(connection.in.begin(),
                        connection.in.begin() + static_cast<ptrdiff_t>(connection.in_start));
    connection.in_start = 0;
  }
  connection.in.insert(connection.in.end(), scratch.begin(), scratch.begin() + got);
  buffered_bytes += static_cast<uint64_t>(got);
  return true;
}

void StoreServer::State::serve(Connection& connection) {
  const uint64_t id = connection.id;
  if (!connection.closing && connection.buffered() > 0) {
    if (connection.protocol == Protocol::kUnknown) {
      const bool torch = connection.unserved()[0] == 0 && options.serve_tcpstore;
      connection.protocol = torch ? Protocol::kTcpStore : Protocol::kPartrain;
    }
    const size_t before = connection.buffered();
    detail::SessionContext context = context_for(connection);
    const Verdict verdict = connection.protocol == Protocol::kTcpStore
                                ? detail::serve_tcpstore(connection, context)
                                : detail::serve_partrain(connection, context);
    buffered_bytes -= before - connection.buffered();
    if (connection.handshaken) unproven.erase({connection.accepted_ns, id});
    if (verdict == Verdict::kClose) {
      rejected.fetch_add(1);
      notices.note(detail::Notice::kRejected,
                   fmt::format("the rendezvous store dropped a client from {}: {}", connection.peer,
                               connection.close_reason),
                   connection.close_reason);
      return close_connection(id);
    }
    if (verdict == Verdict::kCloseAfterReply) {
      rejected.fetch_add(1);
      notices.note(detail::Notice::kRejected,
                   fmt::format("the rendezvous store rejected a client from {}: {}",
                               connection.peer, connection.close_reason),
                   connection.close_reason);
      begin_closing(connection);
    }
  }
  if (!flush(connection)) return close_connection(id);
  update(connection);
}

// Writes what the socket takes now; false when the peer is gone.
bool StoreServer::State::flush(Connection& connection) {
  while (!connection.out.empty()) {
    std::array<iovec, 16> pieces{};
    size_t count = 0;
    size_t offset = connection.out_offset;
    for (const detail::Outgoing& piece : connection.out) {
      if (count == pieces.size()) break;
      pieces[count].iov_base = const_cast<char*>(piece.data()) + offset;
      pieces[count].iov_len = piece.size() - offset;
      offset = 0;
      ++count;
    }
    msghdr message{};
    message.msg_iov = pieces.data();
    message.msg_iovlen = count;
    const ssize_t sent = ::sendmsg(connection.fd, &message, MSG_NOSIGNAL);
    if (sent < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN) return false;
      if (connection.write_blocked_ns < 0) connection.write_blocked_ns = now_ns;
      return true;
    }
    connection.write_blocked_ns = -1;
    connection.out_bytes -= static_cast<uint64_t>(sent);
    size_t left = static_cast<size_t>(sent);
    while (left > 0) {
      const size_t rest = connection.out.front().size() - connection.out_offset;
      if (left < rest) {
        connection.out_offset += left;
        break;
      }
      left -= rest;
      connection.out.pop_front();
      connection.out_offset = 0;
    }
  }
  connection.write_blocked_ns = -1;
  if (connection.closing && connection.closing_until_ns < 0) {
    // The reply is out: say so with FIN, then wait briefly for the peer to read and hang up
    // (closing with unread input would reset the connection and could destroy the reply).
    ::shutdown(connection.fd, SHUT_WR);
    connection.closing_until_ns = now_ns + kLingerNs;
  }
  return true;
}

void StoreServer::State::begin_closing(Connection& connection) {
  connection.closing = true;
  buffered_bytes -= connection.buffered();
  connection.in.clear();
  connection.in_start = 0;
  if (connection.parked) keys_of(connection).cancel_wait(connection.id);
  connection.parked.reset();
}

void StoreServer::State::close_connection(uint64_t id) {
  auto it = connections.find(id);
  if (it == connections.end()) return;
  Connection& connection = *it->second;
  buffered_bytes -= connection.buffered();
  keys_of(connection).cancel_wait(id);
  liveness.connection_closed(id, now_ns);
  unproven.erase({connection.accepted_ns, id});
  if (connection.timer_at_ns >= 0) timers.erase({connection.timer_at_ns, id});
  ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, connection.fd, nullptr);
  ::close(connection.fd);
  connections.erase(it);
}

// Re-arms a connection's epoll interest and its next deadline after anything changed.
void StoreServer::State::update(Connection& connection) {
  const bool backlogged = connection.buffered() >= buffer_bound(connection);
  uint32_t wanted = EPOLLRDHUP;
  if (!backlogged && !connection.paused) wanted |= EPOLLIN;
  if (!connection.out.empty()) wanted |= EPOLLOUT;
  if (wanted != connection.epoll_events) {
    epoll_event event{};
    event.events = wanted;
    event.data.u64 = connection.id;
    ::epoll_ctl(epoll_fd, EPOLL_CTL_MOD, connection.fd, &event);
    connection.epoll_events = wanted;
  }
  // A request timer runs while a request is only partly here: bytes buffered, nothing parked
  // and no replies holding the rest up.
  const bool partial = connection.buffered() > 0 && !connection.parked && connection.out.empty();
  if (!partial) {
    connection.request_started_ns = -1;
  } else if (connection.request_started_ns < 0) {
    connection.request_started_ns = now_ns;
  }
  const int64_t deadline = detail::next_deadline(connection, timeouts, now_ns);
  if (deadline == connection.timer_at_ns) return;
  if (connection.timer_at_ns >= 0) timers.erase({connection.timer_at_ns, connection.id});
  connection.timer_at_ns = deadline;
  if (deadline >= 0) timers.emplace(deadline, connection.id);
}

void StoreServer::State::fire_timers() {
  if (listen_paused_until_ns >= 0 && now_ns >= listen_paused_until_ns) {
    listen_paused_until_ns = -1;
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.u64 = kListenTag;
    ::epoll_ctl(epoll_fd, EPOLL_CTL_MOD, listen_fd, &event);
    if (spare_fd < 0) spare_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  }
  while (!timers.empty() && timers.begin()->first <= now_ns) {
    const uint64_t id = timers.begin()->second;
    timers.erase(timers.begin());
    Connection& connection = *connections.at(id);
    connection.timer_at_ns = -1;
    if (connection.closing) {
      if (connection.closing_until_ns < 0 || connection.closing_until_ns <= now_ns) {
        close_connection(id);
        continue;
      }
    } else if (connection.parked && connection.parked_until_ns <= now_ns) {
      detail::SessionContext context = context_for(connection);
      detail::finish_partrain_wait(connection, context, /*timed_out=*/true);
      serve(connection);
      continue;
    }
    const std::string why =
        connection.closing ? "" : detail::missed_deadline(connection, timeouts, now_ns);
    if (!why.empty()) {
      timed_out.fetch_add(1);
      notices.note(detail::Notice::kTimedOut,
                   fmt::format("the rendezvous store closed a connection from {} that {}",
                               connection.peer, why));
      close_connection(id);
      continue;
    }
    update(connection);
  }
}

void StoreServer::State::finish_ready_waits(KeySpace& keys, Protocol protocol) {
  // Serving one waiter may set keys that release others: until none is left.
  for (std::vector<WaiterId> ready = keys.take_ready(); !ready.empty();
       ready = keys.take_ready()) {
    for (WaiterId id : ready) {
      auto it = connections.find(id);
      if (it == connections.end()) continue;
      Connection& connection = *it->second;
      if (protocol == Protocol::kTcpStore) {
        detail::finish_tcpstore_wait(connection);
      } else {
        detail::SessionContext context = context_for(connection);
        detail::finish_partrain_wait(connection, context, /*timed_out=*/false);
      }
      serve(connection);
    }
  }
}

void StoreServer::State::resume_paused() {
  if (paused_for_budget.empty() || buffered_bytes >= options.max_buffered_bytes) return;
  for (uint64_t id : std::exchange(paused_for_budget, {})) {
    auto it = connections.find(id);
    if (it == connections.end()) continue;
    it->second->paused = false;
    if (!read_some(*it->second)) {
      close_connection(id);
      continue;
    }
    serve(*it->second);
  }
}

uint64_t StoreServer::State::buffer_bound(const Connection& connection) const {
  switch (connection.protocol) {
    case Protocol::kPartrain: return detail::partrain_frame_bound(options.limits);
    case Protocol::kTcpStore: return options.tcpstore_limits.max_query_bytes;
    case Protocol::kUnknown: break;
  }
  return kReadChunkBytes;
}

StatusOr<std::unique_ptr<StoreServer>> StoreServer::start(const std::string& bind_host,
                                                          uint16_t port, std::string token,
                                                          StoreServerOptions options) {
  if (token.size() > kMaxTokenBytes) {
    return invalid_argument("the rendezvous token has {} bytes, more than the limit of {}",
                            token.size(), kMaxTokenBytes);
  }
  auto state = std::make_unique<State>(std::move(token), std::move(options));
  state->max_connections = connection_limit(state->options);
  ASSIGN_OR_RETURN(state->listen_fd, listen_on(bind_host, port));
  state->port = bound_port(state->listen_fd);
  state->wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  state->epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
  state->spare_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (state->wake_fd < 0 || state->epoll_fd < 0) {
    const std::string why = std::strerror(errno);
    for (int fd : {state->listen_fd, state->wake_fd, state->epoll_fd, state->spare_fd}) {
      if (fd >= 0) ::close(fd);
    }
    return failed("cannot set up the rendezvous store's event loop: {}", why);
  }
  epoll_event listen_event{};
  listen_event.events = EPOLLIN;
  listen_event.data.u64 = kListenTag;
  ::epoll_ctl(state->epoll_fd, EPOLL_CTL_ADD, state->listen_fd, &listen_event);
  epoll_event wake_event{};
  wake_event.events = EPOLLIN;
  wake_event.data.u64 = kWakeTag;
  ::epoll_ctl(state->epoll_fd, EPOLL_CTL_ADD, state->wake_fd, &wake_event);
  State* raw = state.get();
  if (Status started = start_thread(state->loop_thread, [raw] { raw->run(); }); !started.is_ok()) {
    for (int fd : {state->listen_fd, state->wake_fd, state->epoll_fd, state->spare_fd}) {
      if (fd >= 0) ::close(fd);
    }
    return failed("cannot start the rendezvous store: {}; {}", started.message(),
                  kThreadRefusedRemedy);
  }
  log::debug("rendezvous store listening on {}:{} (at most {} connections)", bind_host,
             state->port, state->max_connections);
  return std::unique_ptr<StoreServer>(new StoreServer(std::move(state)));
}

StoreServer::StoreServer(std::unique_ptr<State> state) : state_(std::move(state)) {}

uint16_t StoreServer::port() const { return state_->port; }

StoreServerStats StoreServer::stats() const {
  const State& s = *state_;
  StoreServerStats stats;
  stats.open_connections = s.open_connections.load();
  stats.accepted = s.accepted.load();
  stats.refused = s.refused.load();
  stats.shed = s.shed.load();
  stats.timed_out = s.timed_out.load();
  stats.rejected = s.rejected.load();
  stats.stored_bytes = s.stored_bytes.load();
  stats.tcpstore_stored_bytes = s.tcpstore_stored_bytes.load();
  stats.max_connections = s.max_connections;
  return stats;
}

std::map<std::string, KeyLiveness> StoreServer::watched_keys() const {
  return state_->liveness.snapshot();
}

StoreServer::~StoreServer() {
  State& s = *state_;
  s.stopping.store(true);
  const uint64_t one = 1;
  (void)::write(s.wake_fd, &one, sizeof(one));
  s.loop_thread.join();
  for (auto& [id, connection] : s.connections) ::close(connection->fd);
  s.connections.clear();
  for (int fd : {s.listen_fd, s.wake_fd, s.epoll_fd, s.spare_fd}) {
    if (fd >= 0) ::close(fd);
  }
}

}  // namespace partrain::rendezvous
