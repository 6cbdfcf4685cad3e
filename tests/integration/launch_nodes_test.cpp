// Several nodes of one run, as launchers on this machine: the shared secret they need, a node
// that disappears mid-run (killed, or frozen as a cut-off host is), and Ctrl-C or SIGTERM on any
// node while they gather. Each is named on the others within 5 s.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/integration/command_runner.h"
#include "tests/integration/launched_process.h"

namespace partrain {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing::Finished;
using testing::LaunchedProcess;

bool contains(const std::string& text, std::string_view part) {
  return text.find(part) != std::string::npos;
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

class LaunchNodesTest : public ::testing::Test {
 public:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "/launch_nodes_test_XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    port_ = std::to_string(testing::free_tcp_port());
  }
  void TearDown() override {
    for (pid_t pid : worker_pids()) ::kill(pid, SIGKILL);
    fs::remove_all(dir_);
  }

  // Node `node_rank` of `nnodes`, one rank each, whose worker records its shell's and its sleep's
  // pids and sleeps.
  std::unique_ptr<LaunchedProcess> node(int node_rank, int nnodes = 2,
                                        std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {testing::partrain_binary(),
                                     "launch",
                                     "--nnodes",
                                     std::to_string(nnodes),
                                     "--node-rank",
                                     std::to_string(node_rank),
                                     "--master-addr",
                                     "127.0.0.1",
                                     "--master-port",
                                     port_,
                                     "-n",
                                     "1",
                                     "--no-trace",
                                     "--grace",
                                     "2s",
                                     "--rdzv-timeout",
                                     "60s"};
    if (extra.empty()) extra = {"--token", "node-test-secret"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    for (const std::string& word :
         {std::string("--"), std::string("sh"), std::string("-c"),
          fmt::format("sleep 60 & echo $$ $! > {}/pids_$RANK; wait", dir_.string())}) {
      argv.push_back(word);
    }
    return std::make_unique<LaunchedProcess>(argv);
  }

  std::vector<pid_t> worker_pids(int rank = -1) const {
    std::vector<pid_t> pids;
    std::error_code error;
    for (const auto& entry : fs::directory_iterator(dir_, error)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("pids_", 0) != 0) continue;
      if (rank >= 0 && name != fmt::format("pids_{}", rank)) continue;
      std::ifstream file(entry.path());
      for (pid_t pid; file >> pid;) pids.push_back(pid);
    }
    return pids;
  }
  void wait_for_workers(size_t ranks) const {
    for (int i = 0; i < 2000 && worker_pids().size() < 2 * ranks; ++i) {
      std::this_thread::sleep_for(10ms);
    }
    ASSERT_EQ(worker_pids().size(), 2 * ranks) << "the workers did not start";
  }

  fs::path dir_;
  std::string port_;
};

TEST_F(LaunchNodesTest, SeveralNodesWithoutASecretAreRefusedNamingTheFix) {
  Finished r = node(0, 2, {"--rdzv-id", "job7"})->finish(60s);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(contains(r.err, "2 nodes need a shared secret for the rendezvous store")) << r.err;
  EXPECT_TRUE(contains(r.err, "--token")) << r.err;
  EXPECT_TRUE(contains(r.err, "--token-file")) << r.err;
  // A token equal to the public job id is no secret either.
  Finished same = node(0, 2, {"--rdzv-id", "job7", "--token", "job7"})->finish(60s);
  EXPECT_EQ(same.exit_code, 2) << same.err;
  EXPECT_TRUE(contains(same.err, "--token is the same as --rdzv-id")) << same.err;
}

TEST_F(LaunchNodesTest, ATokenFileInASharedDirectoryJoinsTheNodes) {
  const std::string file = (dir_ / "token").string();
  auto zero = node(0, 2, {"--token-file", file});
  auto one = node(1, 2, {"--token-file", file});
  wait_for_workers(2);
  for (pid_t pid : worker_pids()) ::kill(pid, SIGKILL);  // ends both runs: rank 0 fails first
  Finished a = zero->finish(60s);
  Finished b = one->finish(60s);
  EXPECT_TRUE(contains(a.err, "failed first")) << a.err << b.err;
  struct stat info{};
  ASSERT_EQ(::stat(file.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
}

// Starts nodes 0 and 1, lets their heartbeats flow, makes node `lost` disappear with `signal`
// (its launcher and its worker) and measures how long the other node takes to name it.
struct Loss {
  double named_after = 0;  // seconds from the signal to the summary line on the other node
  Finished other;
};

Loss lose_node(LaunchNodesTest& test, int lost, int signal) {
  auto zero = test.node(0);
  auto one = test.node(1);
  test.wait_for_workers(2);
  std::this_thread::sleep_for(1s);  // heartbeats flowing
  LaunchedProcess& gone = lost == 0 ? *zero : *one;
  LaunchedProcess& other = lost == 0 ? *one : *zero;
  const auto start = Clock::now();
  ::kill(gone.pid(), signal);
  for (pid_t pid : test.worker_pids(lost)) ::kill(pid, signal);
  EXPECT_TRUE(other.wait_for_stderr("was lost", 10s));
  Loss loss;
  loss.named_after = seconds_since(start);
  loss.other = other.finish(60s);
  ::kill(gone.pid(), SIGKILL);
  for (pid_t pid : test.worker_pids(lost)) ::kill(pid, SIGKILL);
  (void)gone.finish(10s);
  return loss;
}

// A node's launcher killed mid-run (its host rebooted): its connection to the store closes, and
// node 0 names it, counts its ranks as lost and stops its own.
TEST_F(LaunchNodesTest, ANodeKilledMidRunIsNamedWithinFiveSeconds) {
  const Loss loss = lose_node(*this, 1, SIGKILL);
  std::printf("node 1 killed: named lost on node 0 after %.2f s\n", loss.named_after);
  const std::string& err = loss.other.err;
  EXPECT_LT(loss.named_after, 5.0) << err;
  EXPECT_EQ(loss.other.exit_code, 1) << err;
  EXPECT_TRUE(contains(err, "node 1 (host ")) << err;
  EXPECT_TRUE(contains(err, ", launcher pid ")) << err;
  EXPECT_TRUE(contains(err, "its launcher's connection to the rendezvous store closed")) << err;
  EXPECT_TRUE(contains(err, "its rank 1 is counted as lost")) << err;
  EXPECT_TRUE(contains(err, "the other ranks were stopped")) << err;
}

// A frozen node (SIGSTOP: a hung host, or one cut off by the network) keeps its connection
// open but falls silent: named after the silence limit.
TEST_F(LaunchNodesTest, AFrozenNodeIsNamedWithinFiveSeconds) {
  const Loss loss = lose_node(*this, 1, SIGSTOP);
  std::printf("node 1 frozen: named lost on node 0 after %.2f s\n", loss.named_after);
  EXPECT_LT(loss.named_after, 5.0) << loss.other.err;
  EXPECT_EQ(loss.other.exit_code, 1) << loss.other.err;
  EXPECT_TRUE(contains(loss.other.err, "no heartbeat for")) << loss.other.err;
}

// Node 0 gone (its launcher and the store with it): the others name it.
TEST_F(LaunchNodesTest, NodeZeroKilledMidRunIsNamedOnTheOthers) {
  const Loss loss = lose_node(*this, 0, SIGKILL);
  std::printf("node 0 killed: named lost on node 1 after %.2f s\n", loss.named_after);
  EXPECT_LT(loss.named_after, 5.0) << loss.other.err;
  EXPECT_EQ(loss.other.exit_code, 1) << loss.other.err;
  EXPECT_TRUE(contains(loss.other.err, "node 0 (host ")) << loss.other.err;
  EXPECT_TRUE(contains(loss.other.err, "its rendezvous store at 127.0.0.1:" + port_))
      << loss.other.err;
}

// SIGTERM to one node's launcher mid-run (a scheduler preempting it): it stops its workers and
// tells the others, which stop theirs instead of waiting in collectives that cannot complete.
TEST_F(LaunchNodesTest, ANodeStoppedMidRunStopsTheOthers) {
  auto zero = node(0);
  auto one = node(1);
  wait_for_workers(2);
  const auto stopped = Clock::now();
  ::kill(one->pid(), SIGTERM);
  Finished a = zero->finish(60s);
  Finished b = one->finish(60s);
  const double all_ended = seconds_since(stopped);
  std::printf("SIGTERM to node 1 mid-run: every node ended after %.2f s\n", all_ended);
  EXPECT_LT(all_ended, 5.0);
  EXPECT_EQ(b.exit_code, 143) << b.err;
  EXPECT_EQ(a.exit_code, 143) << a.err;
  EXPECT_TRUE(contains(a.err, fmt::format("node 1 (host ")) &&
              contains(a.err, "stopped after") &&
              contains(a.err, "its launcher was stopped by SIGTERM"))
      << a.err;
  // The stopped node names itself: its own host and launcher, not "host ?, launcher pid 0".
  EXPECT_TRUE(contains(a.err, fmt::format(", launcher pid {}) stopped after", one->pid())))
      << a.err;
  EXPECT_FALSE(contains(a.err, "host ?")) << a.err;
}

// Ctrl-C on a node while the nodes gather (node 2 never comes): every node ends within 5 s with
// the signal's code, saying whose it was.
TEST_F(LaunchNodesTest, CtrlCOnAnyNodeDuringTheRendezvousEndsEveryNode) {
  auto zero = node(0, 3);
  auto one = node(1, 3);
  std::this_thread::sleep_for(2s);  // both registered, waiting for node 2
  const auto interrupted = Clock::now();
  ::kill(one->pid(), SIGINT);
  Finished b = one->finish(30s);
  Finished a = zero->finish(30s);
  const double all_ended = seconds_since(interrupted);
  std::printf("SIGINT to node 1 during the rendezvous: every node ended after %.2f s\n",
              all_ended);
  EXPECT_LT(all_ended, 5.0);
  EXPECT_EQ(b.exit_code, 130) << b.err;
  EXPECT_TRUE(contains(b.err, "stopped by SIGINT while the nodes gathered; the other nodes were "
                              "told"))
      << b.err;
  EXPECT_EQ(a.exit_code, 130) << a.err;
  EXPECT_TRUE(contains(a.err, "node 1 (host ")) << a.err;
  EXPECT_TRUE(contains(a.err, "was stopped by SIGINT while the nodes gathered: stopping too"))
      << a.err;
}

TEST_F(LaunchNodesTest, SigtermOnNodeZeroDuringTheRendezvousEndsEveryNode) {
  auto zero = node(0, 3);
  auto one = node(1, 3);
  std::this_thread::sleep_for(2s);
  const auto interrupted = Clock::now();
  ::kill(zero->pid(), SIGTERM);
  Finished a = zero->finish(30s);
  Finished b = one->finish(30s);
  const double all_ended = seconds_since(interrupted);
  std::printf("SIGTERM to node 0 during the rendezvous: every node ended after %.2f s\n",
              all_ended);
  EXPECT_LT(all_ended, 5.0);
  EXPECT_EQ(a.exit_code, 143) << a.err;
  EXPECT_EQ(b.exit_code, 143) << b.err;
  EXPECT_TRUE(contains(b.err, "node 0 (host ")) << b.err;
  EXPECT_TRUE(contains(b.err, "was stopped by SIGTERM")) << b.err;
}

}  // namespace
}  // namespace partrain
