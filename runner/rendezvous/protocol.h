// The rendezvous store's wire protocol: length-framed binary requests and replies over TCP.
// Encoding and decoding are pure functions over byte spans (explicit little-endian, no struct
// copies) that check magic, version, token and every size before allocating, so fuzzers can
// feed them arbitrary bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace partrain::rendezvous {

// Bounds a store enforces on what a peer may make it allocate; the frame bound follows from them.
struct StoreLimits {
  uint32_t max_key_bytes = 4096;
  uint64_t max_value_bytes = 64ull << 20;
  uint32_t max_keys_per_request = 4096;
};

// Frame = header | token | payload.
// Header: magic "PTRZ" (4 bytes), version u16, op u16, token length u16, payload length u32.
// Requests carry the run's token; replies carry none (token length 0) and echo the request's op.
inline constexpr uint8_t kFrameMagic[4] = {'P', 'T', 'R', 'Z'};
inline constexpr uint16_t kProtocolVersion = 1;
inline constexpr size_t kFrameHeaderBytes = 14;
inline constexpr uint16_t kMaxTokenBytes = 256;
// Error messages are cut to this so a timeout naming thousands of keys still fits a small reply.
inline constexpr uint32_t kMaxReplyMessageBytes = 64 * 1024;

enum class Op : uint16_t {
  kSet = 1,
  kGet = 2,    // key, timeout: blocks server-side until the key is set
  kAdd = 3,    // key, delta -> new value
  kWait = 4,   // keys, timeout: blocks until every key is set
  kCheck = 5,  // keys -> whether all are set
  kPing = 6,   // -> the server's monotonic clock, for clock-offset estimation
};
std::string_view op_name(Op op);

enum class ReplyCode : uint8_t {
  kOk = 0,
  kTimeout = 1,   // GET / WAIT deadline passed; the message names the missing keys
  kRejected = 2,  // bad magic, version, token or size: the server disconnects after this reply
  kFailed = 3,    // a valid request that could not be served (ADD on a non-integer value)
};

// One request; which fields matter depends on op (see Op).
struct Request {
  Op op = Op::kPing;
  std::string key;                // SET, GET, ADD
  std::string value;              // SET
  int64_t delta = 0;              // ADD
  std::vector<std::string> keys;  // WAIT, CHECK
  uint32_t timeout_ms = 0;        // GET, WAIT
};

struct Reply {
  ReplyCode code = ReplyCode::kOk;
  std::string message;  // when code != kOk
  std::string value;    // GET
  int64_t number = 0;   // ADD: the new value; PING: the server's monotonic_ns
  bool all_present = false;  // CHECK
};

struct FrameHeader {
  uint16_t version = kProtocolVersion;
  uint16_t op = 0;  // an Op, checked by the payload decoders; replies echo their request's
  uint16_t token_bytes = 0;
  uint32_t payload_bytes = 0;
};

// The largest payload a valid request or reply can have under these limits.
uint64_t max_request_payload_bytes(const StoreLimits& limits);
uint64_t max_reply_payload_bytes(const StoreLimits& limits);

// Checks that a request fits the limits before it is sent (keys, values, key count).
Status check_request_limits(const Request& request, const StoreLimits& limits);

std::vector<uint8_t> encode_request(const Request& request, std::string_view token);
std::vector<uint8_t> encode_reply(Op op, const Reply& reply);

// Decodes the first kFrameHeaderBytes of a frame: magic, version, token and payload bounds
// (payload_limit is max_request_payload_bytes or max_reply_payload_bytes). Nothing is allocated.
// The op is left to the payload decoders so a rejection can still echo whatever op was sent.
StatusOr<FrameHeader> decode_frame_header(std::span<const uint8_t> bytes, uint64_t payload_limit);
// Constant-time comparison, so response timing does not reveal how much of a guess was right.
bool token_matches(std::string_view expected, std::span<const uint8_t> presented);
// Decodes a request payload whose header already passed; every length is checked against the
// remaining bytes and the limits before a string is built.
StatusOr<Request> decode_request_payload(Op op, std::span<const uint8_t> payload,
                                         const StoreLimits& limits);
StatusOr<Reply> decode_reply_payload(Op op, std::span<const uint8_t> payload,
                                     const StoreLimits& limits);

// Whole frames, for fuzzers and tests: header, token, payload; the size must match exactly.
StatusOr<Request> decode_request_frame(std::span<const uint8_t> frame, std::string_view token,
                                       const StoreLimits& limits);
StatusOr<Reply> decode_reply_frame(std::span<const uint8_t> frame, Op expected_op,
                                   const StoreLimits& limits);

// Frame I/O on a connected stream socket, shared by the server and the client.
// deadline_ns is a monotonic_ns() instant; a negative deadline waits forever.
Status send_all(int fd, std::span<const uint8_t> bytes);
// kUnavailable when the peer closed; kTimeout at the deadline.
Status receive_exact(int fd, std::span<uint8_t> bytes, int64_t deadline_ns);

}  // namespace partrain::rendezvous
