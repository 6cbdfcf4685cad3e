// The store serving PyTorch's TCPStore protocol, byte for byte as torch's client sends it: every
// query, waits released by other connections, its own key space, and hostile bytes.
#include "runner/rendezvous/tcpstore_session.h"

#include <gtest/gtest.h>

#include "runner/rendezvous/store_client.h"
#include "runner/rendezvous/store_server.h"
#include "tests/unit/runner/rendezvous/raw_peer.h"

namespace partrain::rendezvous {
namespace {

using namespace std::chrono_literals;
using tcpstore::Query;
using tcpstore::QueryType;
using testing::RawPeer;

constexpr char kToken[] = "tcpstore-test-token";

// A TCPStore client over a raw connection, validated.
class TorchPeer {
 public:
  explicit TorchPeer(uint16_t port) : peer_(port) {
    const Query validate{QueryType::kValidate, {}, {}, 0, tcpstore::kValidationMagic};
    EXPECT_TRUE(peer_.send(tcpstore::encode_query(validate)));
  }
  RawPeer& raw() { return peer_; }

  void send(QueryType type, std::vector<std::string> keys = {},
            std::vector<std::string> values = {}, int64_t number = 0, uint32_t word = 0) {
    ASSERT_TRUE(peer_.send(
        tcpstore::encode_query(Query{type, std::move(keys), std::move(values), number, word})));
  }
  int64_t read_i64() {
    auto bytes = peer_.read(8);
    EXPECT_TRUE(bytes.has_value());
    if (!bytes) return -1;
    uint64_t value = 0;
    for (int i = 0; i < 8; ++i) value |= uint64_t{(*bytes)[i]} << (8 * i);
    return static_cast<int64_t>(value);
  }
  uint8_t read_u8() {
    auto bytes = peer_.read(1);
    EXPECT_TRUE(bytes.has_value());
    return bytes ? (*bytes)[0] : 0xFF;
  }
  std::string read_bytes() {
    const int64_t length = read_i64();
    if (length <= 0) return "";
    auto bytes = peer_.read(static_cast<size_t>(length));
    EXPECT_TRUE(bytes.has_value());
    return bytes ? std::string(bytes->begin(), bytes->end()) : "";
  }

 private:
  RawPeer peer_;
};

class TcpStoreSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = StoreServer::start("127.0.0.1", 0, kToken);
    ASSERT_TRUE(server.is_ok()) << server.status().message();
    server_ = std::move(*server);
  }
  std::unique_ptr<StoreServer> server_;
};

