// A Slurm cluster of several nodes, and Open MPI across them, on this one machine for the cluster
// tests: scripts/cluster_sandbox.sh runs munged, slurmctld and a slurmd per node inside new PID,
// mount, network and UTS namespaces (each node its own network and host name). The engines are
// Debian's (slurm-wlm, munge, openmpi-bin: `make test` installs them); where they or the
// namespaces are missing the tests skip with one line saying why.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "tests/integration/command_runner.h"

namespace partrain::testing {

class ClusterSandbox {
 public:
  // Why no sandbox can run here, empty when one can: a missing engine or no namespaces.
  static std::string unavailable_reason() {
    for (const char* tool : {"srun", "sbatch", "slurmctld", "slurmd", "munged", "mpirun"}) {
      if (!on_path(tool)) {
        return std::string(tool) +
               " not found: the cluster tests need Debian's slurm-wlm, munge and openmpi-bin "
               "(`make test` installs them unless PARTRAIN_SKIP_CLUSTER=1)";
      }
    }
    for (const char* tool : {"unshare", "nsenter", "ip"}) {
      if (!on_path(tool)) return std::string(tool) + " not found (util-linux, iproute2)";
    }
    if (std::system("unshare --net --mount --uts --pid --fork true >/dev/null 2>&1") != 0) {
      return "cannot create namespaces (unshare --net --mount --uts --pid): the cluster tests "
             "need root or CAP_SYS_ADMIN";
    }
    return "";
  }

  // Starts a cluster of `nodes` nodes (node1..nodeN) and waits until Slurm has them idle. On
  // failure, failure() says why (with the daemons' logs).
  explicit ClusterSandbox(int nodes) {
    char dir_template[] = "/tmp/partrain-cluster-XXXXXX";
    dir_ = mkdtemp(dir_template);
    const std::string script =
        std::string(PARTRAIN_SOURCE_DIR) + "/tests/integration/scripts/cluster_sandbox.sh";
    pid_ = fork();
    if (pid_ == 0) {
      // The test killed, its cluster goes too: unshare gets SIGKILL, then (--kill-child) the
      // namespace's PID 1, and with it every process in the namespace.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      const std::string log = dir_ + "/sandbox.log";
      freopen(log.c_str(), "w", stdout);
      freopen(log.c_str(), "a", stderr);
      execlp("unshare", "unshare", "--pid", "--fork", "--kill-child", "--mount-proc", "--mount",
             "--net", "--uts", script.c_str(), dir_.c_str(), std::to_string(nodes).c_str(),
             static_cast<char*>(nullptr));
      _exit(127);
    }
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!std::filesystem::exists(dir_ + "/ready") &&
           std::chrono::steady_clock::now() < give_up && ::waitpid(pid_, nullptr, WNOHANG) == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::string ready = read_file(dir_ + "/ready");
    if (ready != "ok\n") {
      failure_ = (ready.empty() ? std::string("the sandbox did not start within 60 s") : ready) +
                 "\n--- sandbox.log\n" + read_file(dir_ + "/sandbox.log") +
                 "\n--- slurmctld.log (end)\n" + tail(dir_ + "/slurmctld.log");
      return;
    }
    init_pid_ = read_file("/proc/" + std::to_string(pid_) + "/task/" + std::to_string(pid_) +
                          "/children");
    while (!init_pid_.empty() && (init_pid_.back() == ' ' || init_pid_.back() == '\n')) {
      init_pid_.pop_back();
    }
    if (init_pid_.empty()) failure_ = "the sandbox's PID 1 is gone";
  }

  ~ClusterSandbox() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    // The namespace's processes die with its PID 1; wait until none holds the directory.
    if (!init_pid_.empty()) ends_within(std::stoi(init_pid_), std::chrono::seconds(10));
    std::filesystem::remove_all(dir_);
  }

  ClusterSandbox(const ClusterSandbox&) = delete;
  ClusterSandbox& operator=(const ClusterSandbox&) = delete;

