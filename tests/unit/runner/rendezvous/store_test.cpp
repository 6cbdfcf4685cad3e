// The TCP rendezvous store: StoreServer and StoreClient on loopback, several client threads,
// blocking semantics, error messages, and hostile peers speaking raw bytes.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <future>
#include <thread>

#include "core/clock.h"
#include "runner/rendezvous/protocol.h"
#include "runner/rendezvous/store_client.h"
#include "runner/rendezvous/store_server.h"

namespace partrain::rendezvous {
namespace {

using namespace std::chrono_literals;

constexpr char kToken[] = "run-token-3f9a1c";

std::chrono::milliseconds elapsed_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               start);
}

bool contains(const std::string& text, std::string_view part) {
  return text.find(part) != std::string::npos;
}

// A TCP connection speaking raw bytes, for peers that do not follow the protocol.
class RawConnection {
 public:
  explicit RawConnection(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
    timeval five_seconds{5, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &five_seconds, sizeof(five_seconds));
  }
  ~RawConnection() { ::close(fd_); }
  bool connected() const { return connected_; }
  void send(const std::vector<uint8_t>& bytes) {
    ASSERT_EQ(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
  }
  // Everything the server sends until it closes the connection (or 5 s pass).
  std::vector<uint8_t> read_until_closed(bool* closed) {
    std::vector<uint8_t> received;
    std::array<uint8_t, 4096> chunk{};
    while (true) {
      ssize_t got = ::recv(fd_, chunk.data(), chunk.size(), 0);
      if (got <= 0) {
        *closed = got == 0;
        return received;
      }
      received.insert(received.end(), chunk.begin(), chunk.begin() + got);
    }
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

// A port that was free a moment ago: bound, read back, released.
uint16_t free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t length = sizeof(address);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = StoreServer::start("127.0.0.1", 0, kToken);
    ASSERT_TRUE(server.is_ok()) << server.status().message();
    server_ = std::move(*server);
    ASSERT_NE(server_->port(), 0);
  }

  std::unique_ptr<StoreClient> connect(std::string token = kToken) {
    auto client = StoreClient::connect("127.0.0.1", server_->port(), std::move(token), 5s);
    EXPECT_TRUE(client.is_ok()) << client.status().message();
    return client.is_ok() ? std::move(*client) : nullptr;
  }

  // A well-behaved client still gets served: proof a bad peer did not take the server down.
  void expect_server_still_serves() {
    auto client = connect();
    ASSERT_NE(client, nullptr);
    ASSERT_TRUE(client->set("still-alive", "yes").is_ok());
    auto value = client->get("still-alive", 1s);
    ASSERT_TRUE(value.is_ok()) << value.status().message();
    EXPECT_EQ(*value, "yes");
  }

  std::unique_ptr<StoreServer> server_;
};

TEST_F(StoreTest, SetGetAddCheck) {
  auto client = connect();
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->set("gloo/0", "10.0.0.1:4000").is_ok());
  auto value = client->get("gloo/0", 1s);
  ASSERT_TRUE(value.is_ok()) << value.status().message();
  EXPECT_EQ(*value, "10.0.0.1:4000");

  auto sum = client->add("arrivals", 3);
  ASSERT_TRUE(sum.is_ok());
  EXPECT_EQ(*sum, 3);
  sum = client->add("arrivals", -5);
  ASSERT_TRUE(sum.is_ok());
  EXPECT_EQ(*sum, -2);
  // Counters are text, so GET reads them as torch's TCPStore does.
  value = client->get("arrivals", 1s);
  ASSERT_TRUE(value.is_ok());
  EXPECT_EQ(*value, "-2");
  auto not_a_number = client->add("gloo/0", 1);
  ASSERT_FALSE(not_a_number.is_ok());
  EXPECT_TRUE(contains(not_a_number.status().message(), "gloo/0"));

  auto present = client->check({"gloo/0", "arrivals"});
  ASSERT_TRUE(present.is_ok());
  EXPECT_TRUE(*present);
  present = client->check({"gloo/0", "gloo/1"});
  ASSERT_TRUE(present.is_ok());
  EXPECT_FALSE(*present);
  // The connection is still usable after a failed request.
  EXPECT_TRUE(client->set("after-failure", "ok").is_ok());
}

