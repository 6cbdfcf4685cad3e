// The wire protocol between a rank's recorder (CollectorClient) and its node's collector: frames
// over a Unix stream socket. Encoding and decoding are pure functions over byte spans (explicit
// little-endian) that check magic, version, kind, token and every size before allocating, so a
// fuzzer can feed them arbitrary bytes. Records are opaque: the event encoding is not ours.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace partrain::profiler {

// Frame = header | token | payload. Every frame carries the run's token, so a frame can be judged
// on its own bytes.
// Header (14 bytes): magic "PTRC", version u16, kind u16, token length u16, payload length u32.
inline constexpr uint8_t kCollectorMagic[4] = {'P', 'T', 'R', 'C'};
// 2: a collective record carries NCCL's algorithm, protocol and channel count (the profiler
// plugin's), so a rank and a collector of different builds refuse each other's frames.
// 3: a collective record carries its caller's label (moe_dispatch, moe_combine).
// 4: a step record carries its torchrun attempt (TORCHELASTIC_RESTART_COUNT).
inline constexpr uint16_t kCollectorProtocolVersion = 4;
inline constexpr size_t kCollectorHeaderBytes = 14;
inline constexpr uint16_t kMaxCollectorTokenBytes = 256;
// Each record inside a batch is [u32 little-endian length][bytes]; the recorder's buffers store
// them the same way so a batch is shipped without re-encoding.
inline constexpr size_t kRecordLengthBytes = 4;

enum class FrameKind : uint16_t {
  kHello = 1,    // payload: rank i32, pid u32. Must be the first frame of a connection.
  kBatch = 2,    // payload: record count u32, then that many length-prefixed records
  kDropped = 3,  // payload: u64 records lost on the rank side since the last report (< 2^63)
  kGoodbye = 4,  // payload: empty; the rank is done and the close that follows is clean
};

// What a collector lets one peer make it allocate. The client keeps its frames inside them.
struct CollectorLimits {
  uint32_t max_record_bytes = 64 * 1024;
  uint32_t max_batch_payload_bytes = 4 * 1024 * 1024;
};

struct CollectorFrameHeader {
  uint16_t version = kCollectorProtocolVersion;
  FrameKind kind = FrameKind::kHello;
  uint16_t token_bytes = 0;
  uint32_t payload_bytes = 0;

  size_t frame_bytes() const { return kCollectorHeaderBytes + token_bytes + size_t{payload_bytes}; }
};

// One decoded frame. For a batch, records points into the decoded bytes (no copy): it is the
// concatenation of record_count length-prefixed records, already validated.
struct CollectorFrame {
  FrameKind kind = FrameKind::kHello;
  int32_t rank = -1;     // kHello
  uint32_t pid = 0;      // kHello
  uint64_t dropped = 0;  // kDropped
  uint32_t record_count = 0;
  std::span<const uint8_t> records;  // kBatch
};

std::string_view frame_kind_name(FrameKind kind);

// Encoders. A batch's records must already be length-prefixed (see kRecordLengthBytes).
std::vector<uint8_t> encode_hello(std::string_view token, int32_t rank, uint32_t pid);
std::vector<uint8_t> encode_dropped(std::string_view token, uint64_t count);
std::vector<uint8_t> encode_goodbye(std::string_view token);
std::vector<uint8_t> encode_batch(std::string_view token, std::span<const uint8_t> records,
                                  uint32_t record_count);
// The part of a batch frame in front of its records (header, token, count), so a sender can
// write it and the records with one gathered write instead of copying the records.
std::vector<uint8_t> encode_batch_prefix(std::string_view token, size_t records_bytes,
                                         uint32_t record_count);
// Appends one record as [u32 length][bytes], the layout batches carry.
void append_record(std::vector<uint8_t>& out, std::span<const uint8_t> record);

// Decodes the first kCollectorHeaderBytes: magic, version, kind, token length and the payload
// bound for that kind. Nothing is allocated; a stream reader calls this as soon as 14 bytes are in
// so an oversized frame is refused before its body is read.
StatusOr<CollectorFrameHeader> decode_collector_header(std::span<const uint8_t> bytes,
                                                       const CollectorLimits& limits);
// Decodes one whole frame (its size must match the header exactly) and checks the token.
StatusOr<CollectorFrame> decode_collector_frame(std::span<const uint8_t> frame,
                                                std::string_view token,
                                                const CollectorLimits& limits);

// Calls visit(record) for each record of a validated batch (CollectorFrame::records).
template <typename Visit>
void for_each_record(std::span<const uint8_t> records, Visit&& visit) {
  size_t pos = 0;
  while (pos + kRecordLengthBytes <= records.size()) {
    const uint32_t length = uint32_t{records[pos]} | uint32_t{records[pos + 1]} << 8 |
                            uint32_t{records[pos + 2]} << 16 | uint32_t{records[pos + 3]} << 24;
    pos += kRecordLengthBytes;
    if (length > records.size() - pos) return;
    visit(records.subspan(pos, length));
    pos += length;
  }
}

}  // namespace partrain::profiler
