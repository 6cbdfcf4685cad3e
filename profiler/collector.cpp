#include "profiler/collector.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "core/clock.h"
#include "core/fd_above_stdio.h"
#include "core/log.h"
#include "core/temp_dir.h"

namespace partrain::profiler {
namespace {

constexpr size_t kReadChunkBytes = 256 * 1024;

// mkdir path 0700, or accept an existing one only if it is ours and closed to others.
Status make_private_dir(const std::string& path) {
  if (::mkdir(path.c_str(), 0700) == 0) return Status::ok();
  if (errno != EEXIST) {
    return unavailable("cannot create the collector directory {}: {}", path, std::strerror(errno));
  }
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) {
    return unavailable("{} exists but is not a directory{}: remove it", path,
                       S_ISLNK(info.st_mode) ? " (a symbolic link)" : "");
  }
  if (info.st_uid != ::getuid()) {
    return unavailable("{} belongs to another user (uid {}): remove it", path, info.st_uid);
  }
  if ((info.st_mode & 077) != 0) {
    return unavailable("{} is open to others (mode {:o}): remove it, or chmod 700 it", path,
                       info.st_mode & 0777);
  }
  return Status::ok();
}

StatusOr<sockaddr_un> unix_address(const std::string& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(address.sun_path)) {
    return invalid_argument(
        "collector socket path '{}' is empty or longer than the {} bytes a Unix socket's path can "
        "have",
        path, sizeof(address.sun_path) - 1);
  }
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  return address;
}

// Writes head then tail (gathered, no copy) until done, the deadline, or an error.
bool send_gathered(int fd, std::span<const uint8_t> head, std::span<const uint8_t> tail,
                   int64_t deadline_ns) {
  while (!head.empty() || !tail.empty()) {
    iovec parts[2] = {{const_cast<uint8_t*>(head.data()), head.size()},
                      {const_cast<uint8_t*>(tail.data()), tail.size()}};
    msghdr message{};
    message.msg_iov = head.empty() ? parts + 1 : parts;
    message.msg_iovlen = head.empty() ? 1 : 2;
    // MSG_NOSIGNAL: a vanished collector is a lost batch, not a SIGPIPE that kills the rank.
    const ssize_t sent = ::sendmsg(fd, &message, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return false;
      const int64_t left_ns = deadline_ns - monotonic_ns();
      if (left_ns <= 0) return false;
      pollfd entry{fd, POLLOUT, 0};
      ::poll(&entry, 1, static_cast<int>(std::min<int64_t>(left_ns / 1'000'000 + 1, 1000)));
      continue;
    }
    auto done = static_cast<size_t>(sent);
    const size_t from_head = std::min(done, head.size());
    head = head.subspan(from_head);
    tail = tail.subspan(done - from_head);
  }
  return true;
}

// The process at the other end of a Unix socket, as the kernel saw it connect; 0 if unknown.
pid_t peer_pid(int fd) {
  ucred credentials{};
  socklen_t size = sizeof credentials;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &size) != 0) return 0;
  return credentials.pid;
}

// Whether `ancestor` started `pid`, directly or through processes between them (/proc's ppid
// chain; false when it cannot be read).
bool started_by(pid_t pid, pid_t ancestor) {
  for (int depth = 0; depth < 64 && pid > 1; ++depth) {
    std::FILE* stat = std::fopen(fmt::format("/proc/{}/stat", pid).c_str(), "r");
    if (stat == nullptr) return false;
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so read past the last ')'.
    std::string text(512, '\0');
    text.resize(std::fread(text.data(), 1, text.size(), stat));
    std::fclose(stat);
    const size_t close = text.rfind(')');
    if (close == std::string::npos) return false;
    char state = 0;
    int parent = 0;
    if (std::sscanf(text.c_str() + close + 1, " %c %d", &state, &parent) != 2) return false;
    if (parent == ancestor) return true;
    pid = parent;
  }
  return false;
}

}  // namespace

