#include "runner/launch/node_heartbeat.h"

#include "core/log.h"
#include "core/thread_start.h"
#include "runner/launch/node_watch.h"
#include "runner/rendezvous/store_client.h"

namespace partrain::launch {

StatusOr<std::unique_ptr<NodeHeartbeat>> NodeHeartbeat::start(std::string host, uint16_t port,
                                                              std::string token, int node_rank) {
  std::unique_ptr<NodeHeartbeat> heartbeat(
      new NodeHeartbeat(std::move(host), port, std::move(token), node_rank));
  if (Status started = start_thread(heartbeat->thread_, [raw = heartbeat.get()] { raw->loop(); });
      !started.is_ok()) {
    heartbeat->stopping_ = true;  // no thread to stop
    return failed("cannot start node {}'s heartbeat: {}; {}", node_rank, started.message(),
                  kThreadRefusedRemedy);
  }
  return heartbeat;
}

NodeHeartbeat::NodeHeartbeat(std::string host, uint16_t port, std::string token, int node_rank)
    : host_(std::move(host)),
      port_(port),
      token_(std::move(token)),
      key_(fmt::format("{}{}", kHeartbeatPrefix, node_rank)) {}

void NodeHeartbeat::loop() {
  std::unique_ptr<rendezvous::StoreClient> client;
  uint64_t beat = 0;
  while (true) {
    bool done = false;
    {
      std::unique_lock lock(mutex_);
      if (beat > 0) wake_.wait_for(lock, kHeartbeatInterval, [&] { return stopping_; });
      if (stopping_ && !say_done_) return;
      done = stopping_;
    }
    if (!client) {
      // A short timeout: a store that stopped answering is the supervisor's to judge.
      auto connected = rendezvous::StoreClient::connect(host_, port_, token_,
                                                        std::chrono::seconds(1));
      if (connected.is_ok()) client = std::move(*connected);
    }
    if (client) {
      const std::string value = done ? std::string(kHeartbeatDone) : std::to_string(beat);
      if (Status set = client->set(key_, value); !set.is_ok()) {
        log::debug("heartbeat to the rendezvous store failed: {}", set.message());
        client.reset();
      }
    }
    ++beat;
    if (done) return;
  }
}

void NodeHeartbeat::stop(bool say_done) {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
    say_done_ = say_done;
  }
  wake_.notify_all();
  thread_.join();
}

void NodeHeartbeat::finish() { stop(true); }

NodeHeartbeat::~NodeHeartbeat() { stop(false); }

}  // namespace partrain::launch
