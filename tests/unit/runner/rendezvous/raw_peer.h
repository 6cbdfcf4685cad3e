// A TCP peer of the rendezvous store that speaks raw bytes: for hostile peers, for the TCPStore
// protocol byte by byte, and for counting what the server does with them.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace partrain::rendezvous::testing {

class RawPeer {
 public:
  explicit RawPeer(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  }
  ~RawPeer() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawPeer(const RawPeer&) = delete;
  RawPeer& operator=(const RawPeer&) = delete;

  bool connected() const { return connected_; }
  int fd() const { return fd_; }

  bool send(const std::vector<uint8_t>& bytes) {
    return ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(bytes.size());
  }
  bool send(const std::string& bytes) {
    return send(std::vector<uint8_t>(bytes.begin(), bytes.end()));
  }

  // Exactly n bytes, or nullopt when the connection closed or the timeout passed first.
  std::optional<std::vector<uint8_t>> read(size_t n, std::chrono::milliseconds timeout =
                                                         std::chrono::seconds(5)) {
    std::vector<uint8_t> bytes(n);
    size_t got = 0;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (got < n) {
      if (!wait_readable(deadline)) return std::nullopt;
      const ssize_t r = ::recv(fd_, bytes.data() + got, n - got, 0);
      if (r <= 0) return std::nullopt;
      got += static_cast<size_t>(r);
    }
    return bytes;
  }

  // Whether the server closed the connection (EOF or reset) within the timeout; what it sent
  // before is discarded.
  bool closed_within(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::vector<uint8_t> sink(65536);
    while (wait_readable(deadline)) {
      const ssize_t r = ::recv(fd_, sink.data(), sink.size(), 0);
      if (r <= 0) return true;
    }
    return false;
  }

  // Nothing arrives within the timeout (and the connection stays open).
  bool silent_for(std::chrono::milliseconds timeout) {
    return !wait_readable(std::chrono::steady_clock::now() + timeout);
  }

 private:
  bool wait_readable(std::chrono::steady_clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() < 0) return false;
    pollfd entry{fd_, POLLIN, 0};
    return ::poll(&entry, 1, static_cast<int>(left.count())) > 0;
  }

  int fd_ = -1;
  bool connected_ = false;
};

}  // namespace partrain::rendezvous::testing
