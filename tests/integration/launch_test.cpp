// `partrain launch` end to end: the real binary, real worker processes, real signals. Every test
// that starts long-running workers also checks by pid that none of them survives the launcher.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "core/subprocess.h"
#include "runner/launch/orphan_guard.h"
#include "tests/integration/command_runner.h"
#include "tests/integration/launched_process.h"
#include "tests/support/scratch_dir.h"

namespace partrain {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

using testing::Finished;

// One `partrain ...` process with both output streams collected.
class Partrain : public testing::LaunchedProcess {
 public:
  explicit Partrain(std::vector<std::string> args, std::vector<std::string> extra_env = {})
      : LaunchedProcess(with_binary(std::move(args)), std::move(extra_env)) {}

 private:
  static std::vector<std::string> with_binary(std::vector<std::string> args) {
    args.insert(args.begin(), PARTRAIN_BINARY);
    return args;
  }
};

Finished run_partrain(std::vector<std::string> args, std::vector<std::string> extra_env = {}) {
  return Partrain(std::move(args), std::move(extra_env)).finish();
}

// A per-test scratch directory where workers drop their pids.
class LaunchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "/launch_test_XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Shell snippet: records the shell's pid and a background sleep's pid, then waits on it.
  std::string record_pids_and_sleep(const std::string& trap = "") const {
    return fmt::format("{} sleep 30 & echo $$ $! > {}/pids_$RANK; wait", trap, dir_.string());
  }
  std::vector<pid_t> recorded_pids() const {
    std::vector<pid_t> pids;
    for (const auto& entry : fs::directory_iterator(dir_)) {
      if (entry.path().filename().string().rfind("pids_", 0) != 0) continue;
      std::ifstream file(entry.path());
      pid_t pid;
      while (file >> pid) pids.push_back(pid);
    }
    return pids;
  }
  void wait_for_pid_files(size_t count) const {
    for (int i = 0; i < 500 && recorded_pids().size() < 2 * count; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_EQ(recorded_pids().size(), 2 * count);
  }
  // No process of the run may be alive (nor a zombie: the launcher reaped its children and the
  // sleeps were reaped by init, which may take a moment).
  // After the launcher was killed its workers' children go to init, which may not reap at once:
  // each recorded process is gone or a zombie within the guard's grace and a margin.
  void expect_all_dead_or_zombies() const {
    for (pid_t pid : recorded_pids()) {
      EXPECT_TRUE(partrain::testing::ends_within(pid, std::chrono::seconds(5)))
          << "pid " << pid << " outlived the killed launcher";
    }
  }
  void expect_all_gone() const {
    for (pid_t pid : recorded_pids()) {
      for (int i = 0; i < 200 && ::kill(pid, 0) == 0; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      errno = 0;
      EXPECT_EQ(::kill(pid, 0), -1) << "pid " << pid << " outlived the launcher";
      EXPECT_EQ(errno, ESRCH);
    }
  }
  fs::path dir_;
};

uint16_t kernel_free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// A free port no other test process of this machine was handed in the last minutes. The port is
// released before the launcher binds it, and once (a clean clone's `make test`, 2026-11-25) two
// tests running side by side got the same one, so one's node 1 joined the other's node 0: each
// port handed out is claimed with an exclusive marker file, and claims expire after 10 minutes.
uint16_t free_port() {
  const fs::path claims = fs::temp_directory_path() / "partrain-test-ports";
  fs::create_directories(claims);
  for (int attempt = 0;; ++attempt) {
    const uint16_t port = kernel_free_port();
    const fs::path claim = claims / std::to_string(port);
    std::error_code ignored;
    if (fs::exists(claim, ignored) &&
        fs::last_write_time(claim, ignored) <
            fs::file_time_type::clock::now() - std::chrono::minutes(10)) {
      fs::remove(claim, ignored);
    }
    const int fd = ::open(claim.c_str(), O_CREAT | O_EXCL | O_WRONLY, 0644);
    if (fd >= 0 || attempt == 20) {
      if (fd >= 0) ::close(fd);
      return port;
    }
  }
}

std::string script(const std::string& name) {
  return fmt::format("{}/tests/integration/scripts/{}", PARTRAIN_SOURCE_DIR, name);
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST_F(LaunchTest, SuccessRelaysPrefixedOutputOfEveryRank) {
  Finished r = run_partrain({"launch", "-n", "3", "--", "sh", "-c", "echo hi $RANK of $WORLD_SIZE"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_TRUE(contains(r.out, fmt::format("[rank {}] hi {} of 3\n", rank, rank))) << r.out;
  }
  EXPECT_TRUE(contains(r.err, "partrain: rendezvous on 127.0.0.1:")) << r.err;
}

// Arguments are bytes, not text: one that is not UTF-8 reaches the worker unchanged, and the
// trace's run row (JSON) records it with U+FFFD instead of the launcher aborting.
TEST_F(LaunchTest, ArgumentsThatAreNotUtf8ReachTheWorkerUnchanged) {
  const std::string latin1 = "caf\xe9";
  Finished r = run_partrain(
      {"launch", "-n", "1", "--no-prefix", "--", "sh", "-c", "printf '%s\\n' \"$0\"", latin1});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, latin1 + "\n");
}

// `--inject crash:rank=1 -- python3 train.py` must not pass without injecting anything: workload
// flags with a command are a usage error naming them, whether typed or from the environment.
TEST_F(LaunchTest, WorkloadFlagsWithACommandAreAUsageError) {
  Finished inject = run_partrain({"launch", "-n", "2", "--inject", "crash:rank=1", "--", "true"});
  EXPECT_EQ(inject.exit_code, 2) << inject.err;
  EXPECT_TRUE(contains(inject.err, "--inject applies to --workload runs")) << inject.err;
  Finished layout = run_partrain({"launch", "-n", "2", "--dp", "2", "--steps", "5", "--", "true"});
  EXPECT_EQ(layout.exit_code, 2) << layout.err;
  EXPECT_TRUE(contains(layout.err, "--steps, --dp apply to --workload runs")) << layout.err;
  Finished plain = run_partrain({"launch", "-n", "2", "--", "true"});
  EXPECT_EQ(plain.exit_code, 0) << plain.err;
  // PARTRAIN_JSON=1, exported for analyze's or top's --json, is named as where --json came from.
  Finished exported = run_partrain({"launch", "-n", "1", "--", "true"}, {"PARTRAIN_JSON=1"});
  EXPECT_EQ(exported.exit_code, 2) << exported.err;
  EXPECT_TRUE(contains(exported.err, "(from PARTRAIN_JSON=1 in the environment")) << exported.err;
}

// An empty trace name would trace into SQLite's temporary database and keep nothing.
TEST_F(LaunchTest, EmptyTraceNamesAreAUsageError) {
  Finished launch = run_partrain({"launch", "-n", "1", "--trace", "", "--", "true"});
  EXPECT_EQ(launch.exit_code, 2) << launch.err;
  EXPECT_TRUE(contains(launch.err, "--trace needs a file name")) << launch.err;
  Finished trace = run_partrain({"trace", "-o", "", "--", "true"});
  EXPECT_EQ(trace.exit_code, 2) << trace.err;
  EXPECT_TRUE(contains(trace.err, "-o needs a file name")) << trace.err;
}

// --tee without --log-dir has nothing to tee: refused, not silently ignored.
TEST_F(LaunchTest, TeeWithoutLogDirIsAUsageError) {
  Finished r = run_partrain({"launch", "-n", "1", "--tee", "--", "echo", "x"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(contains(r.err,
                       "--tee copies the ranks' output to the terminal besides --log-dir's "
                       "files: add --log-dir DIR"))
      << r.err;
  EXPECT_EQ(r.out, "");
}

TEST_F(LaunchTest, NoPrefixAndLogDir) {
  Finished plain = run_partrain({"launch", "-n", "1", "--no-prefix", "--", "echo", "bare"});
  EXPECT_EQ(plain.out, "bare\n");
  // torchrun's layout: a directory per run under --log-dir, named by the run id, so a second run
  // (the same --run-id included) keeps the first one's logs.
  std::string logs = (dir_ / "logs").string();
  auto file_text = [](const std::string& path) {
    std::ifstream file(path);
    std::stringstream text;
    text << file.rdbuf();
    return text.str();
  };
  for (const char* run : {"first", "second"}) {
    Finished logged =
        run_partrain({"launch", "-n", "2", "--no-trace", "--run-id", "job7", "--log-dir", logs,
                      "--", "sh", "-c", std::string("echo ") + run + " $RANK"});
    EXPECT_EQ(logged.exit_code, 0) << logged.err;
    EXPECT_EQ(logged.out, "");
    const std::string dir = logs + (std::string(run) == "first" ? "/job7" : "/job7.2");
    EXPECT_TRUE(contains(logged.err, "rank output: " + dir + "/rank_<N>.log")) << logged.err;
  }
  EXPECT_EQ(file_text(logs + "/job7/rank_1.log"), "first 1\n");
  EXPECT_EQ(file_text(logs + "/job7.2/rank_1.log"), "second 1\n");
  EXPECT_EQ(file_text(logs + "/job7.2/rank_0.log"), "second 0\n");
}

// A run id names directories: one that cannot (a 300-character name aborted the launcher with
// an uncaught filesystem_error, exit 134; 'a/b' left an empty partrain-runs/a) is exit 2 before
// anything is made.
TEST_F(LaunchTest, ARunIdThatCannotNameADirectoryIsRefusedFirst) {
  const fs::path runs = dir_ / "ids";
  fs::create_directories(runs);
  for (const std::string& id :
       {std::string(300, 'a'), std::string("a/b"), std::string(".."), std::string("")}) {
    Finished r = run_partrain({"launch", "--run-id", id, "--log-dir", (runs / "logs").string(),
                               "--trace", (runs / "t.db").string(), "--", "true"});
    EXPECT_EQ(r.exit_code, 2) << id << "\n" << r.err;
    EXPECT_TRUE(contains(r.err, "cannot name a run's directories")) << r.err;
    EXPECT_TRUE(fs::is_empty(runs)) << id;
  }
}

// torchrun's flags partrain has not got are refused saying what to do instead (CLI11 said "The
// following arguments were not expected: true --max-restarts"); after `--` they are the
// command's own.
TEST_F(LaunchTest, TorchrunFlagsItHasNotGotSayWhatToDoInstead) {
  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{"--max-restarts", "1"}, "--max-restarts: partrain launch does not restart workers"},
      {{"--local-ranks-filter", "0"}, "give --log-dir DIR for a file per rank"},
      {{"--nproc-per-node", "auto"}, "--nproc-per-node auto: give the count of workers"},
      {{"--tee", "3", "--log-dir", "logs"}, "--tee takes no value in partrain launch"},
      {{"--max_restarts=3"}, "does not restart workers"},
      {{"--rdzv-endpoint", "host:29400"}, "give --master-addr HOST --master-port PORT"},
      {{"--rdzv_backend", "c10d"}, "the rendezvous is a store on node 0"},
      {{"--rdzv-conf", "timeout=60"},
       "--rdzv-conf: the rendezvous is a store on node 0: its "
       "timeout is --rdzv-timeout"},
      {{"-t", "3"}, "-t: torchrun's -t is --tee N"},
      {{"--signals-to-handle", "SIGUSR1"}, "passes SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1"},
      {{"--redirects", "3"}, "give --log-dir DIR"},
      {{"--run-path"}, "--run-path: torchrun's --run-path runs the script inside its own"},
      {{"-m", "--no-python"}, "-m runs a module with Python and --no-python runs no Python"},
  };
  for (const auto& [flags, wanted] : cases) {
    std::vector<std::string> args = {"launch", "-n", "2"};
    args.insert(args.end(), flags.begin(), flags.end());
    args.insert(args.end(), {"--", "true"});
    Finished r = run_partrain(args);
    EXPECT_EQ(r.exit_code, 2) << flags[0] << "\n" << r.err;
    EXPECT_TRUE(contains(r.err, wanted)) << r.err;
    EXPECT_FALSE(contains(r.err, "not expected")) << r.err;
  }
  Finished passed = run_partrain({"launch", "-n", "1", "--no-trace", "--no-prefix", "--", "sh",
                                  "-c", "echo \"$@\"", "x", "--max-restarts", "-m"});
  EXPECT_EQ(passed.exit_code, 0) << passed.err;
  EXPECT_EQ(passed.out, "--max-restarts -m\n");
}

// torchrun's -m runs the command's first word as a Python module (it was refused); --no-python
// runs a script as given, never with Python (a script without its execute bit fails to start).
TEST_F(LaunchTest, TorchrunsModuleAndNoPythonFlags) {
  fs::create_directories(dir_ / "pkg");
  std::ofstream(dir_ / "pkg" / "__init__.py") << "";
  std::ofstream(dir_ / "pkg" / "__main__.py")
      << "import os, sys\nprint('module', os.environ['RANK'], sys.argv[1:])\n";
  Finished r =
      run_partrain({"launch", "-n", "2", "--no-trace", "--no-prefix", "-m", "pkg", "-n", "3"},
                   {"PYTHONPATH=" + dir_.string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "module 0 ['-n', '3']\n")) << r.out;
  EXPECT_TRUE(contains(r.out, "module 1 ['-n', '3']\n")) << r.out;
  EXPECT_TRUE(contains(r.err, "running `python3 -m pkg` with")) << r.err;

  const std::string script_path = (dir_ / "plain.py").string();
  std::ofstream(script_path) << "print('ran')\n";
  fs::permissions(script_path, fs::perms::owner_read | fs::perms::owner_write);
  r = run_partrain({"launch", "-n", "1", "--no-trace", "--no-python", script_path});
  EXPECT_NE(r.exit_code, 0) << r.out;  // not run with python3
  EXPECT_FALSE(contains(r.out, "ran")) << r.out;
}

// As torchrun, a .py script that would not run as a program (not executable, or a bare name not on
// PATH) is run with python3, saying so; it was "permission denied" (126) or "not found" (127).
TEST_F(LaunchTest, APythonScriptThatIsNoProgramRunsWithPython3AsUnderTorchrun) {
  const std::string script_path = (dir_ / "train.py").string();
  std::ofstream(script_path) << "import os, sys\nprint(os.environ['RANK'], sys.argv[1:])\n";
  fs::permissions(script_path, fs::perms::owner_read | fs::perms::owner_write);
  Finished r =
      run_partrain({"launch", "-n", "2", "--no-trace", "--no-prefix", script_path, "--tp", "2"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "0 ['--tp', '2']\n")) << r.out;
  EXPECT_TRUE(contains(r.out, "1 ['--tp', '2']\n")) << r.out;
  EXPECT_TRUE(contains(r.err, "running " + script_path + " with /")) << r.err;  // python3's path
  EXPECT_TRUE(contains(r.err, "as torchrun runs its script with its Python (`-- " + script_path +
                                  "` with a shebang"))
      << r.err;
  // Without the .py, as torchrun runs any script: it was "command not found" (127).
  const std::string bare = (dir_ / "train_noext").string();
  fs::copy_file(script_path, bare);
  Finished noext = run_partrain({"launch", "-n", "1", "--no-trace", "--no-prefix", bare, "x"});
  EXPECT_EQ(noext.exit_code, 0) << noext.err;
  EXPECT_EQ(noext.out, "0 ['x']\n");
}

// More ranks than the cores the launcher may use are warned about: they take turns on the cores,
// and their timings (a benchmark's, a straggler's) include the waits. As many as the cores are
// not. The cores are the launcher's (a Slurm cpuset, `srun -c`, taskset), not the machine's.
TEST_F(LaunchTest, MoreRanksThanCoresAreWarnedAbout) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  ASSERT_EQ(::sched_getaffinity(0, sizeof allowed, &allowed), 0);
  const int cores = CPU_COUNT(&allowed);
  if (cores < 1 || cores > 8) GTEST_SKIP() << cores << " cores: too many ranks to start here";
  const std::string over = std::to_string(cores + 1);
  Finished r = run_partrain({"launch", "-n", over, "--no-trace", "--", "true"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(
      contains(r.err, fmt::format("warning: {} ranks on the {} core{} this launcher may use", over,
                                  cores, cores == 1 ? "" : "s")))
      << r.err;
  Finished fits = run_partrain({"launch", "-n", std::to_string(cores), "--no-trace", "--", "true"});
  EXPECT_EQ(fits.exit_code, 0) << fits.err;
  EXPECT_FALSE(contains(fits.err, "this launcher may use")) << fits.err;
  // Held to one core: two ranks are one too many, whatever the machine has.
  const testing::CommandResult one = testing::run_shell(
      "taskset -c 0 " + testing::partrain_binary() + " launch -n 2 --no-trace -- true");
  EXPECT_EQ(one.exit_code, 0) << one.err;
  EXPECT_TRUE(contains(one.err, "warning: 2 ranks on the 1 core this launcher may use")) << one.err;
}

// torchrun's default --max-restarts 0 is what partrain does: accepted (scripts pass it).
TEST_F(LaunchTest, MaxRestartsZeroIsAccepted) {
  Finished r = run_partrain(
      {"launch", "-n", "1", "--no-trace", "--max-restarts", "0", "--", "sh", "-c", "echo ok"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "ok")) << r.out;
}

// As under torchrun, the first word that is not one of launch's flags starts the command, and
// the flags after it are the script's: `-n 3` set 3 ranks and the script saw no arguments.
TEST_F(LaunchTest, TheScriptsOwnFlagsAfterItAreTheScripts) {
  Finished r = run_partrain({"launch", "-n", "2", "--no-trace", "--no-prefix", "sh", "-c",
                             "echo \"$RANK/$WORLD_SIZE $*\"", "x", "-n", "3", "--trace", "t.db",
                             "--steps", "5", "-v"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "0/2 -n 3 --trace t.db --steps 5 -v\n")) << r.out;
  EXPECT_TRUE(contains(r.out, "1/2 -n 3 --trace t.db --steps 5 -v\n")) << r.out;
  EXPECT_FALSE(contains(r.out, "/3 ")) << r.out;
  // And `partrain trace`'s: the command's -o is its own.
  testing::ScratchDir dir;
  const std::string db = (dir.path() / "a.db").string();
  Finished traced = run_partrain({"trace", "-o", db, "sh", "-c", "echo \"$*\"", "x", "-o", "b.db"});
  EXPECT_EQ(traced.exit_code, 0) << traced.err;
  EXPECT_EQ(traced.out, "-o b.db\n");
  EXPECT_TRUE(fs::exists(db));
}

// Without --rdzv-id, TORCHELASTIC_RUN_ID is the run's id (torchrun --standalone makes up a uuid;
// scripts name their runs after it), not "none"; a given --rdzv-id stands.
TEST_F(LaunchTest, TheTorchelasticRunIdIsTheRunsUnlessGiven) {
  Finished made = run_partrain({"launch", "-n", "1", "--no-trace", "--no-prefix", "--run-id",
                                "job-7", "--", "sh", "-c", "echo $TORCHELASTIC_RUN_ID"});
  EXPECT_EQ(made.exit_code, 0) << made.err;
  EXPECT_EQ(made.out, "job-7\n");
  Finished given = run_partrain({"launch", "-n", "1", "--no-trace", "--no-prefix", "--rdzv-id",
                                 "job42", "--", "sh", "-c", "echo $TORCHELASTIC_RUN_ID"});
  EXPECT_EQ(given.exit_code, 0) << given.err;
  EXPECT_EQ(given.out, "job42\n");
}

TEST_F(LaunchTest, FailingRankGivesItsExitCodeAndSummary) {
  Finished r = run_partrain(
      {"launch", "-n", "3", "--", "sh", "-c",
       "if [ $RANK = 1 ]; then echo cannot load shard 7 >&2; exit 3; fi; " + record_pids_and_sleep()});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_TRUE(contains(r.err, "rank 1 (node 0, host")) << r.err;
  EXPECT_TRUE(contains(r.err, "failed first with exit code 3")) << r.err;
  EXPECT_TRUE(contains(r.err, "    cannot load shard 7\n")) << r.err;
  EXPECT_LT(r.seconds, 10.0);
  expect_all_gone();
}

TEST_F(LaunchTest, RankKilledBySigkillGives137) {
  Finished r = run_partrain({"launch", "-n", "2", "--", "sh", "-c",
                             "if [ $RANK = 0 ]; then kill -9 $$; fi; " + record_pids_and_sleep()});
  EXPECT_EQ(r.exit_code, 137) << r.err;
  EXPECT_TRUE(contains(r.err, "rank 0 (")) << r.err;
  EXPECT_TRUE(contains(r.err, "signal 9 (SIGKILL)")) << r.err;
  expect_all_gone();
}

TEST_F(LaunchTest, RankIgnoringSigtermIsKilledAfterTheGrace) {
  Finished r = run_partrain(
      {"launch", "-n", "2", "--grace", "1s", "--", "sh", "-c",
       "if [ $RANK = 0 ]; then sleep 0.3; exit 4; fi; " + record_pids_and_sleep("trap '' TERM;")});
  EXPECT_EQ(r.exit_code, 4) << r.err;
  EXPECT_TRUE(contains(r.err, "rank 1 (pid")) << r.err;
  EXPECT_TRUE(contains(r.err, "sending SIGKILL")) << r.err;
  EXPECT_GE(r.seconds, 1.2);  // 0.3 s of work + 1 s grace
  EXPECT_LT(r.seconds, 4.0);
  expect_all_gone();
}

// torchrun's names for the grace: --shutdown-timeout (seconds), PET_SHUTDOWN_TIMEOUT and
// TORCH_ELASTIC_SHUTDOWN_TIMEOUT; PARTRAIN_GRACE and the flag win over them.
TEST_F(LaunchTest, TorchrunsShutdownTimeoutIsTheGrace) {
  const std::vector<std::string> job = {
      "launch",
      "-n",
      "2",
      "--no-trace",
      "--",
      "sh",
      "-c",
      "if [ $RANK = 0 ]; then sleep 0.3; exit 4; fi; " + record_pids_and_sleep("trap '' TERM;")};
  std::vector<std::string> flag = job;
  flag.insert(flag.begin() + 1, {"--shutdown-timeout", "1"});
  Finished r = run_partrain(flag);
  EXPECT_EQ(r.exit_code, 4) << r.err;
  EXPECT_TRUE(contains(r.err, "sending SIGKILL")) << r.err;
  EXPECT_LT(r.seconds, 4.0);
  expect_all_gone();
  r = run_partrain(job, {"TORCH_ELASTIC_SHUTDOWN_TIMEOUT=1"});
  EXPECT_EQ(r.exit_code, 4) << r.err;
  EXPECT_LT(r.seconds, 4.0);
  expect_all_gone();
  r = run_partrain(job, {"PET_SHUTDOWN_TIMEOUT=1", "TORCH_ELASTIC_SHUTDOWN_TIMEOUT=20"});
  EXPECT_LT(r.seconds, 4.0);
  expect_all_gone();
}

// torchrun reads its flags from PET_<FLAG> too (Kubeflow's PyTorchJob sets them): so does launch,
// for the flags it shares with torchrun, after its own PARTRAIN_<FLAG>; and the variables reach
// the workers as they would under torchrun.
TEST_F(LaunchTest, TorchrunsPetVariablesAreRead) {
  const std::vector<std::string> job = {
      "launch", "--no-trace", "--",
      "sh",     "-c",         "echo $RANK/$WORLD_SIZE $TORCHELASTIC_RUN_ID $PET_RDZV_ID"};
  Finished r = run_partrain(job, {"PET_NPROC_PER_NODE=2", "PET_RDZV_ID=kubeflow-job"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "[rank 1] 1/2 kubeflow-job kubeflow-job\n")) << r.out;
  r = run_partrain(job, {"PET_NPROC_PER_NODE=2", "PARTRAIN_NPROC_PER_NODE=3"});
  EXPECT_TRUE(contains(r.out, "[rank 2] 2/3")) << r.out;
  // A restart budget launch cannot honour is said, and the run goes on.
  r = run_partrain(job, {"PET_NPROC_PER_NODE=1", "PET_MAX_RESTARTS=3"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.err,
                       "PET_MAX_RESTARTS=3 in the environment: partrain launch does not "
                       "restart workers"))
      << r.err;
  r = run_partrain(job, {"PET_NPROC_PER_NODE=two"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "PET_NPROC_PER_NODE='two'")) << r.err;
}

TEST_F(LaunchTest, SigintEndsEveryProcessWith130) {
  Partrain launcher({"launch", "-n", "3", "--", "sh", "-c", record_pids_and_sleep()});
  wait_for_pid_files(3);
  ASSERT_EQ(::kill(launcher.pid(), SIGINT), 0);
  Finished r = launcher.finish();
  EXPECT_EQ(r.exit_code, 130) << r.err;
  // Once in ~1,900 runs on a loaded machine this took 30 s (the workers' `sleep 30`) with exit
  // 130: the launcher's log says whether it saw the signal and when it stopped the workers.
  EXPECT_LT(r.seconds, 10.0) << r.err;
  expect_all_gone();
}

// SIGUSR1 (Slurm's `--signal USR1@120`, asking a job to checkpoint before its time limit) goes
// on to every worker and the run goes on; SIGQUIT stops it as torchrun's does (131). Both had
// killed the launcher outright, the workers never told and its trace left incomplete.
TEST_F(LaunchTest, Sigusr1IsPassedOnAndSigquitStops) {
  const std::string program =
      "import os, signal, sys, time\n"
      "got = []\n"
      "signal.signal(signal.SIGUSR1, lambda s, f: got.append(s))\n"
      "open(sys.argv[1] + '/pids_' + os.environ['RANK'], 'w').write('%d %d' % ((os.getpid(),) "
      "* 2))\n"
      "for _ in range(400):\n"
      "    if got: break\n"
      "    time.sleep(0.05)\n"
      "print('rank', os.environ['RANK'], 'checkpointed' if got else 'no USR1', flush=True)\n";
  Partrain passed(
      {"launch", "-n", "2", "--no-trace", "--", "python3", "-c", program, dir_.string()});
  wait_for_pid_files(2);
  ASSERT_EQ(::kill(passed.pid(), SIGUSR1), 0);
  Finished r = passed.finish();
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "[rank 0] rank 0 checkpointed")) << r.out << r.err;
  EXPECT_TRUE(contains(r.out, "[rank 1] rank 1 checkpointed")) << r.out << r.err;
  EXPECT_TRUE(contains(r.err, "received SIGUSR1: passing it to the workers")) << r.err;
  for (int rank = 0; rank < 2; ++rank) fs::remove(dir_ / fmt::format("pids_{}", rank));

  Partrain quit({"launch", "-n", "2", "--", "sh", "-c", record_pids_and_sleep()});
  wait_for_pid_files(2);
  ASSERT_EQ(::kill(quit.pid(), SIGQUIT), 0);
  Finished q = quit.finish();
  EXPECT_EQ(q.exit_code, 131) << q.err;
  EXPECT_TRUE(contains(q.err, "received SIGQUIT: forwarding it to the workers")) << q.err;
  expect_all_gone();
}

// A traced Python rank gets KeyboardInterrupt on Ctrl-C, as under torchrun and --no-trace: its
// `except KeyboardInterrupt` cleanup (a checkpoint) runs. The injection library had taken SIGINT
// before the interpreter started, CPython left its own handler out, and the rank died of it.
TEST_F(LaunchTest, SigintRaisesKeyboardInterruptInATracedPythonRank) {
  testing::ScratchDir dir;
  // Its pid twice in pids_<rank>, as record_pids_and_sleep's shell and sleep.
  const std::string program =
      "import os, sys, time\n"
      "open(sys.argv[1] + '/pids_' + os.environ['RANK'], 'w').write('%d %d' % ((os.getpid(),) "
      "* 2))\n"
      "try:\n"
      "    time.sleep(30)\n"
      "except KeyboardInterrupt:\n"
      "    print('caught, checkpoint saved', flush=True)\n"
      "    sys.exit(3)\n";
  Partrain launcher({"launch", "-n", "2", "--trace", (dir.path() / "t.db").string(), "--",
                     "python3", "-c", program, dir_.string()});
  wait_for_pid_files(2);
  ASSERT_EQ(::kill(launcher.pid(), SIGINT), 0);
  Finished r = launcher.finish();
  EXPECT_TRUE(contains(r.out, "[rank 0] caught, checkpoint saved")) << r.out << r.err;
  EXPECT_TRUE(contains(r.out, "[rank 1] caught, checkpoint saved")) << r.out << r.err;
  EXPECT_NE(r.exit_code, 0) << r.err;
  expect_all_gone();
}

// Ctrl-C while workers are still being started stops the starting: -n 100000 went on forking
// for minutes, Ctrl-C unheard. Counted by the launcher's "rank N: pid" lines: far fewer than 5000.
TEST_F(LaunchTest, SigintWhileWorkersStartStartsNoMore) {
  const fs::path started = dir_ / "started";
  Partrain launcher({"-v", "launch", "-n", "5000", "--no-trace", "--", "sh", "-c",
                     fmt::format("touch {}; exec sleep 30", started.string())});
  // Once the first worker runs (a busy machine may take seconds to get there).
  for (int i = 0; i < 3000 && !fs::exists(started); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(fs::exists(started));
  ASSERT_EQ(::kill(launcher.pid(), SIGINT), 0);
  Finished r = launcher.finish();
  EXPECT_EQ(r.exit_code, 130) << r.err.substr(r.err.size() > 2000 ? r.err.size() - 2000 : 0);
  const std::regex spawned(R"(debug: rank \d+: pid)");
  const auto count = std::distance(std::sregex_iterator(r.err.begin(), r.err.end(), spawned),
                                   std::sregex_iterator());
  EXPECT_GT(count, 0);
  EXPECT_LT(count, 5000);
}

// SIGKILL of the launcher (the OOM killer's, a scheduler's): the workers die with it (their
// PR_SET_PDEATHSIG), and their own children too, through the orphan guard; the background sleeps
// had run on under init for their 30 s.
TEST_F(LaunchTest, SigkillOfTheLauncherTakesTheWorkersChildrenToo) {
  Partrain launcher({"launch", "-n", "2", "--", "sh", "-c", record_pids_and_sleep()});
  wait_for_pid_files(2);
  ASSERT_EQ(::kill(launcher.pid(), SIGKILL), 0);
  Finished r = launcher.finish();
  EXPECT_EQ(r.exit_code, 137);
  expect_all_dead_or_zombies();
}

// A launcher under launch starts its workers in sessions of their own (torchrun's
// start_new_session), out of the worker's group the guard kills: here the worker's shell starts
// rank 1 with setsid. A rank the trace heard from dies with the launcher too.
TEST_F(LaunchTest, SigkillOfTheLauncherTakesANestedLaunchersRanks) {
  const fs::path pid_file = dir_ / "rank1.pid";
  const testing::CommandResult r = testing::run_shell(fmt::format(
      "{0} launch -n 1 --trace {1} -- sh -c 'RANK=1 WORLD_SIZE=2 setsid sleep 30 & echo $! > {2}; "
      "wait' & launcher=$!; i=0; while [ \"$(cat /proc/$(cat {2} 2>/dev/null)/comm 2>/dev/null)\" "
      "!= sleep ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; sleep 0.5; kill -9 $launcher",
      testing::partrain_binary(), (dir_ / "nested.db").string(), pid_file.string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(pid_file);
  int pid = 0;
  ASSERT_TRUE(in >> pid) << "the worker never started its rank";
  const bool ended = testing::ends_within(pid, std::chrono::seconds(5));
  if (!ended) ::kill(pid, SIGKILL);
  EXPECT_TRUE(ended) << "the nested rank " << pid << " outlived the launcher";
}

TEST(OrphanGuard, DismissedItKillsNothing) {
  auto guard = launch::OrphanGuard::start();
  ASSERT_TRUE(guard.is_ok()) << guard.status().message();
  auto sleeper = Subprocess::spawn({{"sleep", "30"}, {"PATH=/usr/bin:/bin"}, false});
  ASSERT_TRUE(sleeper.is_ok());
  guard->watch(sleeper->pid());
  guard->dismiss();
  EXPECT_FALSE(sleeper->try_reap().has_value()) << "the dismissed guard killed its group";
  EXPECT_EQ(guard->pid(), -1);
}

// A process the guard was told of one by one (a rank the collector heard from, which torchrun
// started in a session of its own) dies with the launcher as the watched groups do.
TEST(OrphanGuard, AWatchedProcessDiesWithTheLauncher) {
  auto sleeper = Subprocess::spawn({{"sleep", "30"}, {"PATH=/usr/bin:/bin"}, false});
  ASSERT_TRUE(sleeper.is_ok());
  const pid_t launcher = ::fork();
  ASSERT_GE(launcher, 0);
  if (launcher == 0) {  // a launcher that dies without dismissing its guard, as under SIGKILL
    auto guard = launch::OrphanGuard::start();
    if (!guard.is_ok()) ::_exit(1);
    guard->watch_process(sleeper->pid());
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(launcher, &status, 0), launcher);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  std::optional<ExitStatus> ended;
  for (int i = 0; i < 100 && !ended; ++i) {
    ended = sleeper->try_reap();
    if (!ended) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(ended.has_value()) << "the watched process outlived the launcher";
}

// A pid and its start time name one process: the guard leaves a pid that went to another.
TEST(OrphanGuard, AProcessStartTimeIsKnownOnlyWhileItRuns) {
  const std::optional<uint64_t> mine = launch::process_start_ticks(::getpid());
  ASSERT_TRUE(mine.has_value());
  EXPECT_EQ(launch::process_start_ticks(::getpid()), mine);
  auto child = Subprocess::spawn({{"sleep", "30"}, {"PATH=/usr/bin:/bin"}, false});
  ASSERT_TRUE(child.is_ok());
  const pid_t pid = child->pid();
  const std::optional<uint64_t> its = launch::process_start_ticks(pid);
  ASSERT_TRUE(its.has_value());
  EXPECT_GE(*its, *mine);
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  while (!child->try_reap()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_FALSE(launch::process_start_ticks(pid).has_value());
}

TEST_F(LaunchTest, SigtermIsForwardedAndGives143) {
  Partrain launcher({"launch", "-n", "2", "--", "sh", "-c", record_pids_and_sleep()});
  wait_for_pid_files(2);
  ASSERT_EQ(::kill(launcher.pid(), SIGTERM), 0);
  Finished r = launcher.finish();
  EXPECT_EQ(r.exit_code, 143) << r.err;
  expect_all_gone();
}

// `partrain launch ... | head`: once stdout's reader is gone the run stops, as a pipeline's writer
// does on SIGPIPE (it ran on to the end), and the launcher exits 141 (128 + SIGPIPE).
TEST_F(LaunchTest, StdoutClosedUnderTheLauncherStopsTheRunAsSigpipeWould) {
  Partrain launcher({"launch", "-n", "2", "--", "sh", "-c",
                     fmt::format("sleep 30 & echo $$ $! > {}/pids_$RANK; i=0; while [ $i -lt "
                                 "200 ]; do echo line $RANK; sleep 0.05; i=$((i+1)); done",
                                 dir_.string())});  // 10 s unless stopped
  wait_for_pid_files(2);
  launcher.close_stdout_after("line");
  Finished r = launcher.finish();
  EXPECT_EQ(r.exit_code, 141) << r.err;
  EXPECT_TRUE(contains(r.err,
                       "stdout was closed (the reader of the pipe exited): stopping the "
                       "workers as SIGPIPE would"))
      << r.err;
  EXPECT_LT(r.seconds, 15.0);
  expect_all_gone();
}

TEST_F(LaunchTest, PortInUseIsAClearError) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const std::string port = std::to_string(ntohs(addr.sin_port));
  Finished r = run_partrain({"launch", "--master-port", port, "-n", "2", "--", "true"});
  ::close(fd);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "port " + port)) << r.err;
  EXPECT_TRUE(contains(r.err, "already in use")) << r.err;
  EXPECT_TRUE(contains(r.err, "--master-port")) << r.err;
}

// A MASTER_ADDR left in the environment names another host for a multi-node job: one node
// rendezvouses on itself (it used to hand the workers that address and wait for them forever).
// A log directory that cannot be made stops the run before anything is written: no trace file
// of a run that never started (it was left "running", then read as incomplete).
// Flags that would change nothing are refused: the watchdog's timeout with an untraced command
// (whose collectives partrain watches through the trace's injection library),
// --standalone with a multi-node placement.
TEST_F(LaunchTest, FlagsThatCannotApplyAreUsageErrors) {
  Finished timeout = run_partrain(
      {"launch", "-n", "2", "--collective-timeout", "2s", "--no-trace", "--", "true"});
  EXPECT_EQ(timeout.exit_code, 2) << timeout.err;
  EXPECT_TRUE(contains(timeout.err, "--collective-timeout watches a command's ranks through the "
                                    "trace's injection library: drop --no-trace"))
      << timeout.err;
  Finished standalone = run_partrain(
      {"launch", "-n", "2", "--standalone", "--nnodes", "3", "--node-rank", "2", "--", "true"});
  EXPECT_EQ(standalone.exit_code, 2) << standalone.err;
  EXPECT_TRUE(contains(standalone.err, "--standalone runs one node")) << standalone.err;
}

TEST_F(LaunchTest, AnUnusableLogDirLeavesNoTrace) {
  const std::string trace = (dir_ / "never.db").string();
  Finished r = run_partrain({"launch", "-n", "2", "--log-dir", "/proc/partrain-no-such-dir",
                             "--trace", trace, "--", "true"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "cannot create the log directory '/proc/partrain-no-such-dir'"))
      << r.err;
  EXPECT_FALSE(fs::exists(trace));
}

TEST_F(LaunchTest, OneNodeIgnoresAStaleMasterAddr) {
  Finished r = run_partrain({"launch", "-n", "2", "--no-trace", "--workload", "mlp", "--layers",
                             "2", "--hidden", "16", "--steps", "1"},
                            {"MASTER_ADDR=10.9.9.9"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.err, "one node: rendezvous on 127.0.0.1, not MASTER_ADDR=10.9.9.9"))
      << r.err;
  EXPECT_LT(r.seconds, 30.0);
  Finished command = run_partrain(
      {"launch", "-n", "1", "--no-trace", "--no-prefix", "--", "sh", "-c", "echo $MASTER_ADDR"},
      {"MASTER_ADDR=10.9.9.9"});
  EXPECT_EQ(command.out, "127.0.0.1\n") << command.err;
}

TEST_F(LaunchTest, TwoLaunchesAtOnceDoNotCollide) {
  const std::string worker = "sleep 0.5; echo port=$MASTER_PORT run=$PARTRAIN_RUN_ID";
  Partrain first({"launch", "-n", "2", "--", "sh", "-c", worker});
  Partrain second({"launch", "-n", "2", "--", "sh", "-c", worker});
  Finished a = first.finish();
  Finished b = second.finish();
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  std::smatch ma;
  std::smatch mb;
  std::regex port_re("port=(\\d+) run=(\\S+)");
  ASSERT_TRUE(std::regex_search(a.out, ma, port_re)) << a.out;
  ASSERT_TRUE(std::regex_search(b.out, mb, port_re)) << b.out;
  EXPECT_NE(ma[1].str(), mb[1].str());
  EXPECT_NE(ma[2].str(), mb[2].str());
}

TEST_F(LaunchTest, PythonWorkerSeesTheTorchrunEnvironmentAndReachesTheMaster) {
  Finished r = run_partrain({"launch", "-n", "3", "--", "python3", script("torchrun_env.py"), "3"},
                            {"PARTRAIN_NPROC_PER_NODE=3"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_TRUE(contains(r.out, fmt::format("[rank {}] ok rank={} world=3", rank, rank))) << r.out;
  }
}

TEST_F(LaunchTest, TwoNodesOnOneMachineFormOneWorldOfFour) {
  const std::string port = std::to_string(free_port());
  auto node = [&](int node_rank) {
    return std::vector<std::string>{"launch", "--nnodes", "2", "--node-rank",
                                    std::to_string(node_rank), "--master-addr", "127.0.0.1",
                                    "--master-port", port, "--token", "test-secret", "-n", "2",
                                    "--", "python3", script("torchrun_env.py"), "4"};
  };
  Partrain node0(node(0));
  Partrain node1(node(1));
  Finished a = node0.finish();
  Finished b = node1.finish();
  EXPECT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(b.exit_code, 0) << b.err;
  std::set<int> ranks;
  std::regex ok_re("ok rank=(\\d) world=4");
  for (const std::string& out : {a.out, b.out}) {
    for (std::sregex_iterator it(out.begin(), out.end(), ok_re), end; it != end; ++it) {
      ranks.insert(std::stoi((*it)[1].str()));
    }
  }
  EXPECT_EQ(ranks, (std::set<int>{0, 1, 2, 3})) << a.out << b.out;
  EXPECT_TRUE(contains(b.out, "[rank 2]")) << b.out;
}

// `partrain launch` as node `node_rank` of two on this machine, one rank each, then `rest`.
std::vector<std::string> one_of_two_nodes(const std::string& port, int node_rank,
                                          std::vector<std::string> rest) {
  std::vector<std::string> args = {"launch",
                                   "--nnodes",
                                   "2",
                                   "--node-rank",
                                   std::to_string(node_rank),
                                   "--master-addr",
                                   "127.0.0.1",
                                   "--master-port",
                                   port,
                                   "--token",
                                   "t",
                                   "-n",
                                   "1",
                                   "--no-trace"};
  args.insert(args.end(), rest.begin(), rest.end());
  return args;
}

// Nodes given different workload flags would meet in collectives of different sizes (Gloo
// aborted rank 0, both launchers exit 134): refused at the rendezvous on both, naming what
// differs. A node's own settings (--json, --blas-threads) may differ.
TEST_F(LaunchTest, NodesWithDifferentWorkloadsAreRefusedNamingTheDifference) {
  std::string port = std::to_string(free_port());
  auto node = [&](int node_rank, const char* hidden, const char* own) {
    return one_of_two_nodes(
        port, node_rank,
        {"--workload", "gpt", "--layers", "1", "--hidden", hidden, "--heads", "2", "--seq", "8",
         "--vocab", "16", "--ffn", "64", "--steps", "1", own});
  };
  auto both = [](std::vector<std::string> first, std::vector<std::string> second) {
    Partrain node0(std::move(first));
    Partrain node1(std::move(second));
    Finished a = node0.finish();
    return std::pair<Finished, Finished>(std::move(a), node1.finish());
  };
  const auto [a, b] = both(node(0, "32", "--json"), node(1, "64", "-q"));
  EXPECT_EQ(a.exit_code, 2) << a.err;
  EXPECT_EQ(b.exit_code, 2) << b.err;
  EXPECT_TRUE(contains(a.err,
                       "node 1's workload differs from node 0's: model/hidden 64 there, "
                       "32 here; give every node the same workload flags"))
      << a.err;
  EXPECT_TRUE(contains(b.err, "model/hidden 32 there, 64 here")) << b.err;
  EXPECT_FALSE(contains(a.err + b.err, "json")) << "a node's own output is its own";

  port = std::to_string(free_port());  // a fresh rendezvous
  const auto [c, d] = both(node(0, "32", "--blas-threads=2"), node(1, "32", "-q"));
  EXPECT_EQ(c.exit_code, 0) << c.err;
  EXPECT_EQ(d.exit_code, 0) << d.err;

  // Different --nproc-per-node: node 1 said only that the store's connection closed (exit 1).
  port = std::to_string(free_port());
  const auto [e, f] = both(one_of_two_nodes(port, 0, {"-n", "2", "--", "true"}),
                           one_of_two_nodes(port, 1, {"--", "true"}));
  EXPECT_EQ(e.exit_code, 2) << e.err;
  EXPECT_EQ(f.exit_code, 2) << f.err;
  EXPECT_TRUE(contains(e.err, "node 1 runs 1 worker but node 0 runs 2")) << e.err;
  EXPECT_TRUE(contains(f.err,
                       "node 0 runs 2 workers but node 1 runs 1: every node must use the "
                       "same --nproc-per-node"))
      << f.err;
}

// Launchers of two jobs on one port (different --rdzv-id), or of one job given different
// --nnodes, are told so at once by both sides (they had run as one world, or waited 5 min).
TEST_F(LaunchTest, AnotherJobsOrAnotherNnodesLauncherIsRefused) {
  auto both = [](std::vector<std::string> first, std::vector<std::string> second) {
    Partrain node0(std::move(first));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // node 0's record first
    Partrain node1(std::move(second));
    Finished a = node0.finish();
    return std::pair<Finished, Finished>(std::move(a), node1.finish());
  };
  std::string port = std::to_string(free_port());
  const auto [a, b] = both(one_of_two_nodes(port, 0, {"--rdzv-id", "A", "--", "true"}),
                           one_of_two_nodes(port, 1, {"--rdzv-id", "B", "--", "true"}));
  EXPECT_EQ(a.exit_code, 2) << a.err;
  EXPECT_EQ(b.exit_code, 2) << b.err;
  EXPECT_TRUE(contains(b.err, "node 0 joined the rendezvous at 127.0.0.1:" + port +
                                  " with --rdzv-id A but node 1 with --rdzv-id B: launchers of "
                                  "another job reached this store"))
      << b.err;
  EXPECT_TRUE(contains(a.err, "with --rdzv-id B but node 0 with --rdzv-id A")) << a.err;

  port = std::to_string(free_port());
  const auto [c, d] = both(one_of_two_nodes(port, 0, {"--nnodes", "3", "--", "true"}),
                           one_of_two_nodes(port, 1, {"--", "true"}));
  EXPECT_EQ(c.exit_code, 2) << c.err;
  EXPECT_EQ(d.exit_code, 2) << d.err;
  EXPECT_TRUE(contains(d.err, "node 0 was started with --nnodes 3 but node 1 with --nnodes 2"))
      << d.err;
  EXPECT_TRUE(contains(c.err, "node 1 was started with --nnodes 2 but node 0 with --nnodes 3"))
      << c.err;
}

// Two launchers given the same --node-rank would both run its ranks: the second is refused.
// (One that joined and is gone, stopped while the others waited, may be started again.)
TEST_F(LaunchTest, ANodeRankTakenTwiceIsRefused) {
  const std::string port = std::to_string(free_port());
  auto node = [&](int node_rank, const char* word) {
    return one_of_two_nodes(port, node_rank,
                            {"--", "sh", "-c", std::string("sleep 1; echo ") + word + "$RANK"});
  };
  Partrain node0(node(0, "zero"));
  Partrain first(node(1, "first"));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  Partrain second(node(1, "second"));
  const Finished a = node0.finish();
  const Finished b = first.finish();
  const Finished c = second.finish();
  EXPECT_EQ(a.exit_code, 0) << a.err;
  // Whichever came second (on a busy machine, possibly the one started later) is refused; the
  // other runs rank 1.
  const bool first_ran = b.exit_code == 0;
  const Finished& ran = first_ran ? b : c;
  const Finished& refused = first_ran ? c : b;
  EXPECT_EQ(ran.exit_code, 0) << ran.err;
  EXPECT_TRUE(contains(ran.out, first_ran ? "first1" : "second1")) << ran.out;
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_TRUE(contains(refused.err, "--node-rank 1 has already joined the rendezvous"))
      << refused.err;
  EXPECT_EQ(refused.out, "");
}

TEST_F(LaunchTest, FailureOnOneNodeStopsTheOtherWithTheSameSummary) {
  const std::string port = std::to_string(free_port());
  auto node = [&](int node_rank) {
    return std::vector<std::string>{
        "launch", "--nnodes", "2", "--node-rank", std::to_string(node_rank), "--master-addr",
        "127.0.0.1", "--master-port", port, "--token", "t", "-n", "2", "--", "sh", "-c",
        "if [ $RANK = 3 ]; then sleep 0.2; exit 5; fi; " + record_pids_and_sleep()};
  };
  Partrain node0(node(0));
  Partrain node1(node(1));
  Finished a = node0.finish();
  Finished b = node1.finish();
  EXPECT_EQ(a.exit_code, 5) << a.err;
  EXPECT_EQ(b.exit_code, 5) << b.err;
  EXPECT_TRUE(contains(a.err, "rank 3 (node 1")) << a.err;
  EXPECT_TRUE(contains(a.err, "on another node")) << a.err;
  EXPECT_LT(a.seconds, 10.0);
  expect_all_gone();
}

TEST_F(LaunchTest, RendezvousTimeoutNamesTheMissingNodeAndRanks) {
  const std::string port = std::to_string(free_port());
  Finished r = run_partrain({"launch", "--nnodes", "2", "--node-rank", "0", "--master-addr",
                             "127.0.0.1", "--master-port", port, "--rdzv-timeout", "1s", "--token",
                             "t", "-n", "2", "--", "true"});
  EXPECT_EQ(r.exit_code, 124) << r.err;
  EXPECT_TRUE(contains(r.err, "127.0.0.1:" + port)) << r.err;
  EXPECT_TRUE(contains(r.err, "missing: node 1 (ranks 2-3)")) << r.err;
  // The command it suggests joins (without the token a node is turned away); the secret itself
  // is not printed.
  EXPECT_TRUE(contains(r.err, "--master-port " + port + " --token <the same token>")) << r.err;
  EXPECT_LT(r.seconds, 5.0);
}

TEST_F(LaunchTest, MasterUnreachableNamesAddressAndNodeZero) {
  const std::string port = std::to_string(free_port());
  Finished r = run_partrain({"launch", "--nnodes", "2", "--node-rank", "1", "--master-addr",
                             "127.0.0.1", "--master-port", port, "--rdzv-timeout", "1s", "--token",
                             "t", "-n", "1", "--", "true"});
  EXPECT_EQ(r.exit_code, 124) << r.err;
  EXPECT_TRUE(contains(r.err, "127.0.0.1:" + port)) << r.err;
  EXPECT_TRUE(contains(r.err, "node 0 (rank 0)")) << r.err;
}

TEST_F(LaunchTest, InvalidNprocIsAUsageError) {
  for (const char* n : {"0", "-2", "four"}) {
    Finished r = run_partrain({"launch", "-n", n, "--", "true"});
    EXPECT_EQ(r.exit_code, 2) << n << ": " << r.err;
    EXPECT_TRUE(contains(r.err, "nproc-per-node")) << r.err;
  }
}

TEST_F(LaunchTest, MissingCommandIsAUsageErrorSayingWhatToPass) {
  Finished r = run_partrain({"launch", "-n", "2"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(contains(r.err, "after `--`")) << r.err;
}

TEST_F(LaunchTest, CommandNotFoundGives127) {
  Finished r = run_partrain({"launch", "-n", "2", "--", "partrain-nonexistent-cmd"});
  EXPECT_EQ(r.exit_code, 127) << r.err;
  EXPECT_TRUE(contains(r.err, "command not found: 'partrain-nonexistent-cmd'")) << r.err;
  EXPECT_TRUE(contains(r.err, "PATH=")) << r.err;
}

}  // namespace
}  // namespace partrain

namespace partrain {
namespace {

double children_cpu_seconds() {
  rusage usage{};
  ::getrusage(RUSAGE_CHILDREN, &usage);
  auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// The launcher sleeps while its workers run: a supervisor that spins would take a core from the
// ranks it supervises (it once did: a past deadline made its poll time out at once).
TEST(LaunchIdle, LauncherUsesLittleCpuWhileWorkersSleep) {
  double before = children_cpu_seconds();
  Finished r = run_partrain({"launch", "-n", "2", "--", "sleep", "1.5"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  double used = children_cpu_seconds() - before;
  // Start-up and teardown cost tens of milliseconds; spinning for 1.5 s would cost over 1 s.
  EXPECT_LT(used, 0.5) << "launcher and workers used " << used << " s of CPU";
}

}  // namespace
}  // namespace partrain