std::string collector_base_dir() {
  struct stat info {};
  const char* runtime = std::getenv("XDG_RUNTIME_DIR");
  // A relative one is invalid (the XDG base directory spec: ignore it): ranks that change
  // directory would look for the socket elsewhere.
  if (runtime != nullptr && runtime[0] == '/' && ::stat(runtime, &info) == 0 &&
      S_ISDIR(info.st_mode)) {
    return std::string(runtime) + "/partrain";
  }
  return fmt::format("/tmp/partrain-{}", ::getuid());
}

Status check_run_id(std::string_view run_id) {
  const bool named = !run_id.empty() && run_id.size() <= 200 && run_id.front() != '.' &&
                     std::none_of(run_id.begin(), run_id.end(), [](char c) {
                       return c == '/' || std::iscntrl(static_cast<unsigned char>(c));
                     });
  if (named) return Status::ok();
  return invalid_argument(
      "'{}' cannot name a run's directories: use 1 to 200 characters without '/' or control "
      "characters, not starting with '.'",
      run_id.size() > 64 ? std::string(run_id.substr(0, 64)) + "..." : std::string(run_id));
}

namespace {

// A fresh private directory of our own for one run's socket, in the temporary directory (or in
// /tmp when that one's path leaves too little room for the socket's); `why` says why it is needed.
StatusOr<std::string> make_fallback_collector_dir(std::string_view why) {
  std::filesystem::path temp = temporary_directory();
  const auto pattern = [](const std::filesystem::path& dir) {
    return (dir / fmt::format("{}XXXXXX", kFallbackCollectorDirPrefix)).string();
  };
  if (pattern(temp).size() + 1 + kMaxCollectorSocketNameBytes >= sizeof(sockaddr_un::sun_path)) {
    temp = "/tmp";
  }
  std::string fallback = pattern(temp);
  if (::mkdtemp(fallback.data()) == nullptr) {
    return unavailable("{}; and no private directory could be made instead: {}", why,
                       std::strerror(errno));
  }
  return fallback;
}

}  // namespace

StatusOr<std::string> make_collector_dir(std::string_view run_id) {
  if (Status checked = check_run_id(run_id); !checked.is_ok()) {
    return invalid_argument("run id {}", checked.message());
  }
  const std::string base = collector_base_dir();
  if (Status usable = make_private_dir(base); !usable.is_ok()) {
    // Another user's directory, one open to others or a symbolic link where ours should be
    // (made before us in a shared /tmp, by mistake or to catch our socket): not trusted, and
    // not a reason to refuse every traced run either. A fresh private directory of our own
    // serves this run; the trace session removes it at the end.
    ASSIGN_OR_RETURN(std::string fallback, make_fallback_collector_dir(usable.message()));
    log::warn("{}; the collector's socket goes into {} for this run instead", usable.message(),
              fallback);
    return fallback;
  }
  std::string dir = base + "/" + std::string(run_id);
  // Every run id check_run_id accepts must trace: a long one (or a long XDG_RUNTIME_DIR) whose
  // socket path would not fit a Unix socket's 107 bytes gets a short private directory instead.
  if (dir.size() + 1 + kMaxCollectorSocketNameBytes >= sizeof(sockaddr_un::sun_path)) {
    const std::string why = fmt::format(
        "a socket in {} would have a path longer than the {} bytes a Unix socket's can have", dir,
        sizeof(sockaddr_un::sun_path) - 1);
    ASSIGN_OR_RETURN(std::string fallback, make_fallback_collector_dir(why));
    log::debug("{}: the collector's socket goes into {} for this run", why, fallback);
    return fallback;
  }
  RETURN_IF_ERROR(make_private_dir(dir));
  return dir;
}

// ---------------------------------------------------------------------------------------------
// Collector

struct Collector::Connection {
  int fd = -1;
  int32_t rank = -1;  // set by HELLO
  pid_t pid = 0;      // the peer, at HELLO (0: unknown)
  int64_t accepted_ns = 0;
  bool said_goodbye = false;
  std::vector<uint8_t> in;  // received bytes; [0, used) not yet consumed
  size_t used = 0;
};

