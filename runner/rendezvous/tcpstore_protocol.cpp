#include "runner/rendezvous/tcpstore_protocol.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

namespace partrain::rendezvous::tcpstore {
namespace {

// Walks a query's fields. Each read either succeeds, finds the buffer too short (incomplete(),
// with the bytes it would need), or finds a field over its limit (malformed()).
class FieldReader {
 public:
  FieldReader(std::span<const uint8_t> bytes, const Limits& limits)
      : bytes_(bytes), limits_(limits) {}

  template <typename T>
  bool number(T& value) {
    if (!available(sizeof(T))) return false;
    uint64_t acc = 0;
    for (size_t i = 0; i < sizeof(T); ++i) acc |= uint64_t{bytes_[pos_ + i]} << (8 * i);
    value = static_cast<T>(acc);
    pos_ += sizeof(T);
    return true;
  }

  // A u64 length, then that many bytes (at most `limit`).
  bool text(std::string& out, uint64_t limit, std::string_view what) {
    uint64_t length = 0;
    if (!number(length)) return false;
    if (length > limit) {
      return malformed(fmt::format("{} of {} bytes is over the limit of {}", what, length, limit));
    }
    if (!available(length)) return false;
    out.assign(reinterpret_cast<const char*>(bytes_.data() + pos_), length);
    pos_ += length;
    return true;
  }

  bool key(std::string& out) { return text(out, limits_.max_key_bytes, "a key"); }
  bool value(std::string& out) { return text(out, limits_.max_value_bytes, "a value"); }

  bool count(uint64_t& out) {
    if (!number(out)) return false;
    if (out > limits_.max_keys) {
      return malformed(fmt::format("{} keys in one query, over the limit of {}", out,
                                   limits_.max_keys));
    }
    // Each key takes at least its 8-byte length: a count the query's bound cannot hold is a lie.
    if (out * 8 > limits_.max_query_bytes) {
      return malformed(fmt::format("{} keys cannot fit a query of at most {} bytes", out,
                                   limits_.max_query_bytes));
    }
    return true;
  }

  bool malformed(std::string reason) {
    error_ = std::move(reason);
    return false;
  }

  size_t position() const { return pos_; }
  const std::optional<std::string>& error() const { return error_; }
  size_t needed() const { return needed_; }

 private:
  bool available(uint64_t n) {
    if (n > limits_.max_query_bytes - std::min<uint64_t>(pos_, limits_.max_query_bytes)) {
      error_ = fmt::format("a query of more than {} bytes", limits_.max_query_bytes);
      return false;
    }
    if (n <= bytes_.size() - pos_) return true;
    needed_ = pos_ + static_cast<size_t>(n);
    return false;
  }

