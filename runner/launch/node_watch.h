// How the launchers of a multi-node run notice that one of them is gone. Every node but node 0
// sets its heartbeat key in the store every kHeartbeatInterval; node 0, whose process holds the
// store, reads when each was last set and whether its writer's connection is still open, and
// names a node lost when its connection closed (a launcher killed, a host rebooted) or it fell
// silent (a host frozen or cut off). Node 0's own loss is noticed by the others as a store that
// stops answering.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "core/duration.h"
#include "runner/rendezvous/key_liveness.h"

namespace partrain::launch {

inline constexpr std::string_view kHeartbeatPrefix = "partrain/launch/heartbeat/";
inline constexpr auto kHeartbeatInterval = std::chrono::milliseconds(500);
// A node silent this long is lost: six missed heartbeats, so a busy host is not taken for a
// dead one, and the loss is named within 5 s.
inline constexpr auto kSilenceLimit = std::chrono::seconds(3);
// A closed heartbeat connection may be a reconnect in progress: given this long.
inline constexpr auto kReconnectGrace = std::chrono::seconds(1);
// The value a node sets when its workers are done: its leaving is not a loss.
inline constexpr std::string_view kHeartbeatDone = "done";

struct LostNode {
  int node_rank = 0;
  std::string why;
};

// Node 0's judgement: the first node of 1..nnodes-1 that is lost at now_ns, judged from the
// heartbeats the store watched since watching_since_ns. `disconnect_is_enough`: a closed
// connection counts at once (a local rank just failed, likely because that node died).
std::optional<LostNode> find_lost_node(const std::map<std::string, rendezvous::KeyLiveness>& beats,
                                       int nnodes, int64_t now_ns, int64_t watching_since_ns,
                                       bool disconnect_is_enough);

// How many of nodes 1..nnodes-1 may still be running their workers: not done, and neither
// disconnected nor silent. Node 0 waits for those alone before it closes the store.
int nodes_still_running(const std::map<std::string, rendezvous::KeyLiveness>& beats, int nnodes,
                        int64_t now_ns, int64_t watching_since_ns);

}  // namespace partrain::launch
