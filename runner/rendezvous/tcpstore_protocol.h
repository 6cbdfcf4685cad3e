// PyTorch's TCPStore wire protocol (torch/csrc/distributed/c10d/store/TCPStoreBackend.hpp), as
// the rendezvous store speaks it on MASTER_PORT so that unmodified torch.distributed programs
// (init_process_group("env://"), TCPStore(...), DeviceMesh) find a store there, as under
// torchrun's agent store. A query is one byte of QueryType then its fields: strings and byte
// vectors as a u64 length and the bytes, numbers in the host's (little-endian) order; there is
// no frame length, so the decoder checks every length against the limits as it meets it, before
// anything is allocated. Decoding is a pure function over the bytes received so far, for the
// event loop and for fuzzers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace partrain::rendezvous::tcpstore {

// The first query of every connection is VALIDATE with this number (TCPStoreBackend.hpp).
inline constexpr uint32_t kValidationMagic = 0x3C85F7CE;

// torch 2.15's QueryType, in its order (the byte on the wire).
enum class QueryType : uint8_t {
  kValidate = 0,
  kSet,
  kCompareSet,
  kGet,
  kAdd,
  kCheck,
  kWait,
  kGetNumKeys,
  kDeleteKey,
  kAppend,
  kMultiGet,
  kMultiSet,
  kCancelWait,
  kPing,
  kQueuePush,
  kQueuePop,
  kQueueLen,
  kListKeys,
  kBarrier,
};
inline constexpr uint8_t kLastQueryType = static_cast<uint8_t>(QueryType::kBarrier);
std::string_view query_name(QueryType type);

enum class CheckReply : uint8_t { kReady = 0, kNotReady = 1 };
enum class WaitReply : uint8_t { kStopWaiting = 0, kWaitCanceled = 1 };

// What a query may make the store allocate. The key and value bounds are those of torch's own
// (libuv) server; a query as a whole is bounded too, since its key count alone would allow
// 128 Ki keys of 8 KiB.
struct Limits {
  uint64_t max_key_bytes = 8 * 1024;
  uint64_t max_value_bytes = 8 * 1024 * 1024;
  uint64_t max_keys = 128 * 1024;
  uint64_t max_query_bytes = 64ull << 20;
};

struct Query {
  QueryType type = QueryType::kPing;
  // SET, GET, ADD, DELETE_KEY, APPEND, QUEUE_*, BARRIER, COMPARE_SET: one; CHECK, WAIT,
  // MULTI_GET, MULTI_SET: each.
  std::vector<std::string> keys;
  // SET, APPEND, QUEUE_PUSH: one; COMPARE_SET: expected, desired; MULTI_SET: one per key.
  std::vector<std::string> values;
  int64_t number = 0;  // ADD: the delta; BARRIER: the world size
  uint32_t word = 0;   // VALIDATE: the magic; PING: the nonce to echo
};

// The bytes so far hold no whole query yet; `needed` is a lower bound on the total they must
// reach before decoding is worth trying again.
struct Incomplete {
  size_t needed = 0;
};
struct Decoded {
  Query query;
  size_t consumed = 0;  // bytes of the buffer this query took
};
// The bytes cannot be a valid query (unknown type, a length over its limit): close the
// connection, as torch's server does.
struct Malformed {
  std::string reason;
};
using DecodeResult = std::variant<Incomplete, Decoded, Malformed>;

// Decodes the query at the start of `bytes`.
DecodeResult decode_query(std::span<const uint8_t> bytes, const Limits& limits);

// Query encoding, for tests and clients (what torch's client sends).
std::vector<uint8_t> encode_query(const Query& query);

// Reply pieces, in the layouts torch's client reads.
void append_u8(std::string& out, uint8_t value);
void append_u32(std::string& out, uint32_t value);
void append_i64(std::string& out, int64_t value);
// A byte vector's or string's length prefix (the bytes follow).
void append_length(std::string& out, uint64_t length);

}  // namespace partrain::rendezvous::tcpstore