  std::span<const uint8_t> bytes_;
  const Limits& limits_;
  size_t pos_ = 0;
  size_t needed_ = 0;
  std::optional<std::string> error_;
};

// The fields after the type byte; false when incomplete or malformed (see the reader).
bool read_fields(FieldReader& in, Query& query) {
  switch (query.type) {
    case QueryType::kValidate:
    case QueryType::kPing: return in.number(query.word);
    case QueryType::kSet:
    case QueryType::kAppend:
    case QueryType::kQueuePush:
      query.keys.resize(1);
      query.values.resize(1);
      return in.key(query.keys[0]) && in.value(query.values[0]);
    case QueryType::kCompareSet:
      query.keys.resize(1);
      query.values.resize(2);
      return in.key(query.keys[0]) && in.value(query.values[0]) && in.value(query.values[1]);
    case QueryType::kGet:
    case QueryType::kDeleteKey:
    case QueryType::kQueuePop:
    case QueryType::kQueueLen:
      query.keys.resize(1);
      return in.key(query.keys[0]);
    case QueryType::kAdd:
    case QueryType::kBarrier:
      query.keys.resize(1);
      return in.key(query.keys[0]) && in.number(query.number);
    case QueryType::kCheck:
    case QueryType::kWait:
    case QueryType::kMultiGet:
    case QueryType::kMultiSet: {
      uint64_t count = 0;
      if (!in.count(count)) return false;
      const bool with_values = query.type == QueryType::kMultiSet;
      // Grown key by key, never to the count a peer claims.
      for (uint64_t i = 0; i < count; ++i) {
        std::string key;
        std::string value;
        if (!in.key(key)) return false;
        if (with_values && !in.value(value)) return false;
        query.keys.push_back(std::move(key));
        if (with_values) query.values.push_back(std::move(value));
      }
      return true;
    }
    case QueryType::kGetNumKeys:
    case QueryType::kCancelWait:
    case QueryType::kListKeys: return true;
  }
  return in.malformed("unknown query type");
}

void append_le(std::string& out, uint64_t value, size_t width) {
  for (size_t i = 0; i < width; ++i) out.push_back(static_cast<char>(value >> (8 * i)));
}

}  // namespace

std::string_view query_name(QueryType type) {
  switch (type) {
    case QueryType::kValidate: return "VALIDATE";
    case QueryType::kSet: return "SET";
    case QueryType::kCompareSet: return "COMPARE_SET";
    case QueryType::kGet: return "GET";
    case QueryType::kAdd: return "ADD";
    case QueryType::kCheck: return "CHECK";
    case QueryType::kWait: return "WAIT";
    case QueryType::kGetNumKeys: return "GETNUMKEYS";
    case QueryType::kDeleteKey: return "DELETE_KEY";
    case QueryType::kAppend: return "APPEND";
    case QueryType::kMultiGet: return "MULTI_GET";
    case QueryType::kMultiSet: return "MULTI_SET";
    case QueryType::kCancelWait: return "CANCEL_WAIT";
    case QueryType::kPing: return "PING";
    case QueryType::kQueuePush: return "QUEUE_PUSH";
    case QueryType::kQueuePop: return "QUEUE_POP";
    case QueryType::kQueueLen: return "QUEUE_LEN";
    case QueryType::kListKeys: return "LIST_KEYS";
    case QueryType::kBarrier: return "BARRIER";
  }
  return "UNKNOWN";
}

DecodeResult decode_query(std::span<const uint8_t> bytes, const Limits& limits) {
  if (bytes.empty()) return Incomplete{1};
  if (bytes[0] > kLastQueryType) {
    return Malformed{fmt::format("unknown TCPStore query type {}", bytes[0])};
  }
  Query query;
  query.type = static_cast<QueryType>(bytes[0]);
  FieldReader in(bytes.subspan(1), limits);
  if (read_fields(in, query)) return Decoded{std::move(query), 1 + in.position()};
  if (in.error()) {
    return Malformed{fmt::format("TCPStore {} query: {}", query_name(query.type), *in.error())};
  }
  return Incomplete{1 + in.needed()};
}

std::vector<uint8_t> encode_query(const Query& query) {
  std::string out;
  append_u8(out, static_cast<uint8_t>(query.type));
  auto text = [&](const std::string& s) {
    append_length(out, s.size());
    out += s;
  };
  switch (query.type) {
    case QueryType::kValidate:
    case QueryType::kPing: append_u32(out, query.word); break;
    case QueryType::kSet:
    case QueryType::kAppend:
    case QueryType::kQueuePush:
      text(query.keys.at(0));
      text(query.values.at(0));
      break;
    case QueryType::kCompareSet:
      text(query.keys.at(0));
      text(query.values.at(0));
      text(query.values.at(1));
      break;
    case QueryType::kGet:
    case QueryType::kDeleteKey:
    case QueryType::kQueuePop:
    case QueryType::kQueueLen: text(query.keys.at(0)); break;
    case QueryType::kAdd:
    case QueryType::kBarrier:
      text(query.keys.at(0));
      append_i64(out, query.number);
      break;
    case QueryType::kCheck:
    case QueryType::kWait:
    case QueryType::kMultiGet:
    case QueryType::kMultiSet:
      append_length(out, query.keys.size());
      for (size_t i = 0; i < query.keys.size(); ++i) {
        text(query.keys[i]);
        if (query.type == QueryType::kMultiSet) text(query.values.at(i));
      }
      break;
    case QueryType::kGetNumKeys:
    case QueryType::kCancelWait:
    case QueryType::kListKeys: break;
  }
  return std::vector<uint8_t>(out.begin(), out.end());
}

void append_u8(std::string& out, uint8_t value) { out.push_back(static_cast<char>(value)); }
void append_u32(std::string& out, uint32_t value) { append_le(out, value, 4); }
void append_i64(std::string& out, int64_t value) {
  append_le(out, static_cast<uint64_t>(value), 8);
}
void append_length(std::string& out, uint64_t length) { append_le(out, length, 8); }

}  // namespace partrain::rendezvous::tcpstore