TEST_F(TcpStoreSessionTest, EveryQueryIsAnsweredAsTorchsServerAnswers) {
  TorchPeer torch(server_->port());
  torch.send(QueryType::kPing, {}, {}, 0, 0xABCD1234);
  auto nonce = torch.raw().read(4);
  ASSERT_TRUE(nonce.has_value());
  EXPECT_EQ(*nonce, (std::vector<uint8_t>{0x34, 0x12, 0xCD, 0xAB}));

  torch.send(QueryType::kSet, {"key"}, {"value"});
  torch.send(QueryType::kGet, {"key"});
  EXPECT_EQ(torch.read_bytes(), "value");
  torch.send(QueryType::kGet, {"absent"});
  EXPECT_EQ(torch.read_bytes(), "");

  torch.send(QueryType::kAdd, {"n"}, {}, 5);
  EXPECT_EQ(torch.read_i64(), 5);
  torch.send(QueryType::kAdd, {"n"}, {}, -7);
  EXPECT_EQ(torch.read_i64(), -2);

  torch.send(QueryType::kCheck, {"key", "n"});
  EXPECT_EQ(torch.read_u8(), 0) << "READY";
  torch.send(QueryType::kCheck, {"key", "absent"});
  EXPECT_EQ(torch.read_u8(), 1) << "NOT_READY";

  torch.send(QueryType::kCompareSet, {"key"}, {"value", "swapped"});
  EXPECT_EQ(torch.read_bytes(), "swapped");
  torch.send(QueryType::kCompareSet, {"key"}, {"wrong", "ignored"});
  EXPECT_EQ(torch.read_bytes(), "swapped");

  torch.send(QueryType::kAppend, {"log"}, {"ab"});
  torch.send(QueryType::kAppend, {"log"}, {"cd"});
  torch.send(QueryType::kMultiSet, {"m1", "m2"}, {"one", "two"});
  torch.send(QueryType::kMultiGet, {"m1", "log", "m2"});
  EXPECT_EQ(torch.read_bytes(), "one");
  EXPECT_EQ(torch.read_bytes(), "abcd");
  EXPECT_EQ(torch.read_bytes(), "two");

  torch.send(QueryType::kGetNumKeys);
  EXPECT_EQ(torch.read_i64(), 5);  // key, n, log, m1, m2
  torch.send(QueryType::kListKeys);
  ASSERT_EQ(torch.read_i64(), 5);
  std::set<std::string> names;
  for (int i = 0; i < 5; ++i) names.insert(torch.read_bytes());
  EXPECT_EQ(names, (std::set<std::string>{"key", "n", "log", "m1", "m2"}));
  torch.send(QueryType::kDeleteKey, {"m1"});
  EXPECT_EQ(torch.read_i64(), 1);
  torch.send(QueryType::kDeleteKey, {"m1"});
  EXPECT_EQ(torch.read_i64(), 0);

  torch.send(QueryType::kQueuePush, {"q"}, {"first"});
  torch.send(QueryType::kQueuePush, {"q"}, {"second"});
  torch.send(QueryType::kQueueLen, {"q"});
  EXPECT_EQ(torch.read_i64(), 2);
  torch.send(QueryType::kQueuePop, {"q"});
  EXPECT_EQ(torch.read_i64(), 2);
  EXPECT_EQ(torch.read_bytes(), "first");

  torch.send(QueryType::kWait, {"key"});
  EXPECT_EQ(torch.read_u8(), 0) << "STOP_WAITING at once: the key is set";
}

TEST_F(TcpStoreSessionTest, AWaitIsReleasedByAnotherConnectionOrCancelled) {
  TorchPeer waiter(server_->port());
  TorchPeer setter(server_->port());
  waiter.send(QueryType::kWait, {"a", "b"});
  EXPECT_TRUE(waiter.raw().silent_for(200ms));
  setter.send(QueryType::kSet, {"a"}, {"1"});
  EXPECT_TRUE(waiter.raw().silent_for(100ms)) << "one of two keys";
  // The waiting connection is still served meanwhile.
  waiter.send(QueryType::kPing, {}, {}, 0, 7);
  ASSERT_TRUE(waiter.raw().read(4).has_value());
  setter.send(QueryType::kAdd, {"b"}, {}, 1);
  EXPECT_EQ(setter.read_i64(), 1);
  EXPECT_EQ(waiter.read_u8(), 0) << "STOP_WAITING";

  waiter.send(QueryType::kWait, {"never"});
  EXPECT_TRUE(waiter.raw().silent_for(100ms));
  waiter.send(QueryType::kCancelWait);
  EXPECT_EQ(waiter.read_u8(), 1) << "WAIT_CANCELED";
  setter.send(QueryType::kSet, {"never"}, {"late"});
  EXPECT_TRUE(waiter.raw().silent_for(200ms)) << "a cancelled wait is not answered";
}

TEST_F(TcpStoreSessionTest, BarrierReleasesAllArrivals) {
  std::vector<std::unique_ptr<TorchPeer>> ranks;
  for (int i = 0; i < 3; ++i) ranks.push_back(std::make_unique<TorchPeer>(server_->port()));
  ranks[0]->send(QueryType::kBarrier, {"b"}, {}, 3);
  ranks[1]->send(QueryType::kBarrier, {"b"}, {}, 3);
  EXPECT_TRUE(ranks[0]->raw().silent_for(200ms));
  ranks[2]->send(QueryType::kBarrier, {"b"}, {}, 3);
  for (auto& rank : ranks) EXPECT_EQ(rank->read_u8(), 0);
}