StatusOr<std::unique_ptr<Collector>> Collector::start(CollectorOptions options,
                                                      CollectorConsumer consumer) {
  if (options.token.size() > kMaxCollectorTokenBytes) {
    return invalid_argument("collector token of {} bytes is longer than {}", options.token.size(),
                            kMaxCollectorTokenBytes);
  }
  ASSIGN_OR_RETURN(sockaddr_un address, unix_address(options.socket_path));
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return unavailable("cannot create the collector socket: {}", std::strerror(errno));
  ::unlink(options.socket_path.c_str());  // a stale socket of a crashed run
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0 ||
      ::listen(fd, 256) != 0) {
    const int error = errno;
    ::close(fd);
    return unavailable("cannot listen on the collector socket {}: {}", options.socket_path,
                       std::strerror(error));
  }
  int wake[2];
  if (::pipe2(wake, O_NONBLOCK | O_CLOEXEC) != 0) {
    const int error = errno;
    ::close(fd);
    return unavailable("cannot create the collector's wake-up pipe: {}", std::strerror(error));
  }
  std::unique_ptr<Collector> collector(
      new Collector(std::move(options), std::move(consumer), fd, wake[0], wake[1]));
  try {
    collector->thread_ = std::thread([c = collector.get()] { c->serve(); });
  } catch (const std::system_error& e) {
    return unavailable("cannot start the collector thread: {}", e.what());
  }
  return collector;
}

Collector::Collector(CollectorOptions options, CollectorConsumer consumer, int listen_fd,
                     int wake_read, int wake_write)
    : options_(std::move(options)),
      consumer_(std::move(consumer)),
      listen_fd_(listen_fd),
      wake_read_(wake_read),
      wake_write_(wake_write) {}

namespace {

enum CollectorMode : int { kServe = 0, kStop = 1, kDrain = 2 };

void wake_up(int fd) {
  const uint8_t byte = 1;
  while (::write(fd, &byte, 1) < 0 && errno == EINTR) {
  }
}

int64_t ms_to_ns(std::chrono::milliseconds ms) { return int64_t{ms.count()} * 1'000'000; }

}  // namespace

Collector::~Collector() {
  if (thread_.joinable()) {
    mode_.store(kStop);
    wake_up(wake_write_);
    thread_.join();
  }
  if (listen_fd_ >= 0) ::close(listen_fd_);
  ::close(wake_read_);
  ::close(wake_write_);
  if (!socket_removed_) ::unlink(options_.socket_path.c_str());
}

CollectorDrainResult Collector::drain(std::chrono::milliseconds timeout) {
  if (!thread_.joinable()) return {};
  drain_deadline_ns_.store(monotonic_ns() + ms_to_ns(timeout));
  mode_.store(kDrain);
  wake_up(wake_write_);
  thread_.join();
  return drain_result_;
}

CollectorStats Collector::stats() const {
  CollectorStats stats;
  stats.connections = connections_.load();
  stats.rejected = rejected_.load();
  stats.rejected_unidentified = rejected_unidentified_.load();
  stats.batches = batches_.load();
  stats.records = records_.load();
  stats.dropped_reported = dropped_reported_.load();
  stats.unclean_closes = unclean_closes_.load();
  return stats;
}

void Collector::reject(const Connection& connection, const Status& why) {
  if (connection.rank < 0) rejected_unidentified_.fetch_add(1);
  // Logged once per collector: a misconfigured rank reconnecting must not flood stderr.
  if (rejected_.fetch_add(1) == 0) {
    log::warn("trace collector: disconnected a client (rank {}): {}", connection.rank,
              why.message());
  } else {
    log::debug("trace collector: disconnected a client (rank {}): {}", connection.rank,
               why.message());
  }
}

