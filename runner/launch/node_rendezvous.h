// The launchers' own use of the rendezvous store: node 0 hosts it; with several nodes every
// launcher registers (host, pid, its ranks) and waits for the others (a node stopped by Ctrl-C
// or SIGTERM meanwhile stops them all), a failing node publishes its root cause for the others
// to stop on, a node that disappears is named (node_watch.h), and node 0 keeps the store up until
// all are done.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/duration.h"
#include "core/status.h"
#include "profiler/flight/flight_dump.h"
#include "runner/launch/failure_summary.h"
#include "runner/launch/node_heartbeat.h"
#include "runner/rendezvous/store_client.h"
#include "runner/rendezvous/store_server.h"

namespace partrain::launch {

struct RendezvousPlan {
  std::string master_addr;
  uint16_t master_port = 0;  // 0: a free port (single node)
  std::string bind_host;     // node 0's listening address
  std::string token;
  int nnodes = 1;
  int node_rank = 0;
  int nproc_per_node = 1;
  // torchrun's --rdzv-id as given ("none" when not): launchers of one job give the same one, and
  // one of another job that reached this store (a port shared by two jobs) is told so.
  std::string rdzv_id = "none";
  std::string host;    // this node's name, for messages
  std::string run_id;  // node 0's becomes everyone's
  // The built-in workload (its PARTRAIN_WORKLOAD_CONFIG JSON), which every node must run alike;
  // empty for a command, which may differ from node to node.
  std::string workload;
  Nanoseconds timeout = std::chrono::seconds(300);
};

// A node's record in the store (node_rendezvous.cpp).
struct NodeRecord;

// Asked between waits: whether the launcher got SIGINT/SIGTERM and should give up.
using InterruptCheck = std::function<bool()>;

class NodeRendezvous {
 public:
  // Node 0 starts the store (a port in use is kUnavailable naming it); with nnodes > 1 every node
  // then connects, registers and waits for all nodes (kTimeout naming addr:port and the missing
  // nodes and ranks). `interrupted` sets stop_signal when this launcher got SIGINT/SIGTERM; a node
  // interrupted while the nodes gather tells the others, which give up too, with stop_signal set
  // to its signal and a status saying whose it was.
  static StatusOr<std::unique_ptr<NodeRendezvous>> join(const RendezvousPlan& plan,
                                                        const InterruptCheck& interrupted,
                                                        std::optional<int>& stop_signal);

  uint16_t port() const { return port_; }
  const std::string& run_id() const { return run_id_; }
  bool multi_node() const { return client_ != nullptr; }

  // First publisher wins; returns the run's root cause (possibly another node's, or a node lost
  // just before, whose death likely failed the local rank).
  RankFailure publish_failure(const RankFailure& local);
  // This node's launcher was stopped (Ctrl-C, SIGTERM) while its workers ran: the others are told
  // and stop theirs, as for a failure, rather than wait in collectives that cannot complete.
  void publish_stop(int signal);
  // Another node's published failure, or a node lost (node 0: a silent or disconnected
  // heartbeat, published for the others; the others: a store that stops answering).
  std::optional<RankFailure> poll_failure();
  // A node's flight-recorder dumps, left in the store for node 0's diagnosis before the node says
  // it is done (finish), so that node 0 has them all once its finish() returns. Nothing for an
  // empty list or a single node.
  void publish_flight_dumps(const std::vector<profiler::FlightDump>& dumps);
  // Node 0, after finish(): the dumps the other nodes published; a node's that do not arrive or
  // do not read are left out with a warning (a dump is evidence, never a failure).
  std::vector<profiler::FlightDump> remote_flight_dumps();
  // This node's workers are done. Node 0 then waits (up to `bound`) for every node to say so,
  // so nobody loses the store while still reading it.
  void finish(Nanoseconds bound, const InterruptCheck& interrupted);

 private:
  struct Peer {
    std::string host;
    int64_t pid = 0;
  };

  NodeRendezvous(const RendezvousPlan& plan) : plan_(plan), run_id_(plan.run_id) {}
  Status connect(const InterruptCheck& interrupted);
  Status register_and_wait(const InterruptCheck& interrupted, std::optional<int>& stop_signal);
  // This node was interrupted while the nodes gathered: the others are told, and node 0 keeps
  // the store up briefly for them to read it.
  Status announce_stop(int signal);
  std::optional<Status> stopped_elsewhere(std::optional<int>& stop_signal);
  void keep_store_for_the_stop_notice();
  // Node 0's store went away while this node waited for the others.
  Status node_zero_left(const Status& why);
  RankFailure lost_node_failure(int node_rank, const std::string& why) const;
  std::optional<RankFailure> find_lost_node_here(bool disconnect_is_enough);
  std::optional<RankFailure> store_gone_for_long(const Status& why);
  bool claim_left_behind();
  Status agree();
  Status compare_job(int node, const NodeRecord& theirs) const;
  Status compare_with(int node, const NodeRecord& theirs, const std::string& workload) const;
  Status say_disagreement(const Status& disagreement);
  std::optional<Status> disagreement_while_waiting();
  Status wait_in_slices(const std::vector<std::string>& keys);
  Status workload_mismatch(int node, const std::string& theirs) const;
  Status missing_nodes_error(Nanoseconds waited);

  RendezvousPlan plan_;
  std::string run_id_;
  uint16_t port_ = 0;
  std::unique_ptr<rendezvous::StoreServer> server_;
  std::unique_ptr<rendezvous::StoreClient> client_;
  bool store_lost_ = false;
  std::vector<Peer> peers_;  // every node's launcher, read once all joined
  std::unique_ptr<NodeHeartbeat> heartbeat_;
  int64_t joined_ns_ = 0;
  int64_t store_unreachable_since_ns_ = -1;
  Nanoseconds store_gone_limit_{0};
  bool loss_published_ = false;
};

}  // namespace partrain::launch
