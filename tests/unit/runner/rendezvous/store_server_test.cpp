// The store as a server facing a network: timeouts for peers that say nothing or stop halfway,
// the connection limit (silent peers shed first, others refused), the descriptor limit (no
// spinning, clients still served), and bounded memory.
#include "runner/rendezvous/store_server.h"

#include <sys/resource.h>
#include <sys/wait.h>

#include <gtest/gtest.h>

#include <memory>
#include <thread>

#include "runner/rendezvous/store_client.h"
#include "tests/unit/runner/rendezvous/raw_peer.h"

namespace partrain::rendezvous {
namespace {

using namespace std::chrono_literals;
using testing::RawPeer;

constexpr char kToken[] = "server-test-token";

std::unique_ptr<StoreServer> start(StoreServerOptions options) {
  auto server = StoreServer::start("127.0.0.1", 0, kToken, options);
  EXPECT_TRUE(server.is_ok()) << server.status().message();
  return server.is_ok() ? std::move(*server) : nullptr;
}

// A client that connects, sets, gets and checks a value: the server still serves.
::testing::AssertionResult serves(uint16_t port, Nanoseconds timeout = 5s) {
  auto client = StoreClient::connect("127.0.0.1", port, kToken, timeout);
  if (!client.is_ok()) return ::testing::AssertionFailure() << client.status().message();
  if (Status s = (*client)->set("alive", "yes"); !s.is_ok()) {
    return ::testing::AssertionFailure() << s.message();
  }
  auto value = (*client)->get("alive", 1s);
  if (!value.is_ok()) return ::testing::AssertionFailure() << value.status().message();
  return ::testing::AssertionSuccess();
}

double cpu_seconds_of_this_process() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

TEST(StoreServer, APeerThatSaysNothingIsClosedAfterTheHandshakeTimeout) {
  StoreServerOptions options;
  options.handshake_timeout = 300ms;
  auto server = start(options);
  RawPeer silent(server->port());
  ASSERT_TRUE(silent.connected());
  const auto begin = std::chrono::steady_clock::now();
  EXPECT_TRUE(silent.closed_within(3s));
  EXPECT_GE(std::chrono::steady_clock::now() - begin, 250ms);
  EXPECT_EQ(server->stats().timed_out, 1u);
  EXPECT_TRUE(serves(server->port()));
}

TEST(StoreServer, AClientIdleAfterItsHandshakeIsKept) {
  StoreServerOptions options;
  options.handshake_timeout = 200ms;
  options.request_timeout = 200ms;
  auto server = start(options);
  auto client = StoreClient::connect("127.0.0.1", server->port(), kToken, 5s);
  ASSERT_TRUE(client.is_ok());
  ASSERT_TRUE((*client)->set("k", "v").is_ok());
  std::this_thread::sleep_for(700ms);  // a rank between two uses of the store
  auto value = (*client)->get("k", 1s);
  ASSERT_TRUE(value.is_ok()) << value.status().message();
  EXPECT_EQ(*value, "v");
}

TEST(StoreServer, ARequestBegunAndNotFinishedIsClosed) {
  StoreServerOptions options;
  options.request_timeout = 300ms;
  auto server = start(options);
  // A valid first frame, then half of a second one.
  RawPeer peer(server->port());
  Request ping;
  ping.op = Op::kPing;
  ASSERT_TRUE(peer.send(encode_request(ping, kToken)));
  ASSERT_TRUE(peer.read(kFrameHeaderBytes + 9).has_value());
  std::vector<uint8_t> half = encode_request(ping, kToken);
  half.resize(half.size() / 2);
  ASSERT_TRUE(peer.send(half));
  EXPECT_TRUE(peer.closed_within(3s));
  EXPECT_GE(server->stats().timed_out, 1u);
}

TEST(StoreServer, APeerThatReadsNoRepliesIsDropped) {
  StoreServerOptions options;
  options.write_timeout = 300ms;
  auto server = start(options);
  auto writer = StoreClient::connect("127.0.0.1", server->port(), kToken, 5s);
  ASSERT_TRUE(writer.is_ok());
  ASSERT_TRUE((*writer)->set("big", std::string(8 << 20, 'x')).is_ok());
  RawPeer reader(server->port());
  int buffer = 4096;
  setsockopt(reader.fd(), SOL_SOCKET, SO_RCVBUF, &buffer, sizeof(buffer));
  Request get;
  get.op = Op::kGet;
  get.key = "big";
  get.timeout_ms = 1000;
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(reader.send(encode_request(get, kToken)));
  std::this_thread::sleep_for(1500ms);  // reads nothing
  EXPECT_GE(server->stats().timed_out, 1u);
  EXPECT_TRUE(serves(server->port()));
}

// At the connection limit a new peer gets the place of the oldest that has not said a valid
// word; when every connection has, the newcomer is refused. Either way the loop goes on.
TEST(StoreServer, AtTheConnectionLimitSilentPeersGoFirst) {
  StoreServerOptions options;
  options.max_connections = 8;
  auto server = start(options);
  std::vector<std::unique_ptr<RawPeer>> silent;
  for (int i = 0; i < 20; ++i) silent.push_back(std::make_unique<RawPeer>(server->port()));
  EXPECT_TRUE(serves(server->port()));
  EXPECT_GE(server->stats().shed, 12u);
  EXPECT_LE(server->stats().open_connections, 8u);

  std::vector<std::unique_ptr<StoreClient>> clients;
  for (int i = 0; i < 8; ++i) {
    auto client = StoreClient::connect("127.0.0.1", server->port(), kToken, 5s);
    ASSERT_TRUE(client.is_ok());
    ASSERT_TRUE((*client)->set("k" + std::to_string(i), "v").is_ok()) << i;
    clients.push_back(std::move(*client));
  }
  RawPeer refused(server->port());
  EXPECT_TRUE(refused.closed_within(2s));
  EXPECT_GE(server->stats().refused, 1u);
  clients.pop_back();  // room again
  std::this_thread::sleep_for(100ms);
  EXPECT_TRUE(serves(server->port()));
}

// Out of descriptors (RLIMIT_NOFILE in a child process): the loop neither spins on accept nor
// stops serving. The old accept loop spun at ~100% of a core here.
TEST(StoreServer, OutOfDescriptorsItNeitherSpinsNorLocksClientsOut) {
  int to_child[2];
  int from_child[2];
  ASSERT_EQ(::pipe(to_child), 0);
  ASSERT_EQ(::pipe(from_child), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(to_child[1]);
    ::close(from_child[0]);
    rlimit limit{64, 64};
    ::setrlimit(RLIMIT_NOFILE, &limit);
    StoreServerOptions options;
    options.max_connections = 1000;  // more than the descriptors: accept() meets EMFILE
    options.handshake_timeout = 60s;
    auto server = StoreServer::start("127.0.0.1", 0, kToken, options);
    if (!server.is_ok()) ::_exit(10);
    const uint16_t port = (*server)->port();
    (void)::write(from_child[1], &port, sizeof(port));
    char go = 0;
    (void)::read(to_child[0], &go, 1);  // the parent has made its 200 connections
    const double cpu_before = cpu_seconds_of_this_process();
    std::this_thread::sleep_for(2s);
    const double cpu = cpu_seconds_of_this_process() - cpu_before;
    (void)::write(from_child[1], &cpu, sizeof(cpu));
    (void)::read(to_child[0], &go, 1);  // the parent checked a client is served
    ::_exit(0);
  }
  ::close(to_child[0]);
  ::close(from_child[1]);
  uint16_t port = 0;
  ASSERT_EQ(::read(from_child[0], &port, sizeof(port)), static_cast<ssize_t>(sizeof(port)));
  std::vector<std::unique_ptr<RawPeer>> silent;
  for (int i = 0; i < 200; ++i) silent.push_back(std::make_unique<RawPeer>(port));
  const char go = 1;
  ASSERT_EQ(::write(to_child[1], &go, 1), 1);
  double cpu = -1;
  ASSERT_EQ(::read(from_child[0], &cpu, sizeof(cpu)), static_cast<ssize_t>(sizeof(cpu)));
  // A client gets in although 200 idle peers wanted the child's 64 descriptors.
  EXPECT_TRUE(serves(port));
  ASSERT_EQ(::write(to_child[1], &go, 1), 1);
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  // 2 s of wall time with 200 peers knocking: a spinning loop burns ~2 s of CPU.
  EXPECT_LT(cpu, 0.3) << "CPU seconds the store used in 2 s";
}

TEST(StoreServer, StoredBytesStayWithinTheBudget) {
  StoreServerOptions options;
  options.max_stored_bytes = 4 << 20;
  auto server = start(options);
  auto client = StoreClient::connect("127.0.0.1", server->port(), kToken, 5s);
  ASSERT_TRUE(client.is_ok());
  Status last;
  int stored = 0;
  for (int i = 0; i < 8 && last.is_ok(); ++i) {
    last = (*client)->set("big" + std::to_string(i), std::string(1 << 20, 'x'));
    if (last.is_ok()) ++stored;
  }
  ASSERT_FALSE(last.is_ok());
  EXPECT_NE(last.message().find("the rendezvous store is full"), std::string::npos)
      << last.message();
  EXPECT_EQ(stored, 3);
  std::this_thread::sleep_for(50ms);
  EXPECT_LE(server->stats().stored_bytes, 4u << 20);
  EXPECT_TRUE((*client)->set("small", "ok").is_ok()) << "the connection goes on";
}

// GET / WAIT park their connection, not the loop: a thousand of them, then one SET frees all.
TEST(StoreServer, AThousandParkedGetsAreReleasedByOneSet) {
  auto server = start({});
  std::vector<std::unique_ptr<RawPeer>> waiting;
  Request get;
  get.op = Op::kGet;
  get.key = "go";
  get.timeout_ms = 20'000;
  for (int i = 0; i < 1000; ++i) {
    waiting.push_back(std::make_unique<RawPeer>(server->port()));
    ASSERT_TRUE(waiting.back()->send(encode_request(get, kToken)));
  }
  EXPECT_TRUE(serves(server->port())) << "the loop is not held by the parked GETs";
  auto setter = StoreClient::connect("127.0.0.1", server->port(), kToken, 5s);
  ASSERT_TRUE(setter.is_ok());
  ASSERT_TRUE((*setter)->set("go", "now").is_ok());
  for (auto& peer : waiting) {
    auto header = peer->read(kFrameHeaderBytes);
    ASSERT_TRUE(header.has_value());
    auto decoded = decode_frame_header(*header, max_reply_payload_bytes(StoreLimits{}));
    ASSERT_TRUE(decoded.is_ok());
    auto payload = peer->read(decoded->payload_bytes);
    ASSERT_TRUE(payload.has_value());
    auto reply = decode_reply_payload(Op::kGet, *payload, StoreLimits{});
    ASSERT_TRUE(reply.is_ok());
    EXPECT_EQ(reply->value, "now");
  }
}

// The launchers wait in slices of 250 ms: each slice's timeout reply comes on time, again and
// again, on one connection.
TEST(StoreServer, RepeatedShortWaitsEachTimeOutOnTime) {
  auto server = start({});
  auto client = StoreClient::connect("127.0.0.1", server->port(), kToken, 1s);
  ASSERT_TRUE(client.is_ok());
  ASSERT_TRUE((*client)->set("here", "1").is_ok());
  for (int i = 0; i < 12; ++i) {
    const auto begin = std::chrono::steady_clock::now();
    Status waited = (*client)->wait({"here", "absent"}, 250ms);
    const auto took = std::chrono::steady_clock::now() - begin;
    ASSERT_EQ(waited.code(), StatusCode::kTimeout) << i << ": " << waited.message();
    EXPECT_GE(took, 240ms) << i;
    EXPECT_LT(took, 1000ms) << i;
  }
  EXPECT_TRUE((*client)->set("absent", "now").is_ok());
}

TEST(StoreServer, RandomBytesAreDroppedAndTheServerGoesOn) {
  auto server = start({});
  uint32_t seed = 12345;
  for (int round = 0; round < 50; ++round) {
    RawPeer peer(server->port());
    std::vector<uint8_t> junk(1 + round * 37);
    for (uint8_t& byte : junk) {
      seed = seed * 1664525 + 1013904223;
      byte = static_cast<uint8_t>(seed >> 24);
    }
    ASSERT_TRUE(peer.send(junk));
    (void)peer.closed_within(200ms);
  }
  EXPECT_TRUE(serves(server->port()));
}

}  // namespace
}  // namespace partrain::rendezvous
