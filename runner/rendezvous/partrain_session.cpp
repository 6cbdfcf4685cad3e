#include "runner/rendezvous/partrain_session.h"

#include <algorithm>

#include "core/clock.h"
#include "core/duration.h"

namespace partrain::rendezvous::detail {
namespace {

// Replies not yet read beyond this stop the serving of further requests on that connection, so
// a peer that sends without reading cannot make the store queue replies without bound.
constexpr uint64_t kReplyBacklogBytes = 64 * 1024;

std::string timeout_message(const std::vector<std::string>& missing, uint32_t timeout_ms) {
  const std::string within = format_duration(std::chrono::milliseconds(timeout_ms));
  if (missing.size() == 1) {
    return fmt::format("rendezvous key '{}' was not set within {}", missing.front(), within);
  }
  std::string names;
  for (const auto& key : missing) names += (names.empty() ? "'" : ", '") + key + "'";
  return fmt::format("rendezvous keys not set within {}: {}", within, names);
}

Reply error_reply(ReplyCode code, std::string message) {
  Reply reply;
  reply.code = code;
  reply.message = std::move(message);
  return reply;
}

void send_reply(Connection& connection, Op op, const Reply& reply) {
  std::vector<uint8_t> frame = encode_reply(op, reply);
  connection.send(std::string(frame.begin(), frame.end()));
}

Verdict reject(Connection& connection, uint16_t sent_op, const Status& why) {
  // The reply echoes the op bytes as sent, so the client can match it even if the rest was bad.
  send_reply(connection, static_cast<Op>(sent_op),
             error_reply(ReplyCode::kRejected, why.message()));
  connection.close_reason = why.message();
  return Verdict::kCloseAfterReply;
}

void park(Connection& connection, SessionContext& context, const Request& request,
          const std::vector<std::string>& keys) {
  connection.parked = request;
  connection.parked_until_ns = context.now_ns + int64_t{request.timeout_ms} * 1'000'000;
  (void)context.keys.wait_for(connection.id, keys);
}

void execute(Connection& connection, SessionContext& context, const Request& request) {
  KeySpace& keys = context.keys;
  Reply reply;
  switch (request.op) {
    case Op::kSet:
      if (Status set = keys.set(request.key, request.value); !set.is_ok()) {
        reply = error_reply(ReplyCode::kFailed, set.message());
      } else if (context.liveness && context.liveness->watches(request.key)) {
        context.liveness->written(request.key, request.value, connection.id, context.now_ns);
      }
      break;
    case Op::kGet: {
      Value value = keys.find(request.key);
      if (!value) return park(connection, context, request, {request.key});
      reply.value = *value;
      break;
    }
    case Op::kAdd: {
      auto sum = keys.add(request.key, request.delta);
      if (!sum.is_ok()) {
        reply = error_reply(ReplyCode::kFailed, sum.status().message());
      } else {
        reply.number = *sum;
      }
      break;
    }
    case Op::kWait: {
      const bool all_set = std::all_of(request.keys.begin(), request.keys.end(),
                                       [&](const std::string& key) { return keys.contains(key); });
      if (!all_set) return park(connection, context, request, request.keys);
      break;
    }
    case Op::kCheck:
      reply.all_present = std::all_of(request.keys.begin(), request.keys.end(),
                                      [&](const std::string& key) { return keys.contains(key); });
      break;
    case Op::kPing: reply.number = monotonic_ns(); break;
  }
  send_reply(connection, request.op, reply);
}

// Whether the bytes so far can still begin a partrain frame: garbage is refused at its first
// byte instead of after a handshake timeout.
bool could_be_magic(std::span<const uint8_t> bytes) {
  const size_t n = std::min(bytes.size(), sizeof(kFrameMagic));
  return std::equal(bytes.begin(), bytes.begin() + n, std::begin(kFrameMagic));
}

}  // namespace

uint64_t partrain_frame_bound(const StoreLimits& limits) {
  return kFrameHeaderBytes + kMaxTokenBytes + max_request_payload_bytes(limits);
}

Verdict serve_partrain(Connection& connection, SessionContext& context) {
  while (!connection.parked && connection.out_bytes < kReplyBacklogBytes) {
    std::span<const uint8_t> bytes = connection.unserved();
    if (bytes.empty()) break;
    if (!could_be_magic(bytes) || bytes.size() >= kFrameHeaderBytes) {
      const uint16_t sent_op =
          bytes.size() >= 8 ? static_cast<uint16_t>(bytes[6] | (bytes[7] << 8)) : 0;
      std::array<uint8_t, kFrameHeaderBytes> header_bytes{};
      std::copy_n(bytes.begin(), std::min(bytes.size(), kFrameHeaderBytes), header_bytes.begin());
      auto header = decode_frame_header(header_bytes, max_request_payload_bytes(context.limits));
      if (!header.is_ok()) return reject(connection, sent_op, header.status());
      const size_t frame_bytes =
          kFrameHeaderBytes + header->token_bytes + size_t{header->payload_bytes};
      if (bytes.size() < frame_bytes) break;
      if (!token_matches(context.token, bytes.subspan(kFrameHeaderBytes, header->token_bytes))) {
        return reject(connection, sent_op, failed("wrong token (the run's PARTRAIN_TOKEN)"));
      }
      const Op op = static_cast<Op>(header->op);
      auto request = decode_request_payload(
          op, bytes.subspan(kFrameHeaderBytes + header->token_bytes, header->payload_bytes),
          context.limits);
      if (!request.is_ok()) return reject(connection, sent_op, request.status());
      connection.consume(frame_bytes);
      connection.handshaken = true;
      execute(connection, context, *request);
    } else {
      break;  // the start of a frame's header, the rest still to come
    }
  }
  return Verdict::kKeep;
}

void finish_partrain_wait(Connection& connection, SessionContext& context, bool timed_out) {
  if (!connection.parked) return;
  const Request request = std::move(*connection.parked);
  const int64_t deadline_ns = connection.parked_until_ns;
  connection.parked.reset();
  connection.parked_until_ns = -1;
  KeySpace& keys = context.keys;
  if (timed_out) {
    keys.cancel_wait(connection.id);
    std::vector<std::string> missing;
    const std::vector<std::string> wanted =
        request.op == Op::kGet ? std::vector<std::string>{request.key} : request.keys;
    for (const std::string& key : wanted) {
      if (!keys.contains(key)) missing.push_back(key);
    }
    send_reply(connection, request.op,
               error_reply(ReplyCode::kTimeout, timeout_message(missing, request.timeout_ms)));
    return;
  }
  // The keys are there now: served as a fresh request, under its first deadline should it park
  // again.
  execute(connection, context, request);
  if (connection.parked) connection.parked_until_ns = deadline_ns;
}

}  // namespace partrain::rendezvous::detail
