#include "runner/rendezvous/tcpstore_session.h"

#include <algorithm>

namespace partrain::rendezvous::detail {
namespace {

using tcpstore::QueryType;

constexpr uint64_t kReplyBacklogBytes = 64 * 1024;

// A length-prefixed value, the value itself shared with the key space (an absent key reads as
// empty, as torch's server answers a GET it was not asked to WAIT for).
void send_value(Connection& connection, const Value& value) {
  std::string length;
  tcpstore::append_length(length, value ? value->size() : 0);
  connection.send(std::move(length));
  if (value && !value->empty()) connection.send(value);
}

void send_u8(Connection& connection, uint8_t byte) {
  std::string out;
  tcpstore::append_u8(out, byte);
  connection.send(std::move(out));
}

void send_i64(Connection& connection, int64_t number) {
  std::string out;
  tcpstore::append_i64(out, number);
  connection.send(std::move(out));
}

Verdict drop(Connection& connection, const tcpstore::Query& query, const Status& why) {
  connection.close_reason =
      fmt::format("TCPStore {}: {}", tcpstore::query_name(query.type), why.message());
  return Verdict::kClose;
}

Verdict execute(Connection& connection, SessionContext& context, tcpstore::Query& query) {
  KeySpace& keys = context.keys;
  const std::string* key = query.keys.empty() ? nullptr : &query.keys[0];
  switch (query.type) {
    case QueryType::kValidate:
      return drop(connection, query, failed("VALIDATE sent twice"));
    case QueryType::kPing: {
      std::string out;
      tcpstore::append_u32(out, query.word);
      connection.send(std::move(out));
      break;
    }
    case QueryType::kSet:
      if (Status s = keys.set(*key, std::move(query.values[0])); !s.is_ok()) {
        return drop(connection, query, s);
      }
      break;
    case QueryType::kCompareSet: {
      auto now = keys.compare_set(*key, std::move(query.values[0]), std::move(query.values[1]));
      if (!now.is_ok()) return drop(connection, query, now.status());
      send_value(connection, *now);
      break;
    }
    case QueryType::kGet: send_value(connection, keys.find(*key)); break;
    case QueryType::kAdd: {
      auto sum = keys.add(*key, query.number);
      if (!sum.is_ok()) return drop(connection, query, sum.status());
      send_i64(connection, *sum);
      break;
    }
    case QueryType::kCheck: {
      const bool ready =
          std::all_of(query.keys.begin(), query.keys.end(),
                      [&](const std::string& k) { return keys.present_or_queued(k); });
      send_u8(connection, static_cast<uint8_t>(ready ? tcpstore::CheckReply::kReady
                                                     : tcpstore::CheckReply::kNotReady));
      break;
    }
    case QueryType::kWait:
      if (!keys.wait_for(connection.id, query.keys)) finish_tcpstore_wait(connection);
      break;
    case QueryType::kGetNumKeys: send_i64(connection, static_cast<int64_t>(keys.size())); break;
    case QueryType::kDeleteKey: send_i64(connection, keys.erase(*key) ? 1 : 0); break;
    case QueryType::kAppend:
      if (Status s = keys.append(*key, query.values[0]); !s.is_ok()) {
        return drop(connection, query, s);
      }
      break;
    case QueryType::kMultiGet:
      for (const std::string& k : query.keys) send_value(connection, keys.find(k));
      break;
    case QueryType::kMultiSet:
      for (size_t i = 0; i < query.keys.size(); ++i) {
        if (Status s = keys.set(query.keys[i], std::move(query.values[i])); !s.is_ok()) {
          return drop(connection, query, s);
        }
      }
      break;
    case QueryType::kCancelWait:
      keys.cancel_wait(connection.id);
      send_u8(connection, static_cast<uint8_t>(tcpstore::WaitReply::kWaitCanceled));
      break;
    case QueryType::kQueuePush:
      if (Status s = keys.queue_push(*key, std::move(query.values[0])); !s.is_ok()) {
        return drop(connection, query, s);
      }
      break;
    case QueryType::kQueuePop: {
      // The queue's length before the pop, then the value when there was one.
      const size_t length = keys.queue_length(*key);
      send_i64(connection, static_cast<int64_t>(length));
      if (std::optional<Value> value = keys.queue_pop(*key)) send_value(connection, *value);
      break;
    }
    case QueryType::kQueueLen:
      send_i64(connection, static_cast<int64_t>(keys.queue_length(*key)));
      break;
    case QueryType::kListKeys: {
      const std::vector<std::string> names = keys.keys();
      std::string out;
      tcpstore::append_i64(out, static_cast<int64_t>(names.size()));
      for (const std::string& name : names) {
        tcpstore::append_length(out, name.size());
        out += name;
      }
      connection.send(std::move(out));
      break;
    }
    case QueryType::kBarrier: {
      auto done = keys.arrive_at_barrier(connection.id, *key, query.number);
      if (!done.is_ok()) return drop(connection, query, done.status());
      if (*done) finish_tcpstore_wait(connection);
      break;
    }
  }
  return Verdict::kKeep;
}

}  // namespace

Verdict serve_tcpstore(Connection& connection, SessionContext& context) {
  while (connection.out_bytes < kReplyBacklogBytes) {
    // A query's fields are walked again from its start each time: not before the bytes the last
    // walk said it needs are there.
    if (connection.buffered() == 0 || connection.buffered() < connection.wanted) break;
    tcpstore::DecodeResult result = tcpstore::decode_query(connection.unserved(),
                                                           context.tcpstore_limits);
    if (auto* incomplete = std::get_if<tcpstore::Incomplete>(&result)) {
      connection.wanted = incomplete->needed;
      break;
    }
    connection.wanted = 0;
    if (auto* malformed = std::get_if<tcpstore::Malformed>(&result)) {
      connection.close_reason = malformed->reason;
      return Verdict::kClose;
    }
    auto& decoded = std::get<tcpstore::Decoded>(result);
    connection.consume(decoded.consumed);
    if (!connection.handshaken) {
      if (decoded.query.type != QueryType::kValidate ||
          decoded.query.word != tcpstore::kValidationMagic) {
        connection.close_reason =
            "a TCPStore client whose first query was not VALIDATE with torch's magic number";
        return Verdict::kClose;
      }
      connection.handshaken = true;
      continue;
    }
    if (Verdict verdict = execute(connection, context, decoded.query); verdict != Verdict::kKeep) {
      return verdict;
    }
  }
  return Verdict::kKeep;
}

void finish_tcpstore_wait(Connection& connection) {
  send_u8(connection, static_cast<uint8_t>(tcpstore::WaitReply::kStopWaiting));
}

}  // namespace partrain::rendezvous::detail