  const std::string& failure() const { return failure_; }
  // The cluster's shared directory (every node sees it, as a cluster's shared file system).
  const std::string& dir() const { return dir_; }

  // `command` in a shell on node1 (the login node: srun, sbatch and mpirun start from there), in
  // the sandbox's directory, bounded by `timeout`. Its environment: Slurm's config, Open MPI's
  // permission to run as root, partrain's build directory first on PATH, and private TMPDIR and
  // XDG_RUNTIME_DIR (a launcher cleaning up stale files would take those of launchers outside
  // the PID namespace for dead); none of the test's own Slurm, MPI or PMI variables.
  CommandResult run(const std::string& command, int timeout_s = 120) const {
    const std::string bin = std::filesystem::path(partrain_binary()).parent_path().string();
    const std::string inner =
        "for v in $(env | grep -oE '^(SLURM|OMPI|PMIX|PMI|MPI|MASTER|PARTRAIN)_[A-Za-z0-9_]*'); "
        "do unset $v; done; export SLURM_CONF=" + dir_ + "/slurm.conf TMPDIR=" + dir_ +
        "/tmp XDG_RUNTIME_DIR=" + dir_ + "/run PATH=" + bin +
        ":$PATH OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
        "OMPI_MCA_plm_rsh_agent=" + dir_ + "/mpi-agent; cd " + dir_ + " && " + command;
    return run_shell("nsenter -t " + init_pid_ + " -p -m -n -u -- timeout -k 5 " +
                     std::to_string(timeout_s) + " sh -c " + quote(inner));
  }

  static std::string quote(const std::string& text) {
    std::string quoted = "'";
    for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return quoted + "'";
  }

 private:
  static bool on_path(const char* tool) {
    return std::system(("command -v " + std::string(tool) + " >/dev/null 2>&1").c_str()) == 0;
  }

  static std::string tail(const std::string& path) {
    std::string text = read_file(path);
    return text.size() > 3000 ? text.substr(text.size() - 3000) : text;
  }

  std::string dir_;
  pid_t pid_ = -1;
  std::string init_pid_;
  std::string failure_;
};

// The nodes' shared secret, as a job script hands it to the engine (examples/slurm/train.sbatch).
inline const std::string kClusterToken = "PARTRAIN_TOKEN=cluster-test-secret";

// A small GPT, so that each layout runs in seconds on two cores; the global batch is fixed so
// that every layout computes what one rank does.
inline std::string small_gpt(int layers, int global_batch, int steps) {
  return "--workload gpt --layers " + std::to_string(layers) +
         " --hidden 64 --heads 4 --seq 32 --vocab 128 --global-batch " +
         std::to_string(global_batch) + " --steps " + std::to_string(steps);
}

// One rank's `--json` summary of `model` on node1: what every layout must compute.
inline nlohmann::json one_rank_summary(const ClusterSandbox& cluster, const std::string& model) {
  CommandResult run = cluster.run("partrain launch -n 1 --no-trace --json " + model, 300);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  return parse_json_output(run.out);
}

// The ranks' output lines without their "[rank N] " prefix, in any order.
inline std::set<std::string> unprefixed_lines(const std::string& text) {
  std::set<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    lines.insert(std::regex_replace(line, std::regex(R"(^\[rank \d+\] )"), ""));
  }
  return lines;
}

// Starts the cluster for a test, or skips it (engines or namespaces missing) in one line.
#define PARTRAIN_START_CLUSTER(sandbox, nodes)                                                \
  if (std::string why = ::partrain::testing::ClusterSandbox::unavailable_reason();           \
      !why.empty()) {                                                                         \
    GTEST_SKIP() << why;                                                                      \
  }                                                                                           \
  ::partrain::testing::ClusterSandbox sandbox(nodes);                                         \
  ASSERT_TRUE(sandbox.failure().empty()) << "the test cluster did not start: "               \
                                         << sandbox.failure()

}  // namespace partrain::testing