TEST_F(StoreTest, LargeBinaryValueRoundTrips) {
  auto client = connect();
  ASSERT_NE(client, nullptr);
  std::string value(3 << 20, '\0');
  for (size_t i = 0; i < value.size(); ++i) value[i] = static_cast<char>(i * 131 % 251);
  ASSERT_TRUE(client->set("nccl/unique_id", value).is_ok());
  auto got = client->get("nccl/unique_id", 1s);
  ASSERT_TRUE(got.is_ok()) << got.status().message();
  EXPECT_EQ(*got, value);
}

TEST_F(StoreTest, ManyClientThreadsAgree) {
  constexpr int kRanks = 8;
  constexpr int kAddsPerRank = 50;
  // One client shared by several threads must also be safe. Its requests are serialised, so the
  // blocking calls (wait, get) go through each rank's own connection.
  auto shared = connect();
  ASSERT_NE(shared, nullptr);
  std::vector<std::string> all_keys;
  for (int rank = 0; rank < kRanks; ++rank) all_keys.push_back(fmt::format("addr/{}", rank));

  std::vector<std::future<std::string>> results;
  for (int rank = 0; rank < kRanks; ++rank) {
    results.push_back(std::async(std::launch::async, [&, rank]() -> std::string {
      auto own = StoreClient::connect("127.0.0.1", server_->port(), kToken, 5s);
      if (!own.is_ok()) return own.status().message();
      Store& store = (rank % 2 == 0) ? static_cast<Store&>(**own) : *shared;
      for (int i = 0; i < kAddsPerRank; ++i) {
        if (!store.add("counter", 1).is_ok()) return "add failed";
      }
      if (!store.set(all_keys[rank], fmt::format("host{}", rank)).is_ok()) return "set failed";
      if (Status waited = (*own)->wait(all_keys, 10s); !waited.is_ok()) return waited.message();
      // Every rank sees every other rank's value.
      for (int peer = 0; peer < kRanks; ++peer) {
        auto value = (*own)->get(all_keys[peer], 1s);
        if (!value.is_ok() || *value != fmt::format("host{}", peer)) return "wrong peer value";
      }
      return "";
    }));
  }
  for (auto& result : results) EXPECT_EQ(result.get(), "");
  auto total = shared->add("counter", 0);
  ASSERT_TRUE(total.is_ok());
  EXPECT_EQ(*total, kRanks * kAddsPerRank);
}

TEST_F(StoreTest, BlockingGetIsReleasedByALaterSet) {
  auto waiter = connect();
  auto setter = connect();
  ASSERT_NE(waiter, nullptr);
  ASSERT_NE(setter, nullptr);
  const auto start = std::chrono::steady_clock::now();
  auto pending = std::async(std::launch::async, [&] { return waiter->get("late", 10s); });
  std::this_thread::sleep_for(200ms);
  ASSERT_EQ(pending.wait_for(0s), std::future_status::timeout) << "get returned before the set";
  ASSERT_TRUE(setter->set("late", "arrived").is_ok());
  auto value = pending.get();
  ASSERT_TRUE(value.is_ok()) << value.status().message();
  EXPECT_EQ(*value, "arrived");
  EXPECT_LT(elapsed_since(start), 5s);
}

TEST_F(StoreTest, BlockingWaitIsReleasedByAdd) {
  auto waiter = connect();
  auto setter = connect();
  ASSERT_NE(waiter, nullptr);
  ASSERT_NE(setter, nullptr);
  auto pending = std::async(std::launch::async, [&] { return waiter->wait({"a", "b"}, 10s); });
  ASSERT_TRUE(setter->set("a", "1").is_ok());
  std::this_thread::sleep_for(100ms);
  ASSERT_EQ(pending.wait_for(0s), std::future_status::timeout);
  ASSERT_TRUE(setter->add("b", 1).is_ok());
  EXPECT_TRUE(pending.get().is_ok());
}

TEST_F(StoreTest, GetTimeoutNamesTheKey) {
  auto client = connect();
  ASSERT_NE(client, nullptr);
  const auto start = std::chrono::steady_clock::now();
  auto value = client->get("nccl/unique_id/7", 300ms);
  ASSERT_FALSE(value.is_ok());
  EXPECT_EQ(value.status().code(), StatusCode::kTimeout);
  EXPECT_TRUE(contains(value.status().message(), "'nccl/unique_id/7'")) << value.status().message();
  EXPECT_GE(elapsed_since(start), 290ms);
  EXPECT_LT(elapsed_since(start), 5s);
  EXPECT_TRUE(client->set("k", "v").is_ok()) << "a timeout must not break the connection";
}