bool Collector::handle_frame(Connection& connection, const CollectorFrame& frame) {
  if (connection.rank < 0 && frame.kind != FrameKind::kHello) {
    reject(connection, failed("{} frame before HELLO", frame_kind_name(frame.kind)));
    return false;
  }
  switch (frame.kind) {
    case FrameKind::kHello:
      if (connection.rank >= 0) {
        reject(connection, failed("a second HELLO on one connection"));
        return false;
      }
      connection.rank = frame.rank;
      connection.pid = peer_pid(connection.fd);
      if (consumer_.hello) consumer_.hello(connection.rank, connection.pid);
      check_rank_shared(connection);
      live_ranks_.emplace(connection.rank, connection.pid);
      return true;
    case FrameKind::kBatch:
      batches_.fetch_add(1, std::memory_order_relaxed);
      records_.fetch_add(frame.record_count, std::memory_order_relaxed);
      if (consumer_.records) consumer_.records(connection.rank, frame.records, frame.record_count);
      return true;
    case FrameKind::kDropped:
      dropped_reported_.fetch_add(frame.dropped, std::memory_order_relaxed);
      if (consumer_.dropped) consumer_.dropped(connection.rank, frame.dropped);
      return true;
    case FrameKind::kGoodbye: connection.said_goodbye = true; return true;
  }
  return false;
}

bool Collector::read_from(Connection& c) {
  if (c.in.size() - c.used < kReadChunkBytes) c.in.resize(c.used + kReadChunkBytes);
  const ssize_t got = ::recv(c.fd, c.in.data() + c.used, c.in.size() - c.used, MSG_DONTWAIT);
  if (got == 0) return false;
  if (got < 0) return errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK;
  c.used += static_cast<size_t>(got);

  size_t pos = 0;
  while (c.used - pos >= kCollectorHeaderBytes) {
    const std::span<const uint8_t> available(c.in.data() + pos, c.used - pos);
    // The header alone decides whether the body may be buffered: an oversized frame is refused
    // before its bytes are read.
    auto header = decode_collector_header(available, options_.limits);
    if (!header.is_ok()) {
      reject(c, header.status());
      return false;
    }
    const size_t frame_bytes = header->frame_bytes();
    if (available.size() < frame_bytes) break;
    auto frame = decode_collector_frame(available.first(frame_bytes), options_.token,
                                        options_.limits);
    if (!frame.is_ok()) {
      reject(c, frame.status());
      return false;
    }
    if (!handle_frame(c, *frame)) return false;
    pos += frame_bytes;
  }
  if (pos > 0) {
    std::memmove(c.in.data(), c.in.data() + pos, c.used - pos);
    c.used -= pos;
  }
  return true;
}

void Collector::accept_pending(std::vector<std::unique_ptr<Connection>>& connections) {
  while (true) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    auto connection = std::make_unique<Connection>();
    connection->fd = fd;
    connection->accepted_ns = monotonic_ns();
    connections.push_back(std::move(connection));
    connections_.fetch_add(1, std::memory_order_relaxed);
  }
}

void Collector::check_rank_shared(const Connection& connection) {
  if (!consumer_.rank_shared || connection.pid <= 0) return;
  const auto [first, last] = live_ranks_.equal_range(connection.rank);
  for (auto live = first; live != last; ++live) {
    const pid_t other = live->second;
    if (other <= 0 || other == connection.pid) continue;
    if (started_by(connection.pid, other) || started_by(other, connection.pid)) continue;
    consumer_.rank_shared(connection.rank, connection.pid, other);
    return;
  }
}

void Collector::close_connection(Connection& c, bool cut) {
  // After GOODBYE every frame of the client has been read, so even a cut close loses nothing.
  // A client that never said HELLO is no rank's connection: nothing of a rank's goes with it.
  const bool clean = c.said_goodbye;
  if (c.rank >= 0) {
    const auto [first, last] = live_ranks_.equal_range(c.rank);
    for (auto live = first; live != last; ++live) {
      if (live->second == c.pid) {
        live_ranks_.erase(live);
        break;
      }
    }
    if (!clean) unclean_closes_.fetch_add(1, std::memory_order_relaxed);
    if (consumer_.closed) consumer_.closed(c.rank, clean);
    if (cut) {
      ++drain_result_.cut;
    } else if (mode_.load(std::memory_order_relaxed) == kDrain) {
      ++drain_result_.drained;
    }
  }
  ::close(c.fd);
  c.fd = -1;
}

