// A node's heartbeat to node 0 (node_watch.h): a thread of the launcher that sets the node's
// heartbeat key every kHeartbeatInterval over a connection of its own, so a busy supervisor or a
// slow store request never delays it, and sets it to "done" when the node's workers are done.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "core/status.h"

namespace partrain::launch {

class NodeHeartbeat {
 public:
  static StatusOr<std::unique_ptr<NodeHeartbeat>> start(std::string host, uint16_t port,
                                                        std::string token, int node_rank);
  // Says "done" (this node leaves, it is not lost) and stops.
  void finish();
  // Stops without saying "done".
  ~NodeHeartbeat();

  NodeHeartbeat(const NodeHeartbeat&) = delete;
  NodeHeartbeat& operator=(const NodeHeartbeat&) = delete;

 private:
  NodeHeartbeat(std::string host, uint16_t port, std::string token, int node_rank);
  void loop();
  void stop(bool say_done);

  std::string host_;
  uint16_t port_;
  std::string token_;
  std::string key_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool say_done_ = false;
  std::thread thread_;
};

}  // namespace partrain::launch
