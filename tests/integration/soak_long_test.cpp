// Soak: PARTRAIN_SOAK_LAUNCHES (default 200) consecutive short 4-rank `--workload mlp` launches,
// each with a random fault (none, slow, crash, exit, hang, stop, desync, oom; random rank, step,
// code), checking every one for the documented exit code (docs/reliability.md), a readable
// trace with the expected run status, no worker left running and no file left behind in the
// launcher's temporary directory (flight dumps) or its collector directory. Label soak, left out
// of `make test` like long: run it with `ctest -L soak`; PARTRAIN_SOAK_SEED replays a sequence.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <system_error>
#include <vector>

#include "tests/integration/command_runner.h"
#include "tests/support/trace_query.h"

namespace partrain {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::run_partrain;

constexpr const char* kLaunch =
    "-q launch -n 4 --workload mlp --layers 2 --hidden 32 --micro-batch 1 --steps 3 "
    "--peak-flops 1e9 --grace 3s";

struct Fault {
  std::string kind;  // none, slow, crash, exit, hang, stop, desync, oom
  int rank = 0;
  int step = 0;
  int code = 1;  // exit
  int ms = 0;    // slow

  std::string flags() const {
    if (kind == "none") return "";
    std::string spec = fmt::format("--inject {}:rank={},step={}", kind, rank, step);
    if (kind == "slow") spec += fmt::format(",ms={}", ms);
    if (kind == "exit") spec += fmt::format(",code={}", code);
    // A hang, stop or desync ends in the others' watchdog: 2 s instead of the default 300 s.
    if (kind == "hang" || kind == "stop" || kind == "desync") spec += " --collective-timeout 2s";
    return spec;
  }
  std::string text() const { return kind == "none" ? "no fault" : flags(); }
  bool completes() const { return kind == "none" || kind == "slow"; }
  // The launcher's documented exit codes (docs/reliability.md, "Fault injection").
  bool expected_exit(int exit_code) const {
    if (completes()) return exit_code == 0;
    if (kind == "crash") return exit_code == 134;
    if (kind == "exit") return exit_code == code;
    if (kind == "hang" || kind == "stop") return exit_code == 124;
    if (kind == "desync") return exit_code == 124 || exit_code == 1;
    return exit_code == 1;  // oom
  }
};

Fault random_fault(std::mt19937_64& random) {
  static const std::vector<std::string> kKinds = {"none", "slow", "crash",  "exit",
                                                  "hang", "stop", "desync", "oom"};
  Fault fault;
  fault.kind = kKinds[std::uniform_int_distribution<size_t>(0, kKinds.size() - 1)(random)];
  fault.rank = std::uniform_int_distribution<int>(0, 3)(random);
  fault.step = std::uniform_int_distribution<int>(0, 2)(random);
  fault.code = std::uniform_int_distribution<int>(1, 255)(random);
  fault.ms = std::uniform_int_distribution<int>(10, 100)(random);
  return fault;
}

int env_int(const char* name, int fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? std::atoi(value) : fallback;
}

// Processes whose environment holds `marker` (workers inherit the launcher's environment).
std::vector<pid_t> processes_with(const std::string& marker) {
  std::vector<pid_t> pids;
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator("/proc", error)) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "environ", std::ios::binary);
    const std::string environ((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
    for (size_t begin = 0; begin < environ.size();) {
      size_t end = environ.find('\0', begin);
      if (end == std::string::npos) end = environ.size();
      if (environ.compare(begin, end - begin, marker) == 0) {
        pids.push_back(static_cast<pid_t>(std::stol(name)));
        break;
      }
      begin = end + 1;
    }
  }
  return pids;
}

// Everything under `dir` (recursively), which is then emptied so the next launch starts clean.
std::vector<std::string> take_leftovers(const fs::path& dir) {
  std::vector<std::string> found;
  std::error_code error;
  for (auto it = fs::recursive_directory_iterator(dir, error);
       it != fs::recursive_directory_iterator(); it.increment(error)) {
    found.push_back(fs::relative(it->path(), dir, error).string());
  }
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, error)) {
    fs::remove_all(entry.path(), error);
  }
  return found;
}

struct Tally {
  int launches = 0;
  int exit_mismatches = 0;
  int status_mismatches = 0;
  int failing_rank_mismatches = 0;
  int unreadable_traces = 0;
  int leaked_processes = 0;
  int leaked_files = 0;
  std::map<std::string, std::pair<int, double>> by_kind;  // launches, seconds
};

