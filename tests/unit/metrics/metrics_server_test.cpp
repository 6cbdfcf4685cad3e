// The metrics server with real sockets in this process: scrapes, and peers that send garbage,
// too much, too slowly or too many connections at once.
#include "metrics/metrics_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
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

// At the limit, a newcomer makes room by closing the oldest connection that has not sent a whole
// request yet: peers that trickle bytes to hold every slot cannot keep scrapes out.
TEST(MetricsServer, AtTheLimitTheOldestSilentConnectionMakesRoom) {
  ServerLimits limits;
  limits.max_connections = 4;
  limits.request_timeout_ns = 10'000'000'000;
  Served served(limits);
  std::vector<int> idle;
  for (int i = 0; i < 4; ++i) {
    idle.push_back(connect_to(served.port()));
    (void)::send(idle.back(), "G", 1, MSG_NOSIGNAL);  // a head begun, never finished
    std::this_thread::sleep_for(20ms);                // accepted in this order
  }
  std::this_thread::sleep_for(200ms);
  // A scrape beside four slots held: served, and the first of the four is gone.
  EXPECT_EQ(exchange(served.port(), "GET /metrics HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 200", 0), 0u);
  // The first of the four was closed, with nothing sent; the last is still open.
  auto closed = [](int fd) {
    pollfd entry{fd, POLLIN, 0};
    char byte = 0;
    return ::poll(&entry, 1, 1000) == 1 && ::recv(fd, &byte, 1, MSG_DONTWAIT) == 0;
  };
  EXPECT_TRUE(closed(idle[0]));
  pollfd last{idle[3], POLLIN, 0};
  EXPECT_EQ(::poll(&last, 1, 100), 0);
  for (int fd : idle) ::close(fd);
}

// The /proc stat file of this process's thread named `name`, opened (-1 when there is none).
int open_thread_stat(const std::string& name) {
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string thread;
    std::getline(comm, thread);
    if (thread == name) return ::open((task.path() / "stat").c_str(), O_RDONLY | O_CLOEXEC);
  }
  return -1;
}

// That thread's CPU time (user + system) in ms, read again from the open file.
double thread_cpu_ms(int stat_fd) {
  char buffer[1024] = {};
  if (::pread(stat_fd, buffer, sizeof(buffer) - 1, 0) <= 0) return -1;
  const std::string text(buffer);
  std::istringstream fields(text.substr(text.rfind(')') + 2));
  std::string field;
  long long utime = 0;
  for (int i = 3; fields >> field; ++i) {
    if (i == 14) utime = std::stoll(field);
    if (i == 15)
      return static_cast<double>(utime + std::stoll(field)) * 1000.0 /
             static_cast<double>(::sysconf(_SC_CLK_TCK));
  }
  return -1;
}

// Out of descriptors, accept fails while peers wait in the backlog: the server rests its
// listening socket instead of spinning on it, and serves again once descriptors are back.
TEST(MetricsServer, RunningOutOfDescriptorsDoesNotSpin) {
  Served served;
  int stat_fd = -1;  // the thread names itself once it runs
  for (int i = 0; i < 200 && stat_fd < 0; ++i) {
    stat_fd = open_thread_stat("metrics-http");
    if (stat_fd < 0) std::this_thread::sleep_for(10ms);
  }
  ASSERT_GE(stat_fd, 0);
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  // A few descriptors above those open now: the clients below take them, then accept fails.
  int open_now = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    (void)entry;
    ++open_now;
  }
  rlimit low = saved;
  low.rlim_cur = static_cast<rlim_t>(open_now + 8);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  std::vector<int> clients;
  for (int i = 0; i < 32; ++i) {
    const int fd = connect_to(served.port());
    if (fd >= 0) clients.push_back(fd);
  }
  const double before = thread_cpu_ms(stat_fd);
  std::this_thread::sleep_for(1s);
  const double spent = thread_cpu_ms(stat_fd) - before;
  for (int fd : clients) ::close(fd);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &saved), 0);
  ::close(stat_fd);
  EXPECT_GE(before, 0);
  EXPECT_LT(spent, 100) << "ms of CPU in 1 s with accept failing";
  std::this_thread::sleep_for(300ms);
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
