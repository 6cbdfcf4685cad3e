// The metrics server with real sockets in this process: scrapes, and peers that send garbage,
// too much, too slowly or too many connections at once.
#include "metrics/metrics_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>
#include <vector>

namespace partrain::metrics {
namespace {

using namespace std::chrono_literals;

int connect_to(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  ::inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Everything the server sends until it closes, or what came within `limit`.
std::string read_all(int fd, std::chrono::milliseconds limit = 5s) {
  std::string out;
  const auto give_up = std::chrono::steady_clock::now() + limit;
  char buffer[4096];
  while (std::chrono::steady_clock::now() < give_up) {
    pollfd entry{fd, POLLIN, 0};
    if (::poll(&entry, 1, 50) <= 0) continue;
    const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) break;
    out.append(buffer, static_cast<size_t>(n));
  }
  return out;
}

std::string exchange(uint16_t port, const std::string& request) {
  const int fd = connect_to(port);
  if (fd < 0) return "connect failed";
  (void)::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string reply = read_all(fd);
  ::close(fd);
  return reply;
}

struct Served {
  std::unique_ptr<MetricsServer> server;
  explicit Served(ServerLimits limits = {}) {
    auto page = std::make_shared<const MetricsPage>(MetricsPage{"a 1\n", "a 1\n# EOF\n"});
    auto listening = MetricsServer::listen(
        "127.0.0.1", 0, [page] { return page; }, limits);
    EXPECT_TRUE(listening.is_ok()) << listening.status().message();
    server = std::move(*listening);
    server->start();
  }
  uint16_t port() const { return server->port(); }
};

TEST(MetricsServer, ServesThePageInTheFormatAskedFor) {
  Served served;
  const std::string plain = exchange(served.port(), "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(plain.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << plain;
  EXPECT_TRUE(plain.ends_with("\r\n\r\na 1\n")) << plain;
  const std::string open = exchange(
      served.port(), "GET /metrics HTTP/1.1\r\nAccept: application/openmetrics-text\r\n\r\n");
  EXPECT_TRUE(open.ends_with("a 1\n# EOF\n")) << open;
  EXPECT_NE(open.find("application/openmetrics-text; version=1.0.0"), std::string::npos);
}

TEST(MetricsServer, AnswersGarbageWith400AndKeepsServing) {
  Served served;
  std::string noise(3000, '\0');
  for (size_t i = 0; i < noise.size(); ++i) noise[i] = static_cast<char>((i * 131 + 7) % 256);
  EXPECT_EQ(exchange(served.port(), noise + "\r\n\r\n").rfind("HTTP/1.1 400", 0), 0u);
  EXPECT_EQ(exchange(served.port(), "PUT /metrics HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 405", 0), 0u);
  EXPECT_EQ(exchange(served.port(), "GET /admin HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 404", 0), 0u);
  EXPECT_EQ(exchange(served.port(), "GET /metrics HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 200", 0), 0u);
}

TEST(MetricsServer, AnEndlessHeadIsCutAt431) {
  Served served;
  const int fd = connect_to(served.port());
  ASSERT_GE(fd, 0);
  const std::string start = "GET /metrics HTTP/1.1\r\nX: ";
  (void)::send(fd, start.data(), start.size(), MSG_NOSIGNAL);
  const std::string filler(kMaxRequestHeadBytes, 'a');
  (void)::send(fd, filler.data(), filler.size(), MSG_NOSIGNAL);
  const std::string reply = read_all(fd);
  EXPECT_EQ(reply.rfind("HTTP/1.1 431", 0), 0u) << reply;
  ::close(fd);
}

TEST(MetricsServer, ASlowPeerIsAnswered408AndClosed) {
  ServerLimits limits;
  limits.request_timeout_ns = 300'000'000;
  Served served(limits);
  const int fd = connect_to(served.port());
  ASSERT_GE(fd, 0);
  const auto started = std::chrono::steady_clock::now();
  (void)::send(fd, "GET /met", 8, MSG_NOSIGNAL);  // and nothing more: slowloris
  const std::string reply = read_all(fd, 5s);
  const auto waited = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(reply.rfind("HTTP/1.1 408", 0), 0u) << reply;
  EXPECT_LT(waited, 3s);
  ::close(fd);
  // Meanwhile and after, others are served.
  EXPECT_EQ(exchange(served.port(), "GET /metrics HTTP/1.0\r\n\r\n").rfind("HTTP/1.1 200", 0), 0u);
}

TEST(MetricsServer, ConnectionsBeyondTheLimitAreShedNotQueued) {
  ServerLimits limits;
  limits.max_connections = 4;
  limits.request_timeout_ns = 2'000'000'000;
  Served served(limits);
  std::vector<int> idle;
  for (int i = 0; i < 4; ++i) idle.push_back(connect_to(served.port()));
  std::this_thread::sleep_for(200ms);  // the server has accepted them
  // A fifth is accepted and closed at once, with nothing sent.
  const int extra = connect_to(served.port());
  ASSERT_GE(extra, 0);
  EXPECT_EQ(read_all(extra, 1s), "");
  ::close(extra);
  // Once the idle ones are closed, scrapes are served again.
  for (int fd : idle) ::close(fd);
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(exchange(served.port(), "GET /metrics HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 200", 0), 0u);
}

TEST(MetricsServer, APortInUseIsRefusedNamingTheFlag) {
  Served first;
  auto second = MetricsServer::listen("127.0.0.1", first.port(), [] { return nullptr; });
  ASSERT_FALSE(second.is_ok());
  EXPECT_EQ(second.status().exit_code(), 1);
  EXPECT_NE(second.status().message().find("--metrics-port"), std::string::npos);
  EXPECT_NE(second.status().message().find("in use"), std::string::npos);
}

TEST(MetricsServer, AnAddressThatIsNoneIsAUsageError) {
  auto server = MetricsServer::listen("not an address", 0, [] { return nullptr; });
  ASSERT_FALSE(server.is_ok());
  EXPECT_EQ(server.status().exit_code(), 2);
  EXPECT_NE(server.status().message().find("--metrics-addr"), std::string::npos);
}

}  // namespace
}  // namespace partrain::metrics
