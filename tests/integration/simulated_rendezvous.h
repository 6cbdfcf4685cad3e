// A rendezvous of many nodes on one machine: node 0 is the real `partrain launch` (its store in
// its own process, so its memory is the store's), nodes 1..N-1 are NodeRendezvous::join calls
// from threads of the test, each with its own connections, as N-1 launchers would make them.
// Measures the time until every node has joined and node 0's peak RSS.
#pragma once

#include <sys/resource.h>

#include <atomic>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "runner/launch/node_rendezvous.h"
#include "tests/integration/command_runner.h"
#include "tests/integration/launched_process.h"

namespace partrain::testing {

struct RendezvousScale {
  int nnodes = 0;
  double rendezvous_seconds = 0;  // first simulated node started -> the last one joined
  double store_rss_mib = 0;         // node 0's launcher: resident memory before the others came
  double store_joined_rss_mib = 0;  // ... when the last node had joined (every node connected)
  double store_peak_rss_mib = 0;    // ... at its peak (VmHWM), its own workers started

  int failed_nodes = 0;
  std::string first_error;
  Finished node_zero;
};

// A /proc/<pid>/status field in kB ("VmRSS", "VmHWM"), as MiB; 0 once the process is gone.
inline double status_mib(pid_t pid, const std::string& field) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind(field + ":", 0) == 0) return std::stod(line.substr(field.size() + 1)) / 1024.0;
  }
  return 0;
}

inline RendezvousScale simulate_rendezvous(int nnodes) {
  // Node 0 holds two connections per node (the node's and its heartbeat's), the test as many.
  rlimit limit{};
  ::getrlimit(RLIMIT_NOFILE, &limit);
  limit.rlim_cur = limit.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &limit);

  RendezvousScale scale;
  scale.nnodes = nnodes;
  const std::string port = std::to_string(free_tcp_port());
  const std::string token = "scale-test-token";
  LaunchedProcess node_zero({partrain_binary(), "launch", "--nnodes", std::to_string(nnodes),
                             "--node-rank", "0", "--master-addr", "127.0.0.1", "--master-port",
                             port, "--token", token, "-n", "1", "--no-trace", "--rdzv-timeout",
                             "300s", "--", "true"});
  // Its store is up once a connection is answered.
  for (int i = 0; i < 600; ++i) {
    auto probe = rendezvous::StoreClient::connect("127.0.0.1", static_cast<uint16_t>(std::stoi(port)),
                                                  token, std::chrono::milliseconds(100));
    if (probe.is_ok() && (*probe)->ping().is_ok()) break;
  }
  scale.store_rss_mib = status_mib(node_zero.pid(), "VmRSS");

  std::atomic<bool> go{false};
  std::atomic<int64_t> last_joined_ns{0};
  std::atomic<int> failed{0};
  std::atomic<int> joined_count{0};
  std::mutex error_mutex;
  std::vector<std::thread> nodes;
  for (int node_rank = 1; node_rank < nnodes; ++node_rank) {
    nodes.emplace_back([&, node_rank] {
      launch::RendezvousPlan plan;
      plan.master_addr = "127.0.0.1";
      plan.master_port = static_cast<uint16_t>(std::stoi(port));
      plan.token = token;
      plan.nnodes = nnodes;
      plan.node_rank = node_rank;
      plan.nproc_per_node = 1;
      plan.host = fmt::format("sim-{}", node_rank);
      plan.timeout = std::chrono::seconds(300);
      while (!go.load()) std::this_thread::yield();
      std::optional<int> stop_signal;
      auto joined = launch::NodeRendezvous::join(plan, [] { return false; }, stop_signal);
      if (!joined.is_ok()) {
        failed.fetch_add(1);
        std::lock_guard lock(error_mutex);
        if (scale.first_error.empty()) scale.first_error = joined.status().message();
        return;
      }
      const int64_t now = monotonic_ns();
      for (int64_t seen = last_joined_ns.load();
           now > seen && !last_joined_ns.compare_exchange_weak(seen, now);) {
      }
      if (joined_count.fetch_add(1) + 1 == nnodes - 1) {
        scale.store_joined_rss_mib = status_mib(node_zero.pid(), "VmRSS");
      }
      (*joined)->finish(std::chrono::seconds(60), [] { return false; });
    });
  }
  const int64_t start_ns = monotonic_ns();
  go.store(true);
  double peak = 0;
  std::atomic<bool> joined_all{false};
  std::thread watch([&] {
    while (!joined_all.load()) {
      peak = std::max(peak, status_mib(node_zero.pid(), "VmHWM"));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  for (std::thread& node : nodes) node.join();
  joined_all.store(true);
  watch.join();
  scale.store_peak_rss_mib = std::max(peak, status_mib(node_zero.pid(), "VmHWM"));
  scale.rendezvous_seconds = static_cast<double>(last_joined_ns.load() - start_ns) / 1e9;
  scale.failed_nodes = failed.load();
  scale.node_zero = node_zero.finish(std::chrono::seconds(300));
  return scale;
}

}  // namespace partrain::testing