TEST_F(StoreTest, WaitTimeoutNamesOnlyTheMissingKeys) {
  auto client = connect();
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->set("rank/0", "up").is_ok());
  Status waited = client->wait({"rank/0", "rank/1", "rank/2"}, 200ms);
  ASSERT_FALSE(waited.is_ok());
  EXPECT_EQ(waited.code(), StatusCode::kTimeout);
  EXPECT_TRUE(contains(waited.message(), "'rank/1'")) << waited.message();
  EXPECT_TRUE(contains(waited.message(), "'rank/2'")) << waited.message();
  EXPECT_FALSE(contains(waited.message(), "'rank/0'")) << waited.message();
}

TEST_F(StoreTest, WrongTokenIsRejectedClearly) {
  auto intruder = connect("not-the-run-token");
  ASSERT_NE(intruder, nullptr);
  Status status = intruder->set("k", "v");
  ASSERT_FALSE(status.is_ok());
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(status.message(), "rejected this client")) << status.message();
  EXPECT_TRUE(contains(status.message(), "wrong token")) << status.message();
  EXPECT_TRUE(contains(status.message(), "PARTRAIN_TOKEN")) << status.message();
  EXPECT_FALSE(intruder->get("k", 10ms).is_ok());
  expect_server_still_serves();
  auto client = connect();
  ASSERT_NE(client, nullptr);
  EXPECT_FALSE(*client->check({"k"})) << "the rejected SET must not have been applied";
}

TEST_F(StoreTest, OversizedFrameIsRejectedAndDisconnected) {
  RawConnection raw(server_->port());
  ASSERT_TRUE(raw.connected());
  // A valid header and token claiming a 4 GiB payload, and no payload at all.
  Request set;
  set.op = Op::kSet;
  auto frame = encode_request(set, kToken);
  frame.resize(kFrameHeaderBytes + sizeof(kToken) - 1);
  for (size_t i = 0; i < 4; ++i) frame[10 + i] = 0xFF;
  raw.send(frame);
  bool closed = false;
  auto reply_bytes = raw.read_until_closed(&closed);
  EXPECT_TRUE(closed) << "the server should hang up on an oversized frame";
  auto reply = decode_reply_frame(reply_bytes, Op::kSet, StoreLimits{});
  ASSERT_TRUE(reply.is_ok()) << reply.status().message();
  EXPECT_EQ(reply->code, ReplyCode::kRejected);
  EXPECT_TRUE(contains(reply->message, "larger than the limit")) << reply->message;
  expect_server_still_serves();
}

TEST_F(StoreTest, ForeignProtocolIsRejectedAndDisconnected) {
  RawConnection raw(server_->port());
  ASSERT_TRUE(raw.connected());
  const std::string http = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  raw.send(std::vector<uint8_t>(http.begin(), http.end()));
  bool closed = false;
  auto reply_bytes = raw.read_until_closed(&closed);
  EXPECT_TRUE(closed);
  ASSERT_GE(reply_bytes.size(), kFrameHeaderBytes);
  auto header = decode_frame_header(reply_bytes, max_reply_payload_bytes(StoreLimits{}));
  ASSERT_TRUE(header.is_ok()) << header.status().message();
  auto reply = decode_reply_payload(static_cast<Op>(header->op),
                                    std::span(reply_bytes).subspan(kFrameHeaderBytes),
                                    StoreLimits{});
  ASSERT_TRUE(reply.is_ok()) << reply.status().message();
  EXPECT_EQ(reply->code, ReplyCode::kRejected);
  EXPECT_TRUE(contains(reply->message, "bad magic")) << reply->message;
  expect_server_still_serves();
}

TEST_F(StoreTest, ClientChecksLimitsBeforeSending) {
  StoreLimits small;
  small.max_key_bytes = 8;
  auto client = StoreClient::connect("127.0.0.1", server_->port(), kToken, 5s, small);
  ASSERT_TRUE(client.is_ok());
  Status status = (*client)->set("a-key-longer-than-eight", "v");
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE((*client)->set("short", "v").is_ok());
}

