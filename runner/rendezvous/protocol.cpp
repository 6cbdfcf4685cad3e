#include "runner/rendezvous/protocol.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include "core/clock.h"

namespace partrain::rendezvous {
namespace {

constexpr uint64_t kU32Max = std::numeric_limits<uint32_t>::max();

class FrameWriter {
 public:
  void u8(uint8_t v) { bytes_.push_back(v); }
  void u16(uint16_t v) { put_le(v, 2); }
  void u32(uint32_t v) { put_le(v, 4); }
  void u64(uint64_t v) { put_le(v, 8); }
  void i64(int64_t v) { u64(static_cast<uint64_t>(v)); }
  void raw(std::string_view s) { bytes_.insert(bytes_.end(), s.begin(), s.end()); }
  // Lengths travel as u32; callers check limits first, which are all far below 4 GiB.
  void str(std::string_view s) {
    u32(static_cast<uint32_t>(s.size()));
    raw(s);
  }
  size_t size() const { return bytes_.size(); }
  std::vector<uint8_t> take() { return std::move(bytes_); }

 private:
  void put_le(uint64_t v, int width) {
    for (int i = 0; i < width; ++i) bytes_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  std::vector<uint8_t> bytes_;
};

// Reads little-endian fields; every read checks the remaining length first.
class FrameReader {
 public:
  explicit FrameReader(std::span<const uint8_t> bytes) : bytes_(bytes) {}

  bool u8(uint8_t& v) { return get_le(v, 1); }
  bool u16(uint16_t& v) { return get_le(v, 2); }
  bool u32(uint32_t& v) { return get_le(v, 4); }
  bool u64(uint64_t& v) { return get_le(v, 8); }
  bool i64(int64_t& v) {
    uint64_t u = 0;
    if (!u64(u)) return false;
    v = static_cast<int64_t>(u);
    return true;
  }
  // A length-prefixed string no longer than max_bytes; checked before the string is built.
  bool str(std::string& out, uint64_t max_bytes) {
    uint32_t length = 0;
    if (!u32(length) || length > max_bytes || length > remaining()) return false;
    out.assign(reinterpret_cast<const char*>(bytes_.data() + pos_), length);
    pos_ += length;
    return true;
  }
  size_t remaining() const { return bytes_.size() - pos_; }