void Collector::tick_if_due(int64_t now_ns) {
  if (!consumer_.tick || now_ns < next_tick_ns_) return;
  next_tick_ns_ = now_ns + ms_to_ns(options_.tick_interval);
  consumer_.tick();
}

namespace {

constexpr int64_t kHelloGraceNs = 1'000'000'000;

// How long poll may sleep: until the next tick and, while draining, the drain deadline.
int poll_timeout_ms(bool ticking, int64_t next_tick_ns, bool draining, int64_t deadline_ns) {
  int64_t until_ns = -1;
  const int64_t now = monotonic_ns();
  if (ticking) until_ns = std::max<int64_t>(next_tick_ns - now, 0);
  if (draining) {
    const int64_t left = std::max<int64_t>(deadline_ns - now, 0);
    until_ns = until_ns < 0 ? left : std::min(until_ns, left);
  }
  if (until_ns < 0) return -1;
  return static_cast<int>(std::min<int64_t>((until_ns + 999'999) / 1'000'000, 60'000));
}

}  // namespace

void Collector::serve() {
  std::vector<std::unique_ptr<Connection>> connections;
  std::vector<pollfd> fds;
  bool draining = false;
  next_tick_ns_ = monotonic_ns() + ms_to_ns(options_.tick_interval);
  while (true) {
    const int mode = mode_.load();
    if (mode == kStop) break;
    if (mode == kDrain && !draining) {
      // Clients already queued on the socket are taken too; nobody new can connect.
      draining = true;
      accept_pending(connections);
      ::close(listen_fd_);
      listen_fd_ = -1;
      ::unlink(options_.socket_path.c_str());
      socket_removed_ = true;
    }
    if (draining) {
      // A client that has not said HELLO a second after it connected is no rank (ranks say it
      // first thing): it does not hold the run's end for the drain timeout.
      const int64_t now = monotonic_ns();
      for (const auto& c : connections) {
        if (c->rank < 0 && now - c->accepted_ns >= kHelloGraceNs) close_connection(*c, false);
      }
      std::erase_if(connections, [](const auto& c) { return c->fd < 0; });
    }
    if (draining && (connections.empty() || monotonic_ns() >= drain_deadline_ns_.load())) break;
    fds.clear();
    fds.push_back({wake_read_, POLLIN, 0});
    fds.push_back({listen_fd_, POLLIN, 0});  // poll ignores -1 once draining
    for (const auto& c : connections) fds.push_back({c->fd, POLLIN, 0});
    int timeout = poll_timeout_ms(static_cast<bool>(consumer_.tick), next_tick_ns_, draining,
                                  drain_deadline_ns_.load());
    if (draining && std::any_of(connections.begin(), connections.end(),
                                [](const auto& c) { return c->rank < 0; })) {
      timeout = std::min(timeout, 100);  // to close the silent ones once their grace is over
    }
    if (::poll(fds.data(), fds.size(), timeout) < 0) {
      if (errno == EINTR) continue;
      log::error("trace collector: poll failed ({}); the collector stops", std::strerror(errno));
      break;
    }
    if (fds[0].revents != 0) {
      uint8_t bytes[16];
      while (::read(wake_read_, bytes, sizeof bytes) > 0) {
      }
    }
    for (size_t i = 2; i < fds.size(); ++i) {
      Connection& c = *connections[i - 2];
      if (fds[i].revents != 0 && !read_from(c)) close_connection(c, false);
    }
    std::erase_if(connections, [](const auto& c) { return c->fd < 0; });
    if (listen_fd_ >= 0 && (fds[1].revents & POLLIN)) accept_pending(connections);
    tick_if_due(monotonic_ns());
  }
  for (const auto& c : connections) {
    if (draining) {
      close_connection(*c, true);  // past the deadline: the consumer hears of each one
    } else {
      ::close(c->fd);  // stopping: promptly, without calling back into an owner being destroyed
    }
  }
}

// ---------------------------------------------------------------------------------------------
// CollectorClient

CollectorClient::CollectorClient(CollectorClientOptions options) : options_(std::move(options)) {
  const int64_t deadline = monotonic_ns() + options_.connect_timeout.count() * 1'000'000;
  while (!connect_once() && monotonic_ns() < deadline) ::usleep(10'000);
  if (fd_ < 0) {
    log::warn("trace client (rank {}): no collector at {}; events are dropped and counted until "
              "it appears",
              options_.rank, options_.socket_path);
    warned_ = true;
    next_connect_ns_ = monotonic_ns() + options_.reconnect_interval.count() * 1'000'000;
  }
}

CollectorClient::~CollectorClient() {
  if (fd_ < 0) return;
  if (unreported_lost_ > 0) dropped(0);
  const auto goodbye = encode_goodbye(options_.token);
  send_frame(goodbye, {});
  if (fd_ >= 0) ::close(fd_);
}

bool CollectorClient::connect_once() {
  auto address = unix_address(options_.socket_path);
  if (!address.is_ok()) return false;
  // Inside a traced program started with stdin or stdout closed, the socket must not become it.
  const int fd = fd_above_stdio(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd < 0) return false;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&*address), sizeof(sockaddr_un)) != 0) {
    ::close(fd);
    return false;
  }
  fd_ = fd;
  connects_.fetch_add(1, std::memory_order_relaxed);
  const auto hello = encode_hello(options_.token, options_.rank, static_cast<uint32_t>(::getpid()));
  return send_frame(hello, {});
}