TEST_F(StoreTest, PortInUseIsUnavailableAndNamesThePort) {
  auto second = StoreServer::start("127.0.0.1", server_->port(), kToken);
  ASSERT_FALSE(second.is_ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(contains(second.status().message(), fmt::format("port {}", server_->port())))
      << second.status().message();
  EXPECT_TRUE(contains(second.status().message(), "--master-port")) << second.status().message();
}

TEST_F(StoreTest, DestructorReturnsPromptlyWithAClientBlockedInGet) {
  auto client = connect();
  ASSERT_NE(client, nullptr);
  auto pending = std::async(std::launch::async, [&] { return client->get("never", 60s); });
  std::this_thread::sleep_for(200ms);
  const auto start = std::chrono::steady_clock::now();
  server_.reset();
  EXPECT_LT(elapsed_since(start), 2s);
  ASSERT_EQ(pending.wait_for(5s), std::future_status::ready) << "the blocked get was not released";
  EXPECT_FALSE(pending.get().is_ok());
}

TEST_F(StoreTest, PingBracketsTheServerClock) {
  auto client = connect();
  ASSERT_NE(client, nullptr);
  for (int i = 0; i < 5; ++i) {
    auto sample = client->ping();
    ASSERT_TRUE(sample.is_ok()) << sample.status().message();
    EXPECT_LE(sample->send_ns, sample->recv_ns);
    // Same host, same monotonic clock: the server's reading lies inside the round trip.
    EXPECT_LE(sample->send_ns, sample->server_ns);
    EXPECT_LE(sample->server_ns, sample->recv_ns);
  }
}

TEST_F(StoreTest, LocalAddressAndHostnames) {
  auto client = StoreClient::connect("localhost", server_->port(), kToken, 5s);
  ASSERT_TRUE(client.is_ok()) << client.status().message();
  auto by_ip = connect();
  ASSERT_NE(by_ip, nullptr);
  EXPECT_EQ(by_ip->local_address(), "127.0.0.1");
  EXPECT_TRUE((*client)->set("via-name", "1").is_ok());
}

TEST(StoreConnect, TimesOutNamingHostAndPort) {
  const uint16_t port = free_port();
  const auto start = std::chrono::steady_clock::now();
  auto client = StoreClient::connect("127.0.0.1", port, kToken, 400ms);
  ASSERT_FALSE(client.is_ok());
  EXPECT_EQ(client.status().code(), StatusCode::kTimeout);
  EXPECT_TRUE(contains(client.status().message(), fmt::format("127.0.0.1:{}", port)))
      << client.status().message();
  EXPECT_GE(elapsed_since(start), 390ms);
  EXPECT_LT(elapsed_since(start), 5s);
}

TEST(StoreConnect, RetriesUntilTheServerComesUp) {
  const uint16_t port = free_port();
  auto pending = std::async(std::launch::async,
                            [&] { return StoreClient::connect("127.0.0.1", port, kToken, 10s); });
  std::this_thread::sleep_for(300ms);
  auto server = StoreServer::start("127.0.0.1", port, kToken);
  ASSERT_TRUE(server.is_ok()) << server.status().message();
  auto client = pending.get();
  ASSERT_TRUE(client.is_ok()) << client.status().message();
  EXPECT_TRUE((*client)->set("k", "v").is_ok());
}

TEST(StoreConnect, UnknownHostIsNamed) {
  // Fails at once where DNS says "no such name"; after the timeout where DNS is unreachable.
  auto client = StoreClient::connect("no-such-host.invalid", 29500, kToken, 1s);
  ASSERT_FALSE(client.is_ok());
  EXPECT_TRUE(contains(client.status().message(), "no-such-host.invalid"))
      << client.status().message();
}

TEST_F(StoreTest, UnboundedTimeoutsDoNotOverflow) {
  auto client = StoreClient::connect("127.0.0.1", server_->port(), kToken, Nanoseconds::max());
  ASSERT_TRUE(client.is_ok()) << client.status().message();
  ASSERT_TRUE((*client)->set("k", "v").is_ok());
  auto value = (*client)->get("k", Nanoseconds::max());
  ASSERT_TRUE(value.is_ok()) << value.status().message();
  EXPECT_EQ(*value, "v");
  EXPECT_TRUE((*client)->wait({"k"}, Nanoseconds::max()).is_ok());
}

}  // namespace
}  // namespace partrain::rendezvous