 private:
  template <typename T>
  bool get_le(T& v, size_t width) {
    if (remaining() < width) return false;
    uint64_t acc = 0;
    for (size_t i = 0; i < width; ++i) acc |= uint64_t{bytes_[pos_ + i]} << (8 * i);
    v = static_cast<T>(acc);
    pos_ += width;
    return true;
  }
  std::span<const uint8_t> bytes_;
  size_t pos_ = 0;
};

bool is_known_op(uint16_t op) {
  return op >= static_cast<uint16_t>(Op::kSet) && op <= static_cast<uint16_t>(Op::kPing);
}

void write_header(FrameWriter& out, uint16_t op, size_t token_bytes, size_t payload_bytes) {
  for (uint8_t b : kFrameMagic) out.u8(b);
  out.u16(kProtocolVersion);
  out.u16(op);
  out.u16(static_cast<uint16_t>(token_bytes));
  out.u32(static_cast<uint32_t>(payload_bytes));
}

std::vector<uint8_t> encode_request_payload(const Request& request) {
  FrameWriter out;
  switch (request.op) {
    case Op::kSet:
      out.str(request.key);
      out.str(request.value);
      break;
    case Op::kGet:
      out.str(request.key);
      out.u32(request.timeout_ms);
      break;
    case Op::kAdd:
      out.str(request.key);
      out.i64(request.delta);
      break;
    case Op::kWait:
    case Op::kCheck:
      out.u32(static_cast<uint32_t>(request.keys.size()));
      for (const auto& key : request.keys) out.str(key);
      if (request.op == Op::kWait) out.u32(request.timeout_ms);
      break;
    case Op::kPing: break;
  }
  return out.take();
}

Status malformed(Op op, std::string_view what) {
  return failed("malformed rendezvous {} frame: {}", op_name(op), what);
}

}  // namespace

std::string_view op_name(Op op) {
  switch (op) {
    case Op::kSet: return "SET";
    case Op::kGet: return "GET";
    case Op::kAdd: return "ADD";
    case Op::kWait: return "WAIT";
    case Op::kCheck: return "CHECK";
    case Op::kPing: return "PING";
  }
  return "UNKNOWN";
}

uint64_t max_request_payload_bytes(const StoreLimits& limits) {
  const uint64_t key = 4 + uint64_t{limits.max_key_bytes};
  const uint64_t set = key + 4 + limits.max_value_bytes;
  const uint64_t keys = 4 + uint64_t{limits.max_keys_per_request} * key + 4;
  return std::min(std::max({set, keys, key + 8}), kU32Max);
}

uint64_t max_reply_payload_bytes(const StoreLimits& limits) {
  const uint64_t value = 1 + 4 + limits.max_value_bytes;
  const uint64_t error = 1 + 4 + uint64_t{kMaxReplyMessageBytes};
  return std::min(std::max(value, error), kU32Max);
}

Status check_request_limits(const Request& request, const StoreLimits& limits) {
  auto check_key = [&](const std::string& key) -> Status {
    if (key.size() > limits.max_key_bytes) {
      return invalid_argument("rendezvous key of {} bytes is longer than the limit of {} bytes",
                              key.size(), limits.max_key_bytes);
    }
    return Status::ok();
  };
  switch (request.op) {
    case Op::kSet:
      if (request.value.size() > limits.max_value_bytes) {
        return invalid_argument(
            "rendezvous value for key '{}' has {} bytes, more than the limit of {} bytes",
            request.key.substr(0, 64), request.value.size(), limits.max_value_bytes);
      }
      return check_key(request.key);
    case Op::kGet:
    case Op::kAdd: return check_key(request.key);
    case Op::kWait:
    case Op::kCheck:
      if (request.keys.size() > limits.max_keys_per_request) {
        return invalid_argument("{} rendezvous keys in one request, more than the limit of {}",
                                request.keys.size(), limits.max_keys_per_request);
      }
      for (const auto& key : request.keys) RETURN_IF_ERROR(check_key(key));
      return Status::ok();
    case Op::kPing: return Status::ok();
  }
  return Status::ok();
}

std::vector<uint8_t> encode_request(const Request& request, std::string_view token) {
  std::vector<uint8_t> payload = encode_request_payload(request);
  FrameWriter out;
  write_header(out, static_cast<uint16_t>(request.op), token.size(), payload.size());
  out.raw(token);
  std::vector<uint8_t> frame = out.take();
  frame.insert(frame.end(), payload.begin(), payload.end());
  return frame;
}

std::vector<uint8_t> encode_reply(Op op, const Reply& reply) {
  FrameWriter body;
  body.u8(static_cast<uint8_t>(reply.code));
  if (reply.code != ReplyCode::kOk) {
    body.str(std::string_view(reply.message).substr(0, kMaxReplyMessageBytes));
  } else {
    switch (op) {
      case Op::kGet: body.str(reply.value); break;
      case Op::kAdd:
      case Op::kPing: body.i64(reply.number); break;
      case Op::kCheck: body.u8(reply.all_present ? 1 : 0); break;
      case Op::kSet:
      case Op::kWait: break;
    }
  }
  std::vector<uint8_t> payload = body.take();
  FrameWriter out;
  write_header(out, static_cast<uint16_t>(op), 0, payload.size());
  std::vector<uint8_t> frame = out.take();
  frame.insert(frame.end(), payload.begin(), payload.end());
  return frame;
}

StatusOr<FrameHeader> decode_frame_header(std::span<const uint8_t> bytes, uint64_t payload_limit) {
  if (bytes.size() < kFrameHeaderBytes) {
    return failed("truncated rendezvous frame header ({} of {} bytes)", bytes.size(),
                  kFrameHeaderBytes);
  }
  if (!std::equal(std::begin(kFrameMagic), std::end(kFrameMagic), bytes.begin())) {
    return failed("not a partrain rendezvous frame (bad magic {:02x} {:02x} {:02x} {:02x})",
                  bytes[0], bytes[1], bytes[2], bytes[3]);
  }
  FrameReader in(bytes.subspan(4, kFrameHeaderBytes - 4));
  FrameHeader header;
  in.u16(header.version);
  in.u16(header.op);
  in.u16(header.token_bytes);
  in.u32(header.payload_bytes);
  if (header.version != kProtocolVersion) {
    return failed("rendezvous protocol version {} is not supported (this build speaks {}): "
                  "use the same partrain version on every node",
                  header.version, kProtocolVersion);
  }
  if (header.token_bytes > kMaxTokenBytes) {
    return failed("rendezvous token of {} bytes is longer than the limit of {} bytes",
                  header.token_bytes, kMaxTokenBytes);
  }
  if (header.payload_bytes > payload_limit) {
    return failed("rendezvous frame of {} bytes is larger than the limit of {} bytes",
                  header.payload_bytes, payload_limit);
  }
  return header;
}

bool token_matches(std::string_view expected, std::span<const uint8_t> presented) {
  // The length is not secret (tokens are generated with a fixed length); the bytes are.
  if (expected.size() != presented.size()) return false;
  uint8_t difference = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    const auto byte = static_cast<uint8_t>(expected[i]);
    difference = static_cast<uint8_t>(difference | (byte ^ presented[i]));
  }
  return difference == 0;
}

StatusOr<Request> decode_request_payload(Op op, std::span<const uint8_t> payload,
                                         const StoreLimits& limits) {
  if (!is_known_op(static_cast<uint16_t>(op))) {
    return failed("unknown rendezvous op {}", static_cast<uint16_t>(op));
  }
  FrameReader in(payload);
  Request request;
  request.op = op;
  bool ok = true;
  switch (op) {
    case Op::kSet:
      ok = in.str(request.key, limits.max_key_bytes) &&
           in.str(request.value, limits.max_value_bytes);
      break;
    case Op::kGet:
      ok = in.str(request.key, limits.max_key_bytes) && in.u32(request.timeout_ms);
      break;
    case Op::kAdd: ok = in.str(request.key, limits.max_key_bytes) && in.i64(request.delta); break;
    case Op::kWait:
    case Op::kCheck: {
      uint32_t count = 0;
      if (!in.u32(count)) return malformed(op, "missing key count");
      // Each key needs at least its 4-byte length, so a count the payload cannot hold is a lie.
      if (count > limits.max_keys_per_request || uint64_t{count} * 4 > in.remaining()) {
        return malformed(op, fmt::format("{} keys (limit {})", count, limits.max_keys_per_request));
      }
      request.keys.resize(count);
      for (auto& key : request.keys) ok = ok && in.str(key, limits.max_key_bytes);
      if (op == Op::kWait) ok = ok && in.u32(request.timeout_ms);
      break;
    }
    case Op::kPing: break;
  }
  if (!ok) return malformed(op, "a field is truncated or over its size limit");
  if (in.remaining() != 0) return malformed(op, fmt::format("{} trailing bytes", in.remaining()));
  return request;
}

StatusOr<Reply> decode_reply_payload(Op op, std::span<const uint8_t> payload,
                                     const StoreLimits& limits) {
  FrameReader in(payload);
  Reply reply;
  uint8_t code = 0;
  if (!in.u8(code) || code > static_cast<uint8_t>(ReplyCode::kFailed)) {
    return malformed(op, "missing or unknown reply code");
  }
  reply.code = static_cast<ReplyCode>(code);
  bool ok = true;
  if (reply.code == ReplyCode::kOk && !is_known_op(static_cast<uint16_t>(op))) {
    return failed("unknown rendezvous op {}", static_cast<uint16_t>(op));
  }
  if (reply.code != ReplyCode::kOk) {
    ok = in.str(reply.message, kMaxReplyMessageBytes);
  } else {
    switch (op) {
      case Op::kGet: ok = in.str(reply.value, limits.max_value_bytes); break;
      case Op::kAdd:
      case Op::kPing: ok = in.i64(reply.number); break;
      case Op::kCheck: {
        uint8_t present = 0;
        ok = in.u8(present) && present <= 1;
        reply.all_present = present == 1;
        break;
      }
      case Op::kSet:
      case Op::kWait: break;
    }
  }
  if (!ok) return malformed(op, "a reply field is truncated or over its size limit");
  if (in.remaining() != 0) return malformed(op, fmt::format("{} trailing bytes", in.remaining()));
  return reply;
}

StatusOr<Request> decode_request_frame(std::span<const uint8_t> frame, std::string_view token,
                                       const StoreLimits& limits) {
  ASSIGN_OR_RETURN(FrameHeader header,
                   decode_frame_header(frame, max_request_payload_bytes(limits)));
  const size_t expected = kFrameHeaderBytes + header.token_bytes + size_t{header.payload_bytes};
  if (frame.size() != expected) {
    return failed("rendezvous frame is {} bytes but its header says {}", frame.size(), expected);
  }
  if (!token_matches(token, frame.subspan(kFrameHeaderBytes, header.token_bytes))) {
    return failed("wrong token (the run's PARTRAIN_TOKEN)");
  }
  return decode_request_payload(static_cast<Op>(header.op),
                                frame.subspan(kFrameHeaderBytes + header.token_bytes), limits);
}

StatusOr<Reply> decode_reply_frame(std::span<const uint8_t> frame, Op expected_op,
                                   const StoreLimits& limits) {
  ASSIGN_OR_RETURN(FrameHeader header, decode_frame_header(frame, max_reply_payload_bytes(limits)));
  const size_t expected = kFrameHeaderBytes + header.token_bytes + size_t{header.payload_bytes};
  if (frame.size() != expected) {
    return failed("rendezvous frame is {} bytes but its header says {}", frame.size(), expected);
  }
  if (header.op != static_cast<uint16_t>(expected_op)) {
    return failed("rendezvous reply is for op {} but the request was {}", header.op,
                  op_name(expected_op));
  }
  return decode_reply_payload(expected_op, frame.subspan(kFrameHeaderBytes + header.token_bytes),
                              limits);
}

Status send_all(int fd, std::span<const uint8_t> bytes) {
  while (!bytes.empty()) {
    // MSG_NOSIGNAL: a vanished peer is an error to report, not a SIGPIPE that kills the launcher.
    ssize_t sent = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (sent < 0) {
      if (errno == EINTR) continue;
      return unavailable("rendezvous connection lost while sending: {}", std::strerror(errno));
    }
    bytes = bytes.subspan(static_cast<size_t>(sent));
  }
  return Status::ok();
}

Status receive_exact(int fd, std::span<uint8_t> bytes, int64_t deadline_ns) {
  while (!bytes.empty()) {
    if (deadline_ns >= 0) {
      const int64_t left_ns = deadline_ns - monotonic_ns();
      if (left_ns <= 0) return timeout_error("no reply from the rendezvous store in time");
      pollfd entry{fd, POLLIN, 0};
      const int64_t left_ms = std::min<int64_t>((left_ns + 999'999) / 1'000'000, 60'000);
      int ready = ::poll(&entry, 1, static_cast<int>(left_ms));
      if (ready < 0 && errno != EINTR) {
        return unavailable("rendezvous connection failed: {}", std::strerror(errno));
      }
      if (ready <= 0) continue;
    }
    ssize_t got = ::recv(fd, bytes.data(), bytes.size(), 0);
    if (got == 0) return unavailable("the rendezvous peer closed the connection");
    if (got < 0) {
      if (errno == EINTR) continue;
      return unavailable("rendezvous connection lost while receiving: {}", std::strerror(errno));
    }
    bytes = bytes.subspan(static_cast<size_t>(got));
  }
  return Status::ok();
}

}  // namespace partrain::rendezvous