bool CollectorClient::ensure_connected() {
  if (fd_ >= 0) return true;
  if (monotonic_ns() < next_connect_ns_) return false;
  next_connect_ns_ = monotonic_ns() + options_.reconnect_interval.count() * 1'000'000;
  if (!connect_once()) return false;
  log::info("trace client (rank {}): connected to the collector", options_.rank);
  warned_ = false;
  return true;
}

bool CollectorClient::send_frame(std::span<const uint8_t> head, std::span<const uint8_t> tail) {
  const int64_t deadline = monotonic_ns() + options_.send_timeout.count() * 1'000'000;
  if (send_gathered(fd_, head, tail, deadline)) return true;
  // A frame cut short leaves the stream unframed: the connection cannot be reused.
  disconnect("a send failed or took longer than the send timeout");
  return false;
}

void CollectorClient::disconnect(std::string_view why) {
  if (!warned_) {
    log::warn("trace client (rank {}): lost the collector ({}); events are dropped and counted",
              options_.rank, why);
    warned_ = true;
  }
  ::close(fd_);
  fd_ = -1;
  next_connect_ns_ = monotonic_ns() + options_.reconnect_interval.count() * 1'000'000;
}

void CollectorClient::write_batch(std::span<const uint8_t> records, uint32_t record_count) {
  if (ensure_connected()) {
    if (unreported_lost_ > 0) dropped(0);
    const auto prefix = encode_batch_prefix(options_.token, records.size(), record_count);
    if (fd_ >= 0 && send_frame(prefix, records)) {
      batches_sent_.fetch_add(1, std::memory_order_relaxed);
      records_sent_.fetch_add(record_count, std::memory_order_relaxed);
      return;
    }
  }
  records_lost_.fetch_add(record_count, std::memory_order_relaxed);
  unreported_lost_ += record_count;
}

void CollectorClient::dropped(uint64_t count) {
  unreported_lost_ += count;
  if (unreported_lost_ == 0 || !ensure_connected()) return;
  const auto frame = encode_dropped(options_.token, unreported_lost_);
  if (send_frame(frame, {})) unreported_lost_ = 0;
}

CollectorClientStats CollectorClient::stats() const {
  CollectorClientStats stats;
  stats.batches_sent = batches_sent_.load();
  stats.records_sent = records_sent_.load();
  stats.records_lost = records_lost_.load();
  stats.connects = connects_.load();
  return stats;
}

}  // namespace partrain::profiler
