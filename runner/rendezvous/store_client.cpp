#include "runner/rendezvous/store_client.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <limits>
#include <thread>

#include "core/clock.h"

namespace partrain::rendezvous {
namespace {

using std::chrono::duration_cast;
using std::chrono::milliseconds;

constexpr milliseconds kConnectRetryInterval{100};

std::string format_endpoint(const std::string& host, uint16_t port) {
  // IPv6 literals need brackets to keep the port readable.
  if (host.find(':') != std::string::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

uint32_t to_wire_timeout_ms(Nanoseconds timeout) {
  // Rounded up, so a 1.5 ms wait is not cut to 1 ms; ~49 days is the wire's ceiling.
  const int64_t ms = duration_cast<milliseconds>(timeout).count() +
                     (timeout % milliseconds(1) > Nanoseconds(0) ? 1 : 0);
  return static_cast<uint32_t>(std::clamp<int64_t>(ms, 0, std::numeric_limits<uint32_t>::max()));
}

// now + waits, saturating: a caller may pass Nanoseconds::max() to mean "no limit".
int64_t deadline_after(Nanoseconds wait, Nanoseconds extra = Nanoseconds(0)) {
  int64_t deadline = monotonic_ns();
  for (Nanoseconds part : {wait, extra}) {
    const int64_t add = std::max<int64_t>(part.count(), 0);
    if (add > std::numeric_limits<int64_t>::max() - deadline) {
      return std::numeric_limits<int64_t>::max();
    }
    deadline += add;
  }
  return deadline;
}

// One pass over the host's addresses. `retryable` means the store may simply not be up yet.
struct ConnectAttempt {
  int fd = -1;
  bool retryable = true;
  Status error;
};

// Connects without blocking past deadline_ns: a blackholed host would otherwise hold a blocking
// connect() for the kernel's ~2 minutes, far beyond the user's --rdzv timeout.
Status connect_before(int fd, const addrinfo& ai, int64_t deadline_ns) {
  if (::connect(fd, ai.ai_addr, ai.ai_addrlen) == 0) return Status::ok();
  if (errno != EINPROGRESS) return unavailable("{}", std::strerror(errno));
  pollfd entry{fd, POLLOUT, 0};
  const int64_t left_ms = std::max<int64_t>(0, (deadline_ns - monotonic_ns()) / 1'000'000);
  int ready = ::poll(&entry, 1, static_cast<int>(std::min<int64_t>(left_ms, 60'000)));
  if (ready == 0) return unavailable("connection attempt timed out");
  if (ready < 0) return unavailable("{}", std::strerror(errno));
  int error = 0;
  socklen_t length = sizeof(error);
  getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length);
  if (error != 0) return unavailable("{}", std::strerror(error));
  return Status::ok();
}

ConnectAttempt try_connect(const std::string& host, uint16_t port, int64_t deadline_ns) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
  if (rc != 0) {
    // A temporary DNS failure is worth retrying; a name that does not exist is not.
    return {-1, rc == EAI_AGAIN,
            unavailable("cannot resolve the rendezvous host '{}': {}", host, gai_strerror(rc))};
  }
  ConnectAttempt attempt;
  attempt.error = unavailable("'{}' has no usable address", host);
  for (addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                      ai->ai_protocol);
    if (fd < 0) {
      attempt.error = unavailable("cannot create a socket: {}", std::strerror(errno));
      continue;
    }
    Status connected = connect_before(fd, *ai, deadline_ns);
    if (!connected.is_ok()) {
      ::close(fd);
      attempt.error = connected;
      continue;
    }
    // Back to blocking: frame I/O waits with poll() where it needs a deadline.
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    attempt.fd = fd;
    break;
  }
  ::freeaddrinfo(found);
  return attempt;
}

}  // namespace

StatusOr<std::unique_ptr<StoreClient>> StoreClient::connect(const std::string& host, uint16_t port,
                                                            std::string token, Nanoseconds timeout,
                                                            StoreLimits limits) {
  if (token.size() > kMaxTokenBytes) {
    return invalid_argument("the rendezvous token has {} bytes, more than the limit of {}",
                            token.size(), kMaxTokenBytes);
  }
  const std::string endpoint = format_endpoint(host, port);
  const int64_t deadline_ns = deadline_after(timeout);
  while (true) {
    ConnectAttempt attempt = try_connect(host, port, deadline_ns);
    if (attempt.fd >= 0) {
      return std::unique_ptr<StoreClient>(
          new StoreClient(attempt.fd, endpoint, std::move(token), timeout, limits));
    }
    if (!attempt.retryable) return attempt.error;
    const int64_t left_ns = deadline_ns - monotonic_ns();
    if (left_ns <= 0) {
      return timeout_error("could not reach the rendezvous store at {} within {}: {}", endpoint,
                           format_duration(timeout), attempt.error.message());
    }
    std::this_thread::sleep_for(std::min<Nanoseconds>(kConnectRetryInterval, Nanoseconds(left_ns)));
  }
}

StoreClient::StoreClient(int fd, std::string endpoint, std::string token, Nanoseconds io_timeout,
                         StoreLimits limits)
    : fd_(fd),
      endpoint_(std::move(endpoint)),
      token_(std::move(token)),
      io_timeout_(io_timeout),
      limits_(limits) {}

StoreClient::~StoreClient() {
  if (fd_ >= 0) ::close(fd_);
}

StatusOr<Reply> StoreClient::round_trip_locked(const Request& request, Nanoseconds extra_wait) {
  if (broken_) {
    return unavailable("the connection to the rendezvous store at {} was lost earlier", endpoint_);
  }
  RETURN_IF_ERROR(check_request_limits(request, limits_));
  // Any failure below leaves the byte stream at an unknown point, so the connection is retired.
  auto lost = [&](const Status& why) {
    broken_ = true;
    return Status(why.code(), fmt::format("rendezvous store at {}: {} ({})", endpoint_,
                                          why.message(), op_name(request.op)));
  };
  Status sent = send_all(fd_, encode_request(request, token_));
  if (!sent.is_ok()) return lost(sent);

  const int64_t deadline_ns = deadline_after(io_timeout_, extra_wait);
  std::array<uint8_t, kFrameHeaderBytes> header_bytes{};
  if (Status got = receive_exact(fd_, header_bytes, deadline_ns); !got.is_ok()) return lost(got);
  auto header = decode_frame_header(header_bytes, max_reply_payload_bytes(limits_));
  if (!header.is_ok()) return lost(header.status());
  if (header->op != static_cast<uint16_t>(request.op) || header->token_bytes != 0) {
    return lost(failed("reply does not match the request (op {}, token {} bytes)", header->op,
                       header->token_bytes));
  }
  std::vector<uint8_t> payload(header->payload_bytes);
  if (Status got = receive_exact(fd_, payload, deadline_ns); !got.is_ok()) return lost(got);
  auto reply = decode_reply_payload(request.op, payload, limits_);
  if (!reply.is_ok()) return lost(reply.status());

  switch (reply->code) {
    case ReplyCode::kOk: return reply;
    case ReplyCode::kTimeout: return timeout_error("{}", reply->message);
    case ReplyCode::kFailed: return failed("{}", reply->message);
    case ReplyCode::kRejected:
      broken_ = true;  // the server hangs up after a rejection
      return invalid_argument("rendezvous store at {} rejected this client: {}", endpoint_,
                              reply->message);
  }
  return lost(failed("unknown reply code"));
}

StatusOr<Reply> StoreClient::round_trip(const Request& request, Nanoseconds extra_wait) {
  std::lock_guard lock(mutex_);
  return round_trip_locked(request, extra_wait);
}

Status StoreClient::set(std::string_view key, std::string_view value) {
  Request request;
  request.op = Op::kSet;
  request.key = key;
  request.value = value;
  return round_trip(request, Nanoseconds(0)).status();
}

StatusOr<std::string> StoreClient::get(std::string_view key, Nanoseconds timeout) {
  Request request;
  request.op = Op::kGet;
  request.key = key;
  request.timeout_ms = to_wire_timeout_ms(timeout);
  ASSIGN_OR_RETURN(Reply reply, round_trip(request, milliseconds(request.timeout_ms)));
  return std::move(reply.value);
}

StatusOr<int64_t> StoreClient::add(std::string_view key, int64_t delta) {
  Request request;
  request.op = Op::kAdd;
  request.key = key;
  request.delta = delta;
  ASSIGN_OR_RETURN(Reply reply, round_trip(request, Nanoseconds(0)));
  return reply.number;
}

Status StoreClient::wait(const std::vector<std::string>& keys, Nanoseconds timeout) {
  Request request;
  request.op = Op::kWait;
  request.keys = keys;
  request.timeout_ms = to_wire_timeout_ms(timeout);
  return round_trip(request, milliseconds(request.timeout_ms)).status();
}

StatusOr<bool> StoreClient::check(const std::vector<std::string>& keys) {
  Request request;
  request.op = Op::kCheck;
  request.keys = keys;
  ASSIGN_OR_RETURN(Reply reply, round_trip(request, Nanoseconds(0)));
  return reply.all_present;
}

StatusOr<StoreClient::ClockSample> StoreClient::ping() {
  Request request;
  request.op = Op::kPing;
  // Timestamps are taken inside the lock so waiting for another thread's request does not
  // inflate the round trip the offset estimate weighs samples by.
  std::lock_guard lock(mutex_);
  ClockSample sample;
  sample.send_ns = monotonic_ns();
  ASSIGN_OR_RETURN(Reply reply, round_trip_locked(request, Nanoseconds(0)));
  sample.recv_ns = monotonic_ns();
  sample.server_ns = reply.number;
  return sample;
}

std::string StoreClient::local_address() const {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) return "";
  char text[INET6_ADDRSTRLEN] = "";
  if (address.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(address).sin_addr, text, sizeof(text));
  } else if (address.ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(address).sin6_addr, text,
              sizeof(text));
  }
  return text;
}

}  // namespace partrain::rendezvous