TEST_F(TcpStoreSessionTest, TorchAndPartrainKeysAreSeparate) {
  auto partrain = StoreClient::connect("127.0.0.1", server_->port(), kToken, 5s);
  ASSERT_TRUE(partrain.is_ok());
  ASSERT_TRUE((*partrain)->set("shared-name", "partrain's").is_ok());
  TorchPeer torch(server_->port());
  torch.send(QueryType::kCheck, {"shared-name"});
  EXPECT_EQ(torch.read_u8(), 1) << "partrain's key is not visible to TCPStore clients";
  torch.send(QueryType::kSet, {"shared-name"}, {"torch's"});
  torch.send(QueryType::kGet, {"shared-name"});
  EXPECT_EQ(torch.read_bytes(), "torch's");
  auto value = (*partrain)->get("shared-name", 1s);
  ASSERT_TRUE(value.is_ok());
  EXPECT_EQ(*value, "partrain's");
}

TEST_F(TcpStoreSessionTest, ProtocolViolationsCloseOnlyThatConnection) {
  TorchPeer good(server_->port());
  {
    RawPeer wrong_magic(server_->port());
    ASSERT_TRUE(wrong_magic.send(std::vector<uint8_t>{0, 1, 2, 3, 4}));
    EXPECT_TRUE(wrong_magic.closed_within(2s));
  }
  {
    RawPeer no_validate(server_->port());
    ASSERT_TRUE(no_validate.send(std::vector<uint8_t>{0x0D, 1, 0, 0, 0}));
    // Starts with PING, not VALIDATE: taken for partrain's protocol and rejected.
    EXPECT_TRUE(no_validate.closed_within(2s));
  }
  {
    TorchPeer huge(server_->port());
    // GET with a key length of 2^63.
    ASSERT_TRUE(huge.raw().send(std::vector<uint8_t>{3, 0, 0, 0, 0, 0, 0, 0, 0x80}));
    EXPECT_TRUE(huge.raw().closed_within(2s));
  }
  {
    TorchPeer unknown(server_->port());
    ASSERT_TRUE(unknown.raw().send(std::vector<uint8_t>{99}));
    EXPECT_TRUE(unknown.raw().closed_within(2s));
  }
  good.send(QueryType::kAdd, {"still"}, {}, 1);
  EXPECT_EQ(good.read_i64(), 1);
  EXPECT_GE(server_->stats().rejected, 3u);
}

TEST(TcpStoreSession, TheirKeysHaveABudgetOfTheirOwn) {
  StoreServerOptions options;
  options.max_tcpstore_stored_bytes = 2 << 20;
  auto server = StoreServer::start("127.0.0.1", 0, kToken, options);
  ASSERT_TRUE(server.is_ok());
  TorchPeer torch((*server)->port());
  Query set;
  set.type = QueryType::kSet;
  set.values = {std::string(1 << 20, 'x')};
  for (int i = 0; i < 4; ++i) {
    set.keys = {"big" + std::to_string(i)};
    if (!torch.raw().send(tcpstore::encode_query(set))) break;  // closed already
  }
  EXPECT_TRUE(torch.raw().closed_within(3s)) << "a SET that does not fit closes the connection";
  EXPECT_LE((*server)->stats().tcpstore_stored_bytes, 2u << 20);
  auto partrain = StoreClient::connect("127.0.0.1", (*server)->port(), kToken, 5s);
  ASSERT_TRUE(partrain.is_ok());
  EXPECT_TRUE((*partrain)->set("unaffected", std::string(1 << 20, 'y')).is_ok());
}

TEST(TcpStoreSession, PartrainOnlyPortsRefuseTorchClients) {
  StoreServerOptions options;
  options.serve_tcpstore = false;
  auto server = StoreServer::start("127.0.0.1", 0, kToken, options);
  ASSERT_TRUE(server.is_ok());
  TorchPeer torch((*server)->port());
  EXPECT_TRUE(torch.raw().closed_within(2s));
}

}  // namespace
}  // namespace partrain::rendezvous
