// The rendezvous wire protocol: round trips of every op, and rejection of foreign, truncated,
// wrong-token and oversized frames before anything large is allocated.
#include "runner/rendezvous/protocol.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <new>

namespace {

// Allocation probe: proves decoders reject huge length fields without allocating them. Replacing
// operator new is the only way to observe allocations from outside; the counters are
// thread-local so other threads' allocations do not count.
thread_local bool t_probe_active = false;
thread_local size_t t_largest_allocation = 0;

}  // namespace

// GCC cannot see that the replacement new below is malloc-based and warns on the matching free.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(size_t size) {
  if (t_probe_active) t_largest_allocation = std::max(t_largest_allocation, size);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop

namespace partrain::rendezvous {
namespace {

constexpr std::string_view kToken = "0123456789abcdef0123456789abcdef";

class AllocationProbe {
 public:
  AllocationProbe() {
    t_largest_allocation = 0;
    t_probe_active = true;
  }
  ~AllocationProbe() { t_probe_active = false; }
  size_t largest() const { return t_largest_allocation; }
};

void put_u32(std::vector<uint8_t>& bytes, size_t at, uint32_t v) {
  for (size_t i = 0; i < 4; ++i) bytes[at + i] = static_cast<uint8_t>(v >> (8 * i));
}

Request round_trip(const Request& request) {
  auto frame = encode_request(request, kToken);
  auto decoded = decode_request_frame(frame, kToken, StoreLimits{});
  EXPECT_TRUE(decoded.is_ok()) << decoded.status().message();
  return decoded.is_ok() ? *decoded : Request{};
}

TEST(RendezvousProtocol, HeaderIsLittleEndianWithMagicFirst) {
  Request request;
  request.op = Op::kGet;
  request.key = "k";
  request.timeout_ms = 0x01020304;
  auto frame = encode_request(request, "tok");
  ASSERT_GE(frame.size(), kFrameHeaderBytes);
  EXPECT_EQ(std::string(frame.begin(), frame.begin() + 4), "PTRZ");
  EXPECT_EQ(frame[4], kProtocolVersion & 0xff);
  EXPECT_EQ(frame[6], static_cast<uint8_t>(Op::kGet));
  EXPECT_EQ(frame[8], 3);  // token length
  const uint32_t payload = 4 + 1 + 4;
  EXPECT_EQ(frame[10], payload);
  EXPECT_EQ(frame.size(), kFrameHeaderBytes + 3 + payload);
  EXPECT_EQ(std::string(frame.begin() + kFrameHeaderBytes, frame.begin() + kFrameHeaderBytes + 3),
            "tok");
  EXPECT_EQ(frame.back(), 0x01);  // timeout's most significant byte is last
}

TEST(RendezvousProtocol, EveryRequestOpRoundTrips) {
  Request set;
  set.op = Op::kSet;
  set.key = "gloo/rank3";
  set.value = std::string("\0binary\xff", 8);
  Request decoded = round_trip(set);
  EXPECT_EQ(decoded.op, Op::kSet);
  EXPECT_EQ(decoded.key, set.key);
  EXPECT_EQ(decoded.value, set.value);

  Request get;
  get.op = Op::kGet;
  get.key = "nccl/unique_id";
  get.timeout_ms = 30'000;
  decoded = round_trip(get);
  EXPECT_EQ(decoded.key, get.key);
  EXPECT_EQ(decoded.timeout_ms, 30'000u);

  Request add;
  add.op = Op::kAdd;
  add.key = "arrivals";
  add.delta = -42;
  decoded = round_trip(add);
  EXPECT_EQ(decoded.delta, -42);

  Request wait;
  wait.op = Op::kWait;
  wait.keys = {"a", "", "ccc"};
  wait.timeout_ms = 7;
  decoded = round_trip(wait);
  EXPECT_EQ(decoded.keys, wait.keys);
  EXPECT_EQ(decoded.timeout_ms, 7u);

  Request check;
  check.op = Op::kCheck;
  check.keys = {"x", "y"};
  decoded = round_trip(check);
  EXPECT_EQ(decoded.op, Op::kCheck);
  EXPECT_EQ(decoded.keys, check.keys);

  Request ping;
  ping.op = Op::kPing;
  EXPECT_EQ(round_trip(ping).op, Op::kPing);
}

TEST(RendezvousProtocol, RepliesRoundTrip) {
  Reply get;
  get.value = "payload";
  auto decoded = decode_reply_frame(encode_reply(Op::kGet, get), Op::kGet, StoreLimits{});
  ASSERT_TRUE(decoded.is_ok()) << decoded.status().message();
  EXPECT_EQ(decoded->code, ReplyCode::kOk);
  EXPECT_EQ(decoded->value, "payload");

  Reply ping;
  ping.number = -123456789012345;
  decoded = decode_reply_frame(encode_reply(Op::kPing, ping), Op::kPing, StoreLimits{});
  ASSERT_TRUE(decoded.is_ok());
  EXPECT_EQ(decoded->number, -123456789012345);

  Reply check;
  check.all_present = true;
  decoded = decode_reply_frame(encode_reply(Op::kCheck, check), Op::kCheck, StoreLimits{});
  ASSERT_TRUE(decoded.is_ok());
  EXPECT_TRUE(decoded->all_present);

  Reply timeout;
  timeout.code = ReplyCode::kTimeout;
  timeout.message = "rendezvous key 'k' was not set within 1 s";
  decoded = decode_reply_frame(encode_reply(Op::kGet, timeout), Op::kGet, StoreLimits{});
  ASSERT_TRUE(decoded.is_ok());
  EXPECT_EQ(decoded->code, ReplyCode::kTimeout);
  EXPECT_EQ(decoded->message, timeout.message);

  // A reply for another op is not taken as this request's answer.
  EXPECT_FALSE(
      decode_reply_frame(encode_reply(Op::kSet, Reply{}), Op::kGet, StoreLimits{}).is_ok());
}

TEST(RendezvousProtocol, LongErrorMessagesAreCut) {
  Reply reply;
  reply.code = ReplyCode::kTimeout;
  reply.message = std::string(kMaxReplyMessageBytes * 2, 'k');
  auto decoded = decode_reply_frame(encode_reply(Op::kWait, reply), Op::kWait, StoreLimits{});
  ASSERT_TRUE(decoded.is_ok()) << decoded.status().message();
  EXPECT_EQ(decoded->message.size(), kMaxReplyMessageBytes);
}

TEST(RendezvousProtocol, RejectsBadMagic) {
  Request ping;
  ping.op = Op::kPing;
  auto frame = encode_request(ping, kToken);
  frame[0] = 'G';
  auto decoded = decode_request_frame(frame, kToken, StoreLimits{});
  ASSERT_FALSE(decoded.is_ok());
  EXPECT_NE(decoded.status().message().find("bad magic"), std::string::npos)
      << decoded.status().message();
}

TEST(RendezvousProtocol, RejectsOtherVersionsAndUnknownOps) {
  Request ping;
  ping.op = Op::kPing;
  auto frame = encode_request(ping, kToken);
  frame[4] = static_cast<uint8_t>(kProtocolVersion + 1);
  auto decoded = decode_request_frame(frame, kToken, StoreLimits{});
  ASSERT_FALSE(decoded.is_ok());
  EXPECT_NE(decoded.status().message().find("version"), std::string::npos);

  frame = encode_request(ping, kToken);
  frame[6] = 99;
  decoded = decode_request_frame(frame, kToken, StoreLimits{});
  ASSERT_FALSE(decoded.is_ok());
  EXPECT_NE(decoded.status().message().find("unknown rendezvous op 99"), std::string::npos)
      << decoded.status().message();
  EXPECT_FALSE(decode_reply_payload(static_cast<Op>(99), std::vector<uint8_t>{0}, StoreLimits{})
                   .is_ok());
}

TEST(RendezvousProtocol, RejectsWrongToken) {
  Request set;
  set.op = Op::kSet;
  set.key = "k";
  auto frame = encode_request(set, "0123456789abcdef0123456789abcdeX");
  auto decoded = decode_request_frame(frame, kToken, StoreLimits{});
  ASSERT_FALSE(decoded.is_ok());
  EXPECT_NE(decoded.status().message().find("wrong token"), std::string::npos);

  const std::string_view good = kToken;
  std::vector<uint8_t> presented(good.begin(), good.end());
  EXPECT_TRUE(token_matches(kToken, presented));
  presented.pop_back();
  EXPECT_FALSE(token_matches(kToken, presented));  // a prefix is not the token
  EXPECT_FALSE(token_matches(kToken, {}));
}

TEST(RendezvousProtocol, HugePayloadLengthIsRejectedBeforeAllocating) {
  // A header claiming a 4 GiB payload, followed by nothing.
  Request ping;
  ping.op = Op::kSet;
  auto frame = encode_request(ping, kToken);
  frame.resize(kFrameHeaderBytes + kToken.size());
  put_u32(frame, 10, 0xFFFFFFFFu);

  AllocationProbe probe;
  auto header = decode_frame_header(frame, max_request_payload_bytes(StoreLimits{}));
  auto decoded = decode_request_frame(frame, kToken, StoreLimits{});
  const size_t largest = probe.largest();
  ASSERT_FALSE(header.is_ok());
  ASSERT_FALSE(decoded.is_ok());
  EXPECT_NE(header.status().message().find("larger than the limit"), std::string::npos)
      << header.status().message();
  EXPECT_LT(largest, 4096u) << "a decoder allocated for the claimed size";
}

TEST(RendezvousProtocol, HugeFieldLengthsInsideAPayloadAreRejectedBeforeAllocating) {
  // A SET whose value length claims 4 GiB inside a 12-byte payload.
  std::vector<uint8_t> set_payload = {1, 0, 0, 0, 'k', 0xFF, 0xFF, 0xFF, 0xFF, 'v', 'v', 'v'};
  // A WAIT claiming the maximum key count with no keys behind it.
  std::vector<uint8_t> wait_payload = {0, 0x10, 0, 0, 0, 0, 0, 0};
  // A GET reply whose value length claims 4 GiB.
  std::vector<uint8_t> reply_payload = {0, 0xFF, 0xFF, 0xFF, 0xFF, 'x'};

  AllocationProbe probe;
  auto set = decode_request_payload(Op::kSet, set_payload, StoreLimits{});
  auto wait = decode_request_payload(Op::kWait, wait_payload, StoreLimits{});
  auto reply = decode_reply_payload(Op::kGet, reply_payload, StoreLimits{});
  const size_t largest = probe.largest();
  EXPECT_FALSE(set.is_ok());
  EXPECT_FALSE(wait.is_ok());
  EXPECT_FALSE(reply.is_ok());
  EXPECT_LT(largest, 4096u);
}

TEST(RendezvousProtocol, AllocationProbeSeesAllocations) {
  // Guards the two tests above against passing only because the probe is blind.
  AllocationProbe probe;
  std::vector<uint8_t> buffer(10'000);
  EXPECT_GE(probe.largest(), buffer.size());
}

TEST(RendezvousProtocol, MutatedFramesNeverCrashTheDecoders) {
  // A deterministic stand-in for the fuzzer: flip random bytes of valid frames.
  Request wait;
  wait.op = Op::kWait;
  wait.keys = {"alpha", "beta", "gamma"};
  wait.timeout_ms = 5;
  const auto request = encode_request(wait, kToken);
  Reply get;
  get.value = "some value";
  const auto reply = encode_reply(Op::kGet, get);
  uint64_t state = 88172645463325252ull;
  auto next = [&] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  int decoded_ok = 0;
  for (int round = 0; round < 20'000; ++round) {
    auto frame = (round % 2 == 0) ? request : reply;
    const int flips = 1 + static_cast<int>(next() % 4);
    for (int f = 0; f < flips; ++f) frame[next() % frame.size()] = static_cast<uint8_t>(next());
    if (round % 2 == 0) {
      decoded_ok += decode_request_frame(frame, kToken, StoreLimits{}).is_ok() ? 1 : 0;
    } else {
      decoded_ok += decode_reply_frame(frame, Op::kGet, StoreLimits{}).is_ok() ? 1 : 0;
    }
  }
  // Flips inside key or value bytes still decode; flips in lengths and magic must not.
  EXPECT_GT(decoded_ok, 0);
  EXPECT_LT(decoded_ok, 20'000);
}

TEST(RendezvousProtocol, LimitsAreEnforcedOnDecode) {
  StoreLimits small;
  small.max_key_bytes = 4;
  small.max_value_bytes = 8;
  small.max_keys_per_request = 2;

  Request set;
  set.op = Op::kSet;
  set.key = "long-key";
  set.value = "v";
  EXPECT_FALSE(decode_request_frame(encode_request(set, kToken), kToken, small).is_ok());
  EXPECT_FALSE(check_request_limits(set, small).is_ok());
  set.key = "k";
  set.value = "nine byte";
  EXPECT_FALSE(decode_request_frame(encode_request(set, kToken), kToken, small).is_ok());
  EXPECT_EQ(check_request_limits(set, small).code(), StatusCode::kInvalidArgument);
  set.value = "ok";
  EXPECT_TRUE(decode_request_frame(encode_request(set, kToken), kToken, small).is_ok());
  EXPECT_TRUE(check_request_limits(set, small).is_ok());

  Request check;
  check.op = Op::kCheck;
  check.keys = {"a", "b", "c"};
  EXPECT_FALSE(decode_request_frame(encode_request(check, kToken), kToken, small).is_ok());
  EXPECT_FALSE(check_request_limits(check, small).is_ok());

  // The frame bound follows from the limits: a SET with the largest key and value fits exactly.
  EXPECT_EQ(max_request_payload_bytes(small), std::max<uint64_t>(4 + 4 + 4 + 8, 4 + 2 * 8 + 4));
  EXPECT_GE(max_request_payload_bytes(StoreLimits{}), (64u << 20) + 4096u + 8u);
}

TEST(RendezvousProtocol, EveryTruncationAndTrailingByteIsRejected) {
  Request wait;
  wait.op = Op::kWait;
  wait.keys = {"alpha", "beta"};
  wait.timeout_ms = 100;
  auto frame = encode_request(wait, kToken);
  for (size_t length = 0; length < frame.size(); ++length) {
    std::span<const uint8_t> prefix(frame.data(), length);
    EXPECT_FALSE(decode_request_frame(prefix, kToken, StoreLimits{}).is_ok()) << length;
  }
  frame.push_back(0);
  EXPECT_FALSE(decode_request_frame(frame, kToken, StoreLimits{}).is_ok());
  // Consistent header, but the payload has one byte beyond its last field.
  put_u32(frame, 10, static_cast<uint32_t>(frame.size() - kFrameHeaderBytes - kToken.size()));
  auto decoded = decode_request_frame(frame, kToken, StoreLimits{});
  ASSERT_FALSE(decoded.is_ok());
  EXPECT_NE(decoded.status().message().find("trailing"), std::string::npos);
}

}  // namespace
}  // namespace partrain::rendezvous
