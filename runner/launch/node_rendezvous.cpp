#include "runner/launch/node_rendezvous.h"

#include <fmt/ranges.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "core/clock.h"
#include "core/json_dump.h"
#include "core/log.h"
#include "runner/launch/node_watch.h"

namespace partrain::launch {
namespace {

constexpr std::string_view kPrefix = "partrain/launch/";
// Waits are cut into slices this long so Ctrl-C is noticed while nodes gather.
constexpr auto kSlice = std::chrono::milliseconds(250);
// How long node 0, stopped while the nodes gather, keeps the store up for them to read why.
constexpr auto kStopNoticeTime = std::chrono::seconds(2);

std::string key(std::string_view name) { return fmt::format("{}{}", kPrefix, name); }
std::string node_key(int node_rank) { return key(fmt::format("node/{}", node_rank)); }
std::string flight_key(int node_rank) { return key(fmt::format("flight/{}", node_rank)); }

std::string rank_range(int node_rank, int nproc) {
  int first = node_rank * nproc;
  return nproc == 1 ? fmt::format("rank {}", first)
                    : fmt::format("ranks {}-{}", first, first + nproc - 1);
}

Status interrupted_status() { return failed("interrupted while waiting for the other nodes"); }

}  // namespace

// A node's record in the store: "host\npid\nnproc\nnnodes\nrdzv_id\n" (its launcher's pid,
// its --nproc-per-node, --nnodes and --rdzv-id).
struct NodeRecord {
  std::string host;
  pid_t pid = 0;
  std::string nproc;
  std::string nnodes;
  std::string rdzv_id;
};

static std::string node_record_text(const RendezvousPlan& plan, pid_t pid) {
  return fmt::format("{}\n{}\n{}\n{}\n{}\n", plan.host, pid, plan.nproc_per_node, plan.nnodes,
                     plan.rdzv_id);
}

static NodeRecord parse_node_record(const std::string& text) {
  NodeRecord record;
  std::istringstream in(text);
  std::string pid;
  std::getline(in, record.host);
  std::getline(in, pid);
  std::getline(in, record.nproc);
  std::getline(in, record.nnodes);
  std::getline(in, record.rdzv_id);
  record.pid = static_cast<pid_t>(std::atoll(pid.c_str()));
  return record;
}

StatusOr<std::unique_ptr<NodeRendezvous>> NodeRendezvous::join(const RendezvousPlan& plan,
                                                               const InterruptCheck& interrupted,
                                                               std::optional<int>& stop_signal) {
  std::unique_ptr<NodeRendezvous> rdzv(new NodeRendezvous(plan));
  rdzv->port_ = plan.master_port;
  if (plan.node_rank == 0) {
    rendezvous::StoreServerOptions options;
    // Built-in workloads speak partrain's protocol only; a command may be a torch program, whose
    // TCPStore clients find the store on MASTER_PORT as under torchrun.
    options.serve_tcpstore = plan.workload.empty();
    // The launcher's own descriptors: its workers' pipes and trace connections, the collector.
    options.reserved_fds = 64 + 8 * static_cast<size_t>(plan.nproc_per_node);
    options.watched_prefix = std::string(kHeartbeatPrefix);
    ASSIGN_OR_RETURN(rdzv->server_, rendezvous::StoreServer::start(plan.bind_host, plan.master_port,
                                                                   plan.token, options));
    rdzv->port_ = rdzv->server_->port();
  }
  if (plan.nnodes > 1) {
    RETURN_IF_ERROR(rdzv->connect(interrupted));
    RETURN_IF_ERROR(rdzv->register_and_wait(interrupted, stop_signal));
    rdzv->joined_ns_ = monotonic_ns();
    if (plan.node_rank != 0) {
      ASSIGN_OR_RETURN(rdzv->heartbeat_, NodeHeartbeat::start(plan.master_addr, rdzv->port_,
                                                              plan.token, plan.node_rank));
    }
  }
  return rdzv;
}

Status NodeRendezvous::connect(const InterruptCheck& interrupted) {
  const auto deadline = std::chrono::steady_clock::now() + plan_.timeout;
  while (true) {
    auto left = std::chrono::duration_cast<Nanoseconds>(deadline - std::chrono::steady_clock::now());
    Nanoseconds attempt = std::clamp<Nanoseconds>(left, Nanoseconds(1), std::chrono::seconds(1));
    auto client = rendezvous::StoreClient::connect(plan_.master_addr, port_, plan_.token, attempt);
    if (client.is_ok()) {
      client_ = std::move(client).value();
      return Status::ok();
    }
    if (client.status().code() != StatusCode::kTimeout) return client.status();
    if (interrupted()) return interrupted_status();
    if (std::chrono::steady_clock::now() >= deadline) {
      return timeout_error(
          "node {} cannot reach the rendezvous store at {}:{} (node 0's launcher) after {}; still "
          "missing: node 0 ({}). Start `partrain launch --node-rank 0` there, check --master-addr "
          "and --master-port, or raise --rdzv-timeout",
          plan_.node_rank, plan_.master_addr, port_, format_duration(plan_.timeout),
          rank_range(0, plan_.nproc_per_node));
    }
  }
}

Status NodeRendezvous::register_and_wait(const InterruptCheck& interrupted,
                                         std::optional<int>& stop_signal) {
  // A node rank taken twice (a copy-pasted command line) would run two sets of the same ranks.
  ASSIGN_OR_RETURN(int64_t claims, client_->add(key(fmt::format("claim/{}", plan_.node_rank)), 1));
  if (claims > 1 && !claim_left_behind()) {
    return invalid_argument(
        "--node-rank {} has already joined the rendezvous at {}:{}: give each of the --nnodes {} "
        "launchers its own --node-rank, 0 to {}",
        plan_.node_rank, plan_.master_addr, port_, plan_.nnodes, plan_.nnodes - 1);
  }
  if (plan_.node_rank == 0) RETURN_IF_ERROR(client_->set(key("run_id"), run_id_));
  RETURN_IF_ERROR(client_->set(key(fmt::format("workload/{}", plan_.node_rank)), plan_.workload));
  RETURN_IF_ERROR(client_->set(node_key(plan_.node_rank), node_record_text(plan_, ::getpid())));
  // Another job's launcher, or one given another --nnodes, is told at once (it would otherwise
  // wait for nodes that never come, or join a world that is not its job's): against node 0's
  // record when it is there, and node 0 hears of it while it waits.
  if (plan_.node_rank != 0) {
    ASSIGN_OR_RETURN(bool zero_joined, client_->check({node_key(0)}));
    if (zero_joined) {
      ASSIGN_OR_RETURN(std::string zero_info, client_->get(node_key(0), kSlice));
      const NodeRecord zero = parse_node_record(zero_info);
      if (Status job = compare_job(0, zero); !job.is_ok()) return say_disagreement(job);
    }
  }
  // Node 0 waits for every node's record and then says so in one key the others wait for: a
  // request per node per slice, where every node waiting for every record cost N^2.
  std::vector<std::string> keys;
  if (plan_.node_rank == 0) {
    for (int node = 0; node < plan_.nnodes; ++node) keys.push_back(node_key(node));
  } else {
    keys.push_back(key("all_joined"));
  }
  const auto started = std::chrono::steady_clock::now();
  while (true) {
    Status all = client_->wait(keys, kSlice);
    if (all.is_ok()) break;
    if (all.code() != StatusCode::kTimeout) {
      if (plan_.node_rank != 0) return node_zero_left(all);
      return all;
    }
    if (interrupted()) return announce_stop(stop_signal.value_or(SIGINT));
    if (std::optional<Status> stopped = stopped_elsewhere(stop_signal)) return *stopped;
    if (plan_.node_rank == 0) {
      if (std::optional<Status> disagreed = disagreement_while_waiting()) return *disagreed;
    }
    auto waited = std::chrono::steady_clock::now() - started;
    if (waited >= plan_.timeout) return missing_nodes_error(plan_.timeout);
  }
  if (plan_.node_rank == 0) RETURN_IF_ERROR(client_->set(key("all_joined"), "1"));
  RETURN_IF_ERROR(agree());
  ASSIGN_OR_RETURN(run_id_, client_->get(key("run_id"), plan_.timeout));
  log::debug("node {}: all {} nodes joined the rendezvous, run {}", plan_.node_rank, plan_.nnodes,
             run_id_);
  return Status::ok();
}

Status NodeRendezvous::announce_stop(int signal) {
  const std::string reason = fmt::format("{}\n{}\n{}\n", plan_.node_rank, signal, plan_.host);
  if (client_->add(key("stop_count"), 1).is_ok()) (void)client_->set(key("stop"), reason);
  (void)client_->set(key(fmt::format("stop_read/{}", plan_.node_rank)), "1");
  keep_store_for_the_stop_notice();
  return failed("stopped by {} while the nodes gathered; the other nodes were told",
                signal_name(signal));
}

std::optional<Status> NodeRendezvous::stopped_elsewhere(std::optional<int>& stop_signal) {
  auto stopped = client_->check({key("stop")});
  if (!stopped.is_ok() || !*stopped) return std::nullopt;
  auto text = client_->get(key("stop"), kSlice);
  (void)client_->set(key(fmt::format("stop_read/{}", plan_.node_rank)), "1");
  keep_store_for_the_stop_notice();
  std::istringstream in(text.is_ok() ? *text : "");
  std::string node, signal, host;
  std::getline(in, node);
  std::getline(in, signal);
  std::getline(in, host);
  const int number = std::atoi(signal.c_str());
  stop_signal = number > 0 ? number : SIGTERM;
  return failed("node {} (host {}) was stopped by {} while the nodes gathered: stopping too",
                node, host, signal_name(*stop_signal));
}

// Node 0's store goes with its launcher: kept up until every node that joined has read why the
// nodes stop (each says so), for at most a few seconds.
void NodeRendezvous::keep_store_for_the_stop_notice() {
  if (plan_.node_rank != 0) return;
  std::vector<std::string> read_it;
  for (int node = 1; node < plan_.nnodes; ++node) {
    auto joined = client_->check({node_key(node)});
    if (joined.is_ok() && *joined) {
      read_it.push_back(key(fmt::format("stop_read/{}", node)));
    }
  }
  if (!read_it.empty()) (void)client_->wait(read_it, kStopNoticeTime);
}

Status NodeRendezvous::node_zero_left(const Status& why) {
  return unavailable("node 0's launcher at {}:{} went away while the nodes gathered ({}): "
                     "stopping",
                     plan_.master_addr, port_, why.message());
}

// What the nodes must agree on: the same --nproc-per-node (torchrun requires it; ranks are
// numbered on that basis) and the same workload. Each node compares itself with node 0 alone (N
// requests in all, where comparing with every node cost N^2) and says it has; the first that
// disagrees says so too. Node 0 waits for all, then gives its verdict, naming the disagreement
// from its side, and keeps the store up until the others have read it.
Status NodeRendezvous::agree() {
  ASSIGN_OR_RETURN(std::string zero_info, client_->get(node_key(0), kSlice));
  ASSIGN_OR_RETURN(std::string zero_workload, client_->get(key("workload/0"), kSlice));
  const NodeRecord zero = parse_node_record(zero_info);
  peers_ = {Peer{zero.host, zero.pid}};
  if (plan_.node_rank != 0) {
    const Status disagreement = compare_with(0, zero, zero_workload);
    if (!disagreement.is_ok()) return say_disagreement(disagreement);
    RETURN_IF_ERROR(client_->set(key(fmt::format("checked/{}", plan_.node_rank)), "1"));
    RETURN_IF_ERROR(wait_in_slices({key("verdict")}));
    ASSIGN_OR_RETURN(std::string verdict, client_->get(key("verdict"), kSlice));
    (void)client_->set(key(fmt::format("verdict_read/{}", plan_.node_rank)), "1");
    if (verdict != "ok") return invalid_argument("{}", verdict);
    return Status::ok();
  }
  std::vector<std::string> checked;
  for (int node = 1; node < plan_.nnodes; ++node) {
    checked.push_back(key(fmt::format("checked/{}", node)));
  }
  RETURN_IF_ERROR(wait_in_slices(checked));
  // The names and pids of every node, for naming one that is lost later.
  for (int node = 1; node < plan_.nnodes; ++node) {
    ASSIGN_OR_RETURN(std::string info, client_->get(node_key(node), kSlice));
    const NodeRecord record = parse_node_record(info);
    peers_.push_back(Peer{record.host, record.pid});
  }
  ASSIGN_OR_RETURN(bool disagreed, client_->check({key("disagreeing")}));
  if (!disagreed) return client_->set(key("verdict"), "ok");
  ASSIGN_OR_RETURN(std::string node_text, client_->get(key("disagreeing"), kSlice));
  const int node = std::atoi(node_text.c_str());
  ASSIGN_OR_RETURN(std::string info, client_->get(node_key(node), kSlice));
  ASSIGN_OR_RETURN(std::string workload,
                   client_->get(key(fmt::format("workload/{}", node)), kSlice));
  const Status disagreement = compare_with(node, parse_node_record(info), workload);
  (void)client_->set(key("verdict"), disagreement.message());
  std::vector<std::string> read_it;
  for (int other = 1; other < plan_.nnodes; ++other) {
    if (other != node) read_it.push_back(key(fmt::format("verdict_read/{}", other)));
  }
  if (!read_it.empty()) (void)client_->wait(read_it, kStopNoticeTime);
  return disagreement;
}

// This node's job (--rdzv-id, --nnodes) against `node`'s record: the disagreement, or ok.
Status NodeRendezvous::compare_job(int node, const NodeRecord& theirs) const {
  if (!theirs.rdzv_id.empty() && theirs.rdzv_id != plan_.rdzv_id) {
    return invalid_argument(
        "node {} joined the rendezvous at {}:{} with --rdzv-id {} but node {} with --rdzv-id {}: "
        "launchers of another job reached this store (two jobs on one --master-port?); give the "
        "nodes of one job the same --rdzv-id and each job its own --master-port",
        node, plan_.master_addr, port_, theirs.rdzv_id, plan_.node_rank, plan_.rdzv_id);
  }
  if (!theirs.nnodes.empty() && theirs.nnodes != std::to_string(plan_.nnodes)) {
    return invalid_argument(
        "node {} was started with --nnodes {} but node {} with --nnodes {}: every node must be "
        "given the same --nnodes",
        node, theirs.nnodes, plan_.node_rank, plan_.nnodes);
  }
  return Status::ok();
}

// This node's job, --nproc-per-node and workload against `node`'s: the disagreement, or ok.
Status NodeRendezvous::compare_with(int node, const NodeRecord& theirs,
                                    const std::string& workload) const {
  RETURN_IF_ERROR(compare_job(node, theirs));
  const std::string& nproc = theirs.nproc;
  if (nproc != std::to_string(plan_.nproc_per_node)) {
    return invalid_argument(
        "node {} runs {} worker{} but node {} runs {}: every node must use the same "
        "--nproc-per-node",
        node, nproc, nproc == "1" ? "" : "s", plan_.node_rank, plan_.nproc_per_node);
  }
  if (workload != plan_.workload) return workload_mismatch(node, workload);
  return Status::ok();
}

// A node that disagrees says so in the store (the first of them names itself), for node 0 to
// give its verdict, and returns the disagreement.
Status NodeRendezvous::say_disagreement(const Status& disagreement) {
  auto order = client_->add(key("disagreeing_count"), 1);
  if (order.is_ok() && *order == 1) {
    (void)client_->set(key("disagreeing"), std::to_string(plan_.node_rank));
  }
  // Node 0 may close the store as this reply is on its way: the disagreement is said either way.
  (void)client_->set(key(fmt::format("checked/{}", plan_.node_rank)), "1");
  return disagreement;
}

// Node 0, while nodes are still missing: one that has joined and disagrees (another job's,
// another --nnodes) ends the wait, named from node 0's side.
std::optional<Status> NodeRendezvous::disagreement_while_waiting() {
  auto disagreed = client_->check({key("disagreeing")});
  if (!disagreed.is_ok() || !*disagreed) return std::nullopt;
  auto node_text = client_->get(key("disagreeing"), kSlice);
  if (!node_text.is_ok()) return std::nullopt;
  const int node = std::atoi(node_text->c_str());
  auto info = client_->get(node_key(node), kSlice);
  if (!info.is_ok()) return std::nullopt;
  Status job = compare_job(node, parse_node_record(*info));
  if (job.is_ok()) return std::nullopt;  // another kind of disagreement: agree() names it
  (void)client_->set(key("verdict"), job.message());
  return job;
}

// Waits for `keys` in slices, as long as the rendezvous may take.
Status NodeRendezvous::wait_in_slices(const std::vector<std::string>& keys) {
  const auto until = std::chrono::steady_clock::now() + plan_.timeout;
  while (true) {
    Status waited = client_->wait(keys, kSlice);
    if (waited.is_ok() || waited.code() != StatusCode::kTimeout) return waited;
    if (std::chrono::steady_clock::now() >= until) return waited;
  }
}

// A node rank claimed before by a launcher of this host that is gone (stopped while the others
// waited, then started again) may be taken over; one alive, or on another host, may not.
bool NodeRendezvous::claim_left_behind() {
  auto joined = client_->check({node_key(plan_.node_rank)});
  if (!joined.is_ok() || !*joined) return false;
  auto info = client_->get(node_key(plan_.node_rank), kSlice);
  if (!info.is_ok()) return false;
  const NodeRecord record = parse_node_record(*info);
  const pid_t pid = record.pid;
  if (record.host != plan_.host) return false;
  if (pid <= 0 || ::kill(pid, 0) == 0 || errno != ESRCH) return false;  // alive (or not ours)
  log::info("node {}: taking over from the launcher that joined as node {} and is gone (pid {})",
            plan_.node_rank, plan_.node_rank, pid);
  return true;
}

// Workers of different workloads would meet in collectives of different sizes (Gloo aborts on
// the first): refused at the rendezvous, naming each field that differs.
Status NodeRendezvous::workload_mismatch(int node, const std::string& theirs) const {
  auto describe = [](const std::string& workload) {
    return workload.empty() ? std::string("a command") : std::string("the built-in workload");
  };
  const nlohmann::json mine = nlohmann::json::parse(plan_.workload, nullptr, false);
  const nlohmann::json other = nlohmann::json::parse(theirs, nullptr, false);
  if (plan_.workload.empty() || theirs.empty() || mine.is_discarded() || other.is_discarded()) {
    return invalid_argument(
        "node {} runs {} but node {} runs {}: every node must run the same "
        "one",
        node, describe(theirs), plan_.node_rank, describe(plan_.workload));
  }
  std::vector<std::string> differences;
  for (const nlohmann::json& change : nlohmann::json::diff(other, mine)) {
    const std::string path = change.value("path", "");
    const nlohmann::json::json_pointer pointer(path);
    auto at = [&](const nlohmann::json& j) {
      return j.contains(pointer) ? j.at(pointer).dump() : std::string("nothing");
    };
    differences.push_back(fmt::format("{} {} there, {} here", path.empty() ? "/" : path.substr(1),
                                      at(other), at(mine)));
  }
  return invalid_argument(
      "node {}'s workload differs from node {}'s: {}; give every node the same workload flags",
      node, plan_.node_rank, fmt::join(differences, "; "));
}

Status NodeRendezvous::missing_nodes_error(Nanoseconds waited) {
  std::vector<std::string> missing;
  for (int node = 0; node < plan_.nnodes; ++node) {
    ASSIGN_OR_RETURN(bool joined, client_->check({node_key(node)}));
    if (!joined) {
      missing.push_back(fmt::format("node {} ({})", node, rank_range(node, plan_.nproc_per_node)));
    }
  }
  return timeout_error(
      "rendezvous at {}:{} timed out after {}: {} of {} nodes joined; missing: {}. Start `partrain "
      "launch --nnodes {} --node-rank N --master-addr {} --master-port {} --token <the same "
      "token>` "
      "on each missing node, "
      "or raise --rdzv-timeout",
      plan_.master_addr, port_, format_duration(waited),
      plan_.nnodes - static_cast<int>(missing.size()), plan_.nnodes, fmt::join(missing, ", "),
      plan_.nnodes, plan_.master_addr, port_);
}

RankFailure NodeRendezvous::publish_failure(const RankFailure& local) {
  if (!client_ || store_lost_) return local;
  // A node that just died takes its peers' collectives down with it: the loss is the cause.
  RankFailure cause = local;
  if (std::optional<RankFailure> lost = find_lost_node_here(/*disconnect_is_enough=*/true)) {
    cause = *lost;
  }
  auto order = client_->add(key("failure_count"), 1);
  if (!order.is_ok()) {
    // The store is gone with node 0: that is why this rank failed.
    store_lost_ = true;
    return lost_node_failure(0, "its rendezvous store stopped answering (" +
                                    order.status().message() + ")");
  }
  if (*order == 1) {
    if (Status s = client_->set(key("failure"), encode_failure(cause)); !s.is_ok()) {
      log::warn("cannot tell the other nodes about the failure: {}", s.message());
    }
    return cause;
  }
  // Another node failed first: its failure is the root cause and ours a consequence.
  auto first = client_->get(key("failure"), std::chrono::seconds(5));
  if (first.is_ok()) {
    if (auto decoded = decode_failure(*first); decoded.is_ok()) return *decoded;
  }
  return cause;
}

void NodeRendezvous::publish_stop(int signal) {
  if (!client_ || store_lost_) return;
  RankFailure stopped = lost_node_failure(
      plan_.node_rank, fmt::format("its launcher was stopped by {}", signal_name(signal)));
  stopped.status = ExitStatus{true, signal};
  (void)publish_failure(stopped);
}

std::optional<RankFailure> NodeRendezvous::poll_failure() {
  if (!client_ || store_lost_) return std::nullopt;
  if (plan_.node_rank == 0 && !loss_published_) {
    if (std::optional<RankFailure> lost = find_lost_node_here(/*disconnect_is_enough=*/false)) {
      // Published for the other nodes, unless a failure was published first.
      loss_published_ = true;
      RankFailure cause = publish_failure(*lost);
      return cause;
    }
  }
  auto published = client_->check({key("failure")});
  if (!published.is_ok()) return store_gone_for_long(published.status());
  store_unreachable_since_ns_ = -1;
  if (!*published) return std::nullopt;
  auto text = client_->get(key("failure"), kSlice);
  if (!text.is_ok()) return std::nullopt;
  auto decoded = decode_failure(*text);
  if (!decoded.is_ok()) return std::nullopt;
  return std::move(decoded).value();
}

// The store stopped answering: node 0 is gone, or the network to it is. A connection closed or
// refused (its host's kernel answered for a dead launcher) is given kReconnectGrace, one that
// just went silent kSilenceLimit, to come back (a reconnect is tried on every poll) before node 0
// is named lost.
std::optional<RankFailure> NodeRendezvous::store_gone_for_long(const Status& why) {
  const int64_t now = monotonic_ns();
  if (store_unreachable_since_ns_ < 0) {
    store_unreachable_since_ns_ = now;
    store_gone_limit_ = why.code() == StatusCode::kTimeout ? Nanoseconds(kSilenceLimit)
                                                           : Nanoseconds(kReconnectGrace);
  }
  auto again = rendezvous::StoreClient::connect(plan_.master_addr, port_, plan_.token,
                                                std::chrono::milliseconds(200));
  if (again.is_ok() && (*again)->check({key("failure")}).is_ok()) {
    client_ = std::move(*again);
    store_unreachable_since_ns_ = -1;
    return std::nullopt;
  }
  if (Nanoseconds(now - store_unreachable_since_ns_) < store_gone_limit_) return std::nullopt;
  store_lost_ = true;
  return lost_node_failure(
      0, fmt::format("its rendezvous store at {}:{} has not answered for {} ({})",
                     plan_.master_addr, port_,
                     format_duration(Nanoseconds(now - store_unreachable_since_ns_)),
                     why.message()));
}

std::optional<RankFailure> NodeRendezvous::find_lost_node_here(bool disconnect_is_enough) {
  if (!server_ || plan_.nnodes < 2 || joined_ns_ == 0) return std::nullopt;
  std::optional<LostNode> lost =
      find_lost_node(server_->watched_keys(), plan_.nnodes, monotonic_ns(), joined_ns_,
                     disconnect_is_enough);
  if (!lost) return std::nullopt;
  return lost_node_failure(lost->node_rank, lost->why);
}

RankFailure NodeRendezvous::lost_node_failure(int node_rank, const std::string& why) const {
  RankFailure failure;
  failure.node_rank = node_rank;
  failure.rank = node_rank * plan_.nproc_per_node;
  failure.ranks_lost = plan_.nproc_per_node;
  if (node_rank == plan_.node_rank) {
    // This node, stopped: a node other than 0 never read its own record back into peers_.
    failure.host = plan_.host;
    failure.pid = ::getpid();
  } else if (static_cast<size_t>(node_rank) < peers_.size()) {
    failure.host = peers_[node_rank].host;
    failure.pid = peers_[node_rank].pid;
  } else {
    failure.host = node_rank == 0 ? plan_.master_addr : "?";
  }
  failure.status = ExitStatus{false, 1};
  failure.elapsed = Nanoseconds(monotonic_ns() - joined_ns_);
  failure.node_lost = why;
  return failure;
}

void NodeRendezvous::publish_flight_dumps(const std::vector<profiler::FlightDump>& dumps) {
  if (!client_ || store_lost_ || dumps.empty()) return;
  std::string value = "[";
  for (const profiler::FlightDump& dump : dumps) {
    if (value.size() > 1) value += ',';
    value += profiler::flight_dump_to_json(dump);
  }
  value += ']';
  if (Status s = client_->set(flight_key(plan_.node_rank), value); !s.is_ok()) {
    log::warn("cannot hand this node's flight-recorder dumps to node 0: {}", s.message());
  }
}

std::vector<profiler::FlightDump> NodeRendezvous::remote_flight_dumps() {
  std::vector<profiler::FlightDump> dumps;
  if (!client_ || store_lost_ || plan_.node_rank != 0) return dumps;
  for (int node = 1; node < plan_.nnodes; ++node) {
    auto published = client_->check({flight_key(node)});
    if (!published.is_ok() || !*published) continue;  // no dumps there, or the store is gone
    auto value = client_->get(flight_key(node), kSlice);
    nlohmann::json list = value.is_ok() ? nlohmann::json::parse(*value, nullptr, false)
                                        : nlohmann::json();
    if (!list.is_array()) {
      log::warn("node {}'s flight-recorder dumps do not read; its ranks are left out of the "
                "diagnosis", node);
      continue;
    }
    for (const nlohmann::json& item : list) {
      auto dump = profiler::flight_dump_from_json(dump_json(item));
      if (dump.is_ok()) {
        dumps.push_back(std::move(*dump));
      } else {
        log::warn("a flight-recorder dump from node {} does not read: {}", node,
                  dump.status().message());
      }
    }
  }
  return dumps;
}

void NodeRendezvous::finish(Nanoseconds bound, const InterruptCheck& interrupted) {
  if (heartbeat_ && !store_lost_) heartbeat_->finish();  // leaving now is not a loss
  heartbeat_.reset();
  if (!client_ || store_lost_) return;
  auto done = client_->add(key("done"), 1);
  if (!done.is_ok() || plan_.node_rank != 0) return;
  const auto deadline = std::chrono::steady_clock::now() + bound;
  int64_t count = *done;
  // Nodes lost or gone are not waited for: only those whose heartbeat says they still run.
  auto others_running = [&] {
    return server_ && nodes_still_running(server_->watched_keys(), plan_.nnodes, monotonic_ns(),
                                          joined_ns_) > 0;
  };
  while (count < plan_.nnodes && std::chrono::steady_clock::now() < deadline && !interrupted() &&
         others_running()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    auto now_done = client_->add(key("done"), 0);
    if (!now_done.is_ok()) return;
    count = *now_done;
  }
  // Lost nodes were named in the run's summary; one still running is cut off here.
  if (count < plan_.nnodes && others_running()) {
    log::warn("closing the rendezvous store with {} of {} nodes done", count, plan_.nnodes);
  }
}

}  // namespace partrain::launch
