#include "profiler/collector_protocol.h"

#include <limits>

#include <algorithm>

namespace partrain::profiler {
namespace {

void put_le(std::vector<uint8_t>& out, uint64_t v, int width) {
  for (int i = 0; i < width; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

uint64_t get_le(std::span<const uint8_t> bytes, size_t at, size_t width) {
  uint64_t acc = 0;
  for (size_t i = 0; i < width; ++i) acc |= uint64_t{bytes[at + i]} << (8 * i);
  return acc;
}

std::vector<uint8_t> frame(FrameKind kind, std::string_view token, size_t payload_bytes) {
  std::vector<uint8_t> out;
  out.reserve(kCollectorHeaderBytes + token.size() + payload_bytes);
  for (uint8_t byte : kCollectorMagic) out.push_back(byte);
  put_le(out, kCollectorProtocolVersion, 2);
  put_le(out, static_cast<uint16_t>(kind), 2);
  put_le(out, token.size(), 2);
  put_le(out, payload_bytes, 4);
  out.insert(out.end(), token.begin(), token.end());
  return out;
}

// The largest payload each kind may declare; a batch's bound is the configured one.
uint64_t payload_limit(FrameKind kind, const CollectorLimits& limits) {
  switch (kind) {
    case FrameKind::kHello: return 8;
    case FrameKind::kBatch: return limits.max_batch_payload_bytes;
    case FrameKind::kDropped: return 8;
    case FrameKind::kGoodbye: return 0;
  }
  return 0;
}

bool is_known_kind(uint16_t kind) {
  return kind >= static_cast<uint16_t>(FrameKind::kHello) &&
         kind <= static_cast<uint16_t>(FrameKind::kGoodbye);
}

// Constant-time, so response timing does not reveal how much of a guessed token was right.
bool token_matches(std::string_view expected, std::span<const uint8_t> presented) {
  if (expected.size() != presented.size()) return false;
  uint8_t difference = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    difference = static_cast<uint8_t>(difference | (static_cast<uint8_t>(expected[i]) ^ presented[i]));
  }
  return difference == 0;
}

// Walks every record of a batch payload: each length within the limit and the remaining bytes,
// the count exact and nothing left over.
Status validate_records(std::span<const uint8_t> records, uint32_t count,
                        const CollectorLimits& limits) {
  size_t pos = 0;
  for (uint32_t i = 0; i < count; ++i) {
    if (records.size() - pos < kRecordLengthBytes) {
      return failed("malformed collector batch: record {} of {} is truncated", i, count);
    }
    const uint64_t length = get_le(records, pos, kRecordLengthBytes);
    pos += kRecordLengthBytes;
    if (length > limits.max_record_bytes) {
      return failed("collector record of {} bytes is larger than the limit of {} bytes", length,
                    limits.max_record_bytes);
    }
    if (length > records.size() - pos) {
      return failed("malformed collector batch: record {} of {} is truncated", i, count);
    }
    pos += length;
  }
  if (pos != records.size()) {
    return failed("malformed collector batch: {} bytes after its {} records",
                  records.size() - pos, count);
  }
  return Status::ok();
}

}  // namespace

std::string_view frame_kind_name(FrameKind kind) {
  switch (kind) {
    case FrameKind::kHello: return "HELLO";
    case FrameKind::kBatch: return "BATCH";
    case FrameKind::kDropped: return "DROPPED";
    case FrameKind::kGoodbye: return "GOODBYE";
  }
  return "UNKNOWN";
}

std::vector<uint8_t> encode_hello(std::string_view token, int32_t rank, uint32_t pid) {
  auto out = frame(FrameKind::kHello, token, 8);
  put_le(out, static_cast<uint32_t>(rank), 4);
  put_le(out, pid, 4);
  return out;
}

std::vector<uint8_t> encode_dropped(std::string_view token, uint64_t count) {
  auto out = frame(FrameKind::kDropped, token, 8);
  put_le(out, count, 8);
  return out;
}

std::vector<uint8_t> encode_goodbye(std::string_view token) {
  return frame(FrameKind::kGoodbye, token, 0);
}

std::vector<uint8_t> encode_batch_prefix(std::string_view token, size_t records_bytes,
                                         uint32_t record_count) {
  auto out = frame(FrameKind::kBatch, token, 4 + records_bytes);
  put_le(out, record_count, 4);
  return out;
}

std::vector<uint8_t> encode_batch(std::string_view token, std::span<const uint8_t> records,
                                  uint32_t record_count) {
  auto out = encode_batch_prefix(token, records.size(), record_count);
  out.insert(out.end(), records.begin(), records.end());
  return out;
}

void append_record(std::vector<uint8_t>& out, std::span<const uint8_t> record) {
  put_le(out, record.size(), 4);
  out.insert(out.end(), record.begin(), record.end());
}

StatusOr<CollectorFrameHeader> decode_collector_header(std::span<const uint8_t> bytes,
                                                       const CollectorLimits& limits) {
  if (bytes.size() < kCollectorHeaderBytes) {
    return failed("truncated collector frame header ({} of {} bytes)", bytes.size(),
                  kCollectorHeaderBytes);
  }
  if (!std::equal(std::begin(kCollectorMagic), std::end(kCollectorMagic), bytes.begin())) {
    return failed("not a partrain collector frame (bad magic {:02x} {:02x} {:02x} {:02x})",
                  bytes[0], bytes[1], bytes[2], bytes[3]);
  }
  CollectorFrameHeader header;
  header.version = static_cast<uint16_t>(get_le(bytes, 4, 2));
  const auto kind = static_cast<uint16_t>(get_le(bytes, 6, 2));
  header.token_bytes = static_cast<uint16_t>(get_le(bytes, 8, 2));
  header.payload_bytes = static_cast<uint32_t>(get_le(bytes, 10, 4));
  if (header.version != kCollectorProtocolVersion) {
    return failed("collector protocol version {} is not supported (this build speaks {}): "
                  "use the same partrain version for the launcher and the ranks",
                  header.version, kCollectorProtocolVersion);
  }
  if (!is_known_kind(kind)) return failed("unknown collector frame kind {}", kind);
  header.kind = static_cast<FrameKind>(kind);
  if (header.token_bytes > kMaxCollectorTokenBytes) {
    return failed("collector token of {} bytes is longer than the limit of {} bytes",
                  header.token_bytes, kMaxCollectorTokenBytes);
  }
  const uint64_t limit = payload_limit(header.kind, limits);
  if (header.payload_bytes > limit) {
    return failed("collector {} frame of {} bytes is larger than the limit of {} bytes",
                  frame_kind_name(header.kind), header.payload_bytes, limit);
  }
  return header;
}

StatusOr<CollectorFrame> decode_collector_frame(std::span<const uint8_t> bytes,
                                                std::string_view token,
                                                const CollectorLimits& limits) {
  ASSIGN_OR_RETURN(CollectorFrameHeader header, decode_collector_header(bytes, limits));
  if (bytes.size() != header.frame_bytes()) {
    return failed("collector frame is {} bytes but its header says {}", bytes.size(),
                  header.frame_bytes());
  }
  if (!token_matches(token, bytes.subspan(kCollectorHeaderBytes, header.token_bytes))) {
    return failed("wrong token (the run's PARTRAIN_TOKEN)");
  }
  const auto payload = bytes.subspan(kCollectorHeaderBytes + header.token_bytes);
  CollectorFrame frame;
  frame.kind = header.kind;
  const size_t exact = header.kind == FrameKind::kGoodbye ? 0 : 8;
  if (header.kind != FrameKind::kBatch && payload.size() != exact) {
    return failed("malformed collector {} frame: {} payload bytes, expected {}",
                  frame_kind_name(header.kind), payload.size(), exact);
  }
  switch (header.kind) {
    case FrameKind::kHello:
      frame.rank = static_cast<int32_t>(static_cast<uint32_t>(get_le(payload, 0, 4)));
      frame.pid = static_cast<uint32_t>(get_le(payload, 4, 4));
      if (frame.rank < 0) return failed("collector HELLO with negative rank {}", frame.rank);
      break;
    case FrameKind::kDropped:
      frame.dropped = get_le(payload, 0, 8);
      // A count the trace cannot hold (its integers are signed 64-bit: 2^64-1 was stored as -1)
      // is no count a rank could have reached.
      if (frame.dropped > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return failed("malformed collector DROPPED frame: {} records cannot have been lost "
                      "(more than 2^63-1)",
                      frame.dropped);
      }
      break;
    case FrameKind::kGoodbye: break;
    case FrameKind::kBatch: {
      if (payload.size() < 4) return failed("malformed collector batch: no record count");
      frame.record_count = static_cast<uint32_t>(get_le(payload, 0, 4));
      frame.records = payload.subspan(4);
      RETURN_IF_ERROR(validate_records(frame.records, frame.record_count, limits));
      break;
    }
  }
  return frame;
}

}  // namespace partrain::profiler
