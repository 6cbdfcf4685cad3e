// The TCPStore query decoder: every query type round-trips, every prefix is incomplete (never
// malformed, never a different query), and lengths over the limits are refused before anything
// is allocated.
#include "runner/rendezvous/tcpstore_protocol.h"

#include <gtest/gtest.h>

namespace partrain::rendezvous::tcpstore {
namespace {

std::vector<Query> one_of_each() {
  std::vector<Query> queries;
  auto make = [&](QueryType type, std::vector<std::string> keys, std::vector<std::string> values,
                  int64_t number = 0, uint32_t word = 0) {
    queries.push_back(Query{type, std::move(keys), std::move(values), number, word});
  };
  make(QueryType::kValidate, {}, {}, 0, kValidationMagic);
  make(QueryType::kSet, {"key"}, {std::string("v\0lue", 5)});
  make(QueryType::kCompareSet, {"key"}, {"old", "new"});
  make(QueryType::kGet, {"key"}, {});
  make(QueryType::kAdd, {"n"}, {}, -42);
  make(QueryType::kCheck, {"a", "bb", ""}, {});
  make(QueryType::kWait, {"a"}, {});
  make(QueryType::kGetNumKeys, {}, {});
  make(QueryType::kDeleteKey, {"key"}, {});
  make(QueryType::kAppend, {"key"}, {"more"});
  make(QueryType::kMultiGet, {"x", "y"}, {});
  make(QueryType::kMultiSet, {"x", "y"}, {"1", "22"});
  make(QueryType::kCancelWait, {}, {});
  make(QueryType::kPing, {}, {}, 0, 0xDEADBEEF);
  make(QueryType::kQueuePush, {"q"}, {"item"});
  make(QueryType::kQueuePop, {"q"}, {});
  make(QueryType::kQueueLen, {"q"}, {});
  make(QueryType::kListKeys, {}, {});
  make(QueryType::kBarrier, {"b"}, {}, 4);
  return queries;
}

TEST(TcpStoreProtocol, EveryQueryTypeRoundTrips) {
  const std::vector<Query> queries = one_of_each();
  ASSERT_EQ(queries.size(), size_t{kLastQueryType} + 1) << "a query type without a case";
  for (const Query& query : queries) {
    std::vector<uint8_t> bytes = encode_query(query);
    bytes.push_back(0x0D);  // the start of the next query stays unread
    DecodeResult result = decode_query(bytes, Limits{});
    auto* decoded = std::get_if<Decoded>(&result);
    ASSERT_NE(decoded, nullptr) << query_name(query.type);
    EXPECT_EQ(decoded->consumed, bytes.size() - 1) << query_name(query.type);
    EXPECT_EQ(decoded->query.type, query.type);
    EXPECT_EQ(decoded->query.keys, query.keys) << query_name(query.type);
    EXPECT_EQ(decoded->query.values, query.values) << query_name(query.type);
    EXPECT_EQ(decoded->query.number, query.number) << query_name(query.type);
    EXPECT_EQ(decoded->query.word, query.word) << query_name(query.type);
  }
}

TEST(TcpStoreProtocol, EveryPrefixIsIncompleteAndSaysWhatItNeeds) {
  for (const Query& query : one_of_each()) {
    const std::vector<uint8_t> bytes = encode_query(query);
    for (size_t n = 0; n < bytes.size(); ++n) {
      DecodeResult result = decode_query(std::span(bytes).first(n), Limits{});
      auto* incomplete = std::get_if<Incomplete>(&result);
      ASSERT_NE(incomplete, nullptr) << query_name(query.type) << " prefix " << n;
      EXPECT_GT(incomplete->needed, n);
      EXPECT_LE(incomplete->needed, bytes.size());
    }
  }
}

// The layout torch's client writes (TCPStore.cpp, SendBuffer): type, u64 length, bytes.
TEST(TcpStoreProtocol, WireLayoutIsTorchs) {
  Query set;
  set.type = QueryType::kSet;
  set.keys = {"ab"};
  set.values = {"xyz"};
  const std::vector<uint8_t> expected = {1, 2, 0, 0, 0, 0, 0, 0, 0, 'a', 'b',
                                         3, 0, 0, 0, 0, 0, 0, 0, 'x', 'y', 'z'};
  EXPECT_EQ(encode_query(set), expected);
  Query validate;
  validate.type = QueryType::kValidate;
  validate.word = kValidationMagic;
  EXPECT_EQ(encode_query(validate), (std::vector<uint8_t>{0, 0xCE, 0xF7, 0x85, 0x3C}));
}

TEST(TcpStoreProtocol, HugeLengthsAndCountsAreRefusedBeforeAllocating) {
  auto malformed = [](std::vector<uint8_t> bytes) {
    DecodeResult result = decode_query(bytes, Limits{});
    auto* bad = std::get_if<Malformed>(&result);
    return bad == nullptr ? std::string() : bad->reason;
  };
  // GET with a key length of 2^64 - 1.
  EXPECT_NE(malformed({3, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}).find("a key of"),
            std::string::npos);
  // SET with a 1 GiB value.
  std::vector<uint8_t> set = {1, 1, 0, 0, 0, 0, 0, 0, 0, 'k', 0, 0, 0, 0x40, 0, 0, 0, 0};
  EXPECT_NE(malformed(set).find("a value of"), std::string::npos);
  // CHECK of 2^40 keys.
  EXPECT_NE(malformed({5, 0, 0, 0, 0, 0, 1, 0, 0}).find("keys in one query"), std::string::npos);
  // An unknown query type.
  EXPECT_NE(malformed({200}).find("unknown TCPStore query type 200"), std::string::npos);
}

TEST(TcpStoreProtocol, AQueryAsAWholeIsBounded) {
  Limits small;
  small.max_query_bytes = 1000;
  Query multi;
  multi.type = QueryType::kMultiSet;
  for (int i = 0; i < 20; ++i) {
    multi.keys.push_back("key" + std::to_string(i));
    multi.values.push_back(std::string(100, 'v'));
  }
  const std::vector<uint8_t> bytes = encode_query(multi);
  DecodeResult whole = decode_query(bytes, small);
  EXPECT_TRUE(std::holds_alternative<Malformed>(whole));
  DecodeResult prefix = decode_query(std::span(bytes).first(1200), small);
  EXPECT_TRUE(std::holds_alternative<Malformed>(prefix));
}

}  // namespace
}  // namespace partrain::rendezvous::tcpstore