TEST(SoakTest, RandomFaultsGiveTheirExitCodesAndLeaveNothingBehind) {
  const int launches = env_int("PARTRAIN_SOAK_LAUNCHES", 200);
  const uint64_t seed = static_cast<uint64_t>(env_int("PARTRAIN_SOAK_SEED", 0)) != 0
                            ? static_cast<uint64_t>(env_int("PARTRAIN_SOAK_SEED", 0))
                            : std::random_device{}() % 1'000'000 + 1;
  std::printf("soak: %d launches, PARTRAIN_SOAK_SEED=%llu\n", launches,
              static_cast<unsigned long long>(seed));
  std::mt19937_64 random(seed);

  // The launcher's TMPDIR (flight-dump directories) and XDG_RUNTIME_DIR (collector sockets) are
  // directories of this test's own, so whatever a launch leaves there is that launch's.
  const fs::path root =
      fs::path(::testing::TempDir()) / fmt::format("partrain_soak_{}", ::getpid());
  const fs::path tmp = root / "tmp", runtime = root / "runtime", traces = root / "traces";
  for (const fs::path& dir : {tmp, runtime, traces}) fs::create_directories(dir);

  Tally tally;
  int reported = 0;  // failures printed in full: the first few
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < launches; ++i) {
    const Fault fault = random_fault(random);
    const std::string run_id = fmt::format("soak-{}-{}", ::getpid(), i);
    const std::string marker = "PARTRAIN_SOAK_LAUNCH=" + run_id;
    const fs::path trace = traces / (run_id + ".db");
    const auto began = std::chrono::steady_clock::now();
    const CommandResult r =
        run_partrain(fmt::format("{} {} --run-id {} --trace {}", kLaunch, fault.flags(), run_id,
                                 trace.string()),
                     fmt::format("TMPDIR={} XDG_RUNTIME_DIR={} {}", tmp.string(),
                                 runtime.string(), marker));
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
    ++tally.launches;
    tally.by_kind[fault.kind].first += 1;
    tally.by_kind[fault.kind].second += seconds;

    std::vector<std::string> problems;
    // Every worker is reaped before the launcher exits: none may outlive it.
    const std::vector<pid_t> leaked = processes_with(marker);
    if (!leaked.empty()) {
      tally.leaked_processes += static_cast<int>(leaked.size());
      problems.push_back(fmt::format("{} process(es) left running", leaked.size()));
      for (pid_t pid : leaked) ::kill(pid, SIGKILL);
    }
    if (!fault.expected_exit(r.exit_code)) {
      ++tally.exit_mismatches;
      problems.push_back(fmt::format("exit code {}", r.exit_code));
    }
    // Listed before the trace is opened here (a reader of a WAL file adds -shm beside it).
    std::vector<std::string> files = take_leftovers(tmp);
    for (const std::string& file : take_leftovers(runtime / "partrain")) {
      files.push_back("$XDG_RUNTIME_DIR/partrain/" + file);
    }
    for (const fs::directory_entry& entry : fs::directory_iterator(traces)) {
      if (entry.path() != trace) files.push_back(entry.path().filename().string());
    }
    if (!files.empty()) {
      tally.leaked_files += static_cast<int>(files.size());
      problems.push_back("files left: " + fmt::format("{}", fmt::join(files, ", ")));
    }
    {  // the connection is closed before the files are moved
      auto db = profiler::SqliteDb::open(trace.string(), SQLITE_OPEN_READONLY);
      if (!db.is_ok()) {
        ++tally.unreadable_traces;
        problems.push_back("trace unreadable: " + db.status().message());
      } else {
        const std::string status = testing::query_rows(*db, "SELECT status FROM runs");
        const std::string check = testing::query_rows(*db, "PRAGMA quick_check");
        if (check != "ok\n") {
          ++tally.unreadable_traces;
          problems.push_back("trace quick_check: " + check);
        }
        const std::string expected = fault.completes() ? "completed\n" : "failed\n";
        if (status != expected) {
          ++tally.status_mismatches;
          problems.push_back("run status " + (status.empty() ? "(none)" : status));
        }
        // A rank that ends itself is the first to fail (the others fail because it left).
        if (fault.kind == "crash" || fault.kind == "exit" || fault.kind == "oom") {
          const std::string failing = testing::query_rows(*db, "SELECT failing_rank FROM runs");
          if (failing != fmt::format("{}\n", fault.rank)) {
            ++tally.failing_rank_mismatches;
            problems.push_back("failing rank " + failing);
          }
        }
      }
    }
    if (problems.empty()) {
      for (const fs::directory_entry& entry : fs::directory_iterator(traces)) {
        fs::remove(entry.path());
      }
    } else {
      // Kept for a look: the trace and whatever was left beside it, under a name of its own.
      fs::path kept = root / "kept" / run_id;
      fs::create_directories(kept);
      for (const fs::directory_entry& entry : fs::directory_iterator(traces)) {
        fs::rename(entry.path(), kept / entry.path().filename());
      }
      if (++reported <= 10) {
        ADD_FAILURE() << "launch " << i << " (" << fault.text() << ", " << seconds
                      << " s): " << fmt::format("{}", fmt::join(problems, "; "))
                      << "\nstderr:\n" << r.err << "\nkept in " << kept;
      }
    }
  }
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::printf("soak: %d launches in %.1f s (%.2f s each); exit-code mismatches %d, status "
              "mismatches %d, failing-rank mismatches %d, unreadable traces %d, leaked processes "
              "%d, leaked files %d\n",
              tally.launches, wall, wall / std::max(1, tally.launches), tally.exit_mismatches,
              tally.status_mismatches, tally.failing_rank_mismatches, tally.unreadable_traces,
              tally.leaked_processes, tally.leaked_files);
  for (const auto& [kind, figures] : tally.by_kind) {
    std::printf("soak:   %-7s %4d launches, %.2f s each\n", kind.c_str(), figures.first,
                figures.second / figures.first);
  }
  EXPECT_EQ(tally.exit_mismatches, 0);
  EXPECT_EQ(tally.status_mismatches, 0);
  EXPECT_EQ(tally.failing_rank_mismatches, 0);
  EXPECT_EQ(tally.unreadable_traces, 0);
  EXPECT_EQ(tally.leaked_processes, 0);
  EXPECT_EQ(tally.leaked_files, 0);
  if (reported == 0) fs::remove_all(root);
}

}  // namespace
}  // namespace partrain
