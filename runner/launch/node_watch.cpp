#include "runner/launch/node_watch.h"

#include <fmt/format.h>

namespace partrain::launch {
namespace {

int64_t ns(Nanoseconds d) { return d.count(); }

}  // namespace

std::optional<LostNode> find_lost_node(const std::map<std::string, rendezvous::KeyLiveness>& beats,
                                       int nnodes, int64_t now_ns, int64_t watching_since_ns,
                                       bool disconnect_is_enough) {
  for (int node = 1; node < nnodes; ++node) {
    auto it = beats.find(std::to_string(node));
    if (it == beats.end()) {
      // It joined the rendezvous but never beat: gone before its first heartbeat.
      if (now_ns - watching_since_ns >= ns(kSilenceLimit)) {
        return LostNode{node, fmt::format("it sent no heartbeat in {}",
                                          format_duration(kSilenceLimit))};
      }
      continue;
    }
    const rendezvous::KeyLiveness& beat = it->second;
    if (beat.value == kHeartbeatDone) continue;
    if (!beat.writer_connected &&
        (disconnect_is_enough || now_ns - beat.disconnected_ns >= ns(kReconnectGrace))) {
      return LostNode{node, "its launcher's connection to the rendezvous store closed (the "
                            "launcher was killed, or its host went down)"};
    }
    if (now_ns - beat.last_write_ns >= ns(kSilenceLimit)) {
      return LostNode{node, fmt::format("no heartbeat for {} (its host froze, or the network to it "
                                        "is cut)",
                                        format_duration(Nanoseconds(now_ns - beat.last_write_ns)))};
    }
  }
  return std::nullopt;
}

int nodes_still_running(const std::map<std::string, rendezvous::KeyLiveness>& beats, int nnodes,
                        int64_t now_ns, int64_t watching_since_ns) {
  int running = 0;
  for (int node = 1; node < nnodes; ++node) {
    auto it = beats.find(std::to_string(node));
    if (it == beats.end()) {
      if (now_ns - watching_since_ns < ns(kSilenceLimit)) ++running;
      continue;
    }
    const rendezvous::KeyLiveness& beat = it->second;
    if (beat.value != kHeartbeatDone && beat.writer_connected &&
        now_ns - beat.last_write_ns < ns(kSilenceLimit)) {
      ++running;
    }
  }
  return running;
}

}  // namespace partrain::launch
