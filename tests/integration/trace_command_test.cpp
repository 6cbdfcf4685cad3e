// `partrain trace -- CMD`: any command runs under a collector with the injection environment;
// ranks of a foreign launcher's processes appear through libpartrain_inject.so, partrain's own
// workers record everything themselves, and the command's exit code comes back.
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "tests/integration/command_runner.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/trace_query.h"

namespace partrain::testing {
namespace {
namespace fs = std::filesystem;

std::string query(const fs::path& db, const std::string& sql) {
  return TraceQuery(db).rows(sql);
}

class TraceCommandTest : public ::testing::Test {
 protected:
  std::string db(const char* name) const { return (dir_ / name).string(); }
  ScratchDir scratch_;
  const fs::path& dir_ = scratch_.path();
};

TEST_F(TraceCommandTest, ForeignRanksAppearThroughTheInjectionLibrary) {
  CommandResult r = run_partrain(fmt::format("trace -o {} -- {} launch -n 2 -- sleep 0.2",
                                             db("foreign.db"), PARTRAIN_BINARY));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(query(db("foreign.db"), "SELECT status FROM runs"), "completed\n");
  EXPECT_EQ(query(db("foreign.db"), "SELECT rank, count(DISTINCT pid) FROM ranks GROUP BY rank"),
            "0|1\n1|1\n");
  // Each rank's lifetime: at least the 0.2 s it slept.
  EXPECT_EQ(query(db("foreign.db"),
                  "SELECT rank, dur_ns >= 200000000 FROM slices WHERE name = 'process' "
                  "ORDER BY rank"),
            "0|1\n1|1\n");
  EXPECT_NE(r.err.find("workers record into the collector of an outer `partrain trace`"),
            std::string::npos)
      << r.err;
}

// Ranks a foreign launcher started: the run's world size is their WORLD_SIZE, and without one the
// ranks seen (analyze said "world size 0, ranks 0-1"); each process's lifetime is on its main
// thread's track (it was on the helper thread that recorded it at exit).
TEST_F(TraceCommandTest, AForeignRunsWorldSizeAndEachProcessOnItsMainTrack) {
  CommandResult r = run_partrain(fmt::format(
      "trace -o {} -- sh -c 'RANK=0 WORLD_SIZE=2 sleep 0.1 & RANK=1 WORLD_SIZE=2 sleep 0.1; "
      "wait'",
      db("sized.db")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(query(db("sized.db"), "SELECT world_size FROM runs"), "2\n");
  EXPECT_EQ(query(db("sized.db"),
                  "SELECT rank, track FROM slices WHERE name = 'process' "
                  "ORDER BY rank"),
            "0|main\n1|main\n");

  r = run_partrain(fmt::format("trace -o {} -- sh -c 'RANK=0 sleep 0.1 & RANK=1 sleep 0.1; wait'",
                               db("unsized.db")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  CommandResult analysis = run_partrain("analyze --json " + db("unsized.db"));
  ASSERT_EQ(analysis.exit_code, 0) << analysis.err;
  EXPECT_EQ(parse_json_output(analysis.out)["world_size"], 2) << analysis.out;
  CommandResult top = run_partrain("top --json " + db("unsized.db"));
  ASSERT_EQ(top.exit_code, 0) << top.err;
  EXPECT_EQ(parse_json_output(top.out)["world_size"], 2) << top.out;
}

// SIGKILL of the tracer takes the command's own children with it (the orphan guard), not only
// the command (PR_SET_PDEATHSIG): the background sleep had run on under init.
TEST_F(TraceCommandTest, SigkillOfTheTracerTakesTheCommandsChildrenToo) {
  const fs::path pid_file = dir_ / "sleep.pid";
  CommandResult r = run_shell(fmt::format(
      "{} trace -o {} -- sh -c 'sleep 30 & echo $! > {}; wait' & tracer=$!; i=0; "
      "while [ ! -s {} ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; kill -9 $tracer",
      PARTRAIN_BINARY, db("killed.db"), pid_file.string(), pid_file.string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(pid_file);
  int pid = 0;
  ASSERT_TRUE(in >> pid) << "the command never started";
  EXPECT_TRUE(ends_within(pid, std::chrono::seconds(5)))
      << "the command's child " << pid << " outlived the killed tracer";
}

// A rank in a session of its own (torchrun starts each worker with start_new_session) is out of
// the command's process group, which is all the guard killed: it ran on under init after the
// tracer's SIGKILL. The guard now takes every rank process the collector heard from.
TEST_F(TraceCommandTest, SigkillOfTheTracerTakesRanksInSessionsOfTheirOwn) {
  const fs::path pid_file = dir_ / "rank.pid";
  CommandResult r = run_shell(fmt::format(
      "{0} trace -o {1} -- sh -c 'RANK=0 WORLD_SIZE=1 setsid sleep 30 & echo $! > {2}; wait' & "
      "tracer=$!; i=0; while [ \"$(cat /proc/$(cat {2} 2>/dev/null)/comm 2>/dev/null)\" != sleep ] "
      "&& [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; sleep 0.5; kill -9 $tracer",
      PARTRAIN_BINARY, db("session.db"), pid_file.string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(pid_file);
  int pid = 0;
  ASSERT_TRUE(in >> pid) << "the command never started";
  const bool ended = ends_within(pid, std::chrono::seconds(5));
  if (!ended) ::kill(pid, SIGKILL);
  EXPECT_TRUE(ended) << "the rank " << pid << " in a session of its own outlived the tracer";
}

// A rank that ends with _exit (dash's exit builtin, Python's os._exit) ends its tracing as exit
// does: its lifetime is recorded and it says goodbye. It had skipped atexit, so the process slice
// was lost and the collector counted a crash.
TEST_F(TraceCommandTest, ARankEndingWithUnderscoreExitIsRecordedWhole) {
  CommandResult r =
      run_partrain(fmt::format("trace -o {} -- sh -c 'sleep 0.1; exit 3'", db("dash.db")),
                   "RANK=0 WORLD_SIZE=1");
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_EQ(query(db("dash.db"), "SELECT count(*) FROM slices WHERE name = 'process'"), "1\n");
  EXPECT_EQ(query(db("dash.db"),
                  "SELECT count(*) FROM stats WHERE name = "
                  "'collector_unclean_disconnects'"),
            "0\n");
  r = run_partrain(
      fmt::format("trace -o {} -- python3 -c 'import os; os._exit(4)'", db("os_exit.db")),
      "RANK=0 WORLD_SIZE=1");
  EXPECT_EQ(r.exit_code, 4) << r.err;
  EXPECT_GE(
      std::stoi(query(db("os_exit.db"), "SELECT count(*) FROM slices WHERE name = 'process'")), 1);
  EXPECT_EQ(query(db("os_exit.db"),
                  "SELECT count(*) FROM stats WHERE name = "
                  "'collector_unclean_disconnects'"),
            "0\n");
}

// A rank started with stdin or stdout closed (`0<&-`, a daemon's) sees them closed as it would
// untraced: the injection library's socket, eventfds and pipes land at 3 or above. The socket
// took fd 0 (the program's stdin read hung on it) or fd 1 (its prints went to the collector,
// which dropped the connection as "not a partrain collector frame").
TEST_F(TraceCommandTest, ARankStartedWithStdinOrStdoutClosedSeesThemClosed) {
  const fs::path program = dir_ / "streams.py";
  std::ofstream(program) << "import os, sys\n"
                            "def state(fd):\n"
                            "    try:\n"
                            "        os.fstat(fd)\n"
                            "        return 'open'\n"
                            "    except OSError:\n"
                            "        return 'closed'\n"
                            "seen = f'fd0 {state(0)} fd1 {state(1)}'\n"
                            "text = repr(sys.stdin.read(10)) if sys.stdin else 'None'\n"
                            "print('printed to a closed stdout' * 100)\n"
                            "with open(sys.argv[1], 'w') as out:\n"
                            "    out.write(f'stdin {text} {seen}')\n";
  struct Case {
    const char* redirect;
    const char* seen;
  };
  for (const Case& c : {Case{"0<&-", "stdin None fd0 closed fd1 open"},
                        Case{"1>&- </dev/null", "stdin '' fd0 open fd1 closed"},
                        Case{"0<&- 1>&-", "stdin None fd0 closed fd1 closed"}}) {
    SCOPED_TRACE(c.redirect);
    const fs::path seen = dir_ / "seen";
    fs::remove(seen);
    const fs::path trace = dir_ / "closed.db";
    fs::remove(trace);
    // The rank closes them itself (exec in the command), as a job script would: `partrain
    // trace` keeps its own standard streams.
    CommandResult r = run_shell(fmt::format(
        "RANK=0 WORLD_SIZE=1 timeout 30 {} trace -o {} -- sh -c 'exec python3 {} {} {}' </dev/null",
        partrain_binary(), trace.string(), program.string(), seen.string(), c.redirect));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(read_file(seen.string()), c.seen);
    EXPECT_EQ(r.err.find("not a partrain collector frame"), std::string::npos) << r.err;
    EXPECT_EQ(query(trace, "SELECT rank FROM ranks"), "0\n");
    EXPECT_EQ(query(trace, "SELECT count(*) FROM stats WHERE name = 'collector_rejected_clients'"),
              "0\n");
  }
}

// Two processes given the same rank that neither started the other (siblings a script gave one
// RANK by mistake) both record as that rank: said as a warning and a data_loss stat, never
// silently. A wrapper and the program it runs are one rank (ACommandTracedUnderAnOuterRank...).
TEST_F(TraceCommandTest, TwoProcessesRecordingAsOneRankAreSaid) {
  CommandResult r =
      run_partrain(fmt::format("trace -o {} -- sh -c 'RANK=0 sleep 0.5 & RANK=0 "
                               "sleep 0.5 & wait'",
                               db("shared.db")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("both record as rank 0 (neither started the other)"), std::string::npos)
      << r.err;
  EXPECT_EQ(query(db("shared.db"),
                  "SELECT rank, value, severity FROM stats WHERE name = "
                  "'rank_recorded_by_two_processes'"),
            "0|1|data_loss\n");
}

// A traced rank's mark for the processes it starts (PARTRAIN_GROUPS_PID: they are not the rank)
// does not reach the command of a `partrain trace` one of them runs: its processes are ranks of
// that trace, and would have been left untraced at their first process group.
TEST_F(TraceCommandTest, ARanksMarkForItsSubprocessesStopsAtANewTrace) {
  CommandResult r = run_partrain(
      fmt::format("trace -o {} -- sh -c 'echo \"mark=${{PARTRAIN_GROUPS_PID:-none}}\"'",
                  db("nested.db")),
      "PARTRAIN_GROUPS_PID=1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "mark=none\n");
}

// Two `partrain trace` runs started at once with one PARTRAIN_RUN_ID in one directory: each
// traces, into <run-id>.db and the next free <run-id>.2.db. The other run is played by the test,
// which holds the writer lock of the default name the moment before its file is made: the run
// failed ("being written by another process") where a name already there moves on.
TEST_F(TraceCommandTest, ADefaultNameAnotherRunIsTakingMovesOnToTheNextFree) {
  fs::create_directories(dir_ / "partrain-runs");
  const int lock = ::open((dir_ / "partrain-runs" / "job42.db-writer").c_str(),
                          O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(lock, 0);
  ASSERT_EQ(::flock(lock, LOCK_EX | LOCK_NB), 0);
  CommandResult r = run_shell(fmt::format("cd {} && PARTRAIN_RUN_ID=job42 {} trace -- true",
                                          dir_.string(), partrain_binary()));
  ::close(lock);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("tracing into partrain-runs/job42.2.db"), std::string::npos) << r.err;
  EXPECT_EQ(query(dir_ / "partrain-runs" / "job42.2.db", "SELECT run_id, status FROM runs"),
            "job42|completed\n");
}

// The collector directory of a run id is shared by its runs on a host: a run that fails to start
// leaves it to the run about to bind its socket there (it removed it, and that run failed: "cannot
// listen on the collector socket ...: No such file or directory"). A default trace name's
// failure does not blame a --trace FILE that was never given.
TEST_F(TraceCommandTest, ARunThatCannotStartLeavesTheSharedCollectorDirectory) {
  const fs::path runtime = dir_ / "runtime";
  fs::create_directories(runtime / "partrain" / "job43");
  fs::permissions(runtime / "partrain", fs::perms::owner_all, fs::perm_options::replace);
  fs::permissions(runtime / "partrain" / "job43", fs::perms::owner_all, fs::perm_options::replace);
  const fs::path trace = dir_ / "locked.db";
  const int lock = ::open((dir_ / "locked.db-writer").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(lock, 0);
  ASSERT_EQ(::flock(lock, LOCK_EX | LOCK_NB), 0);
  CommandResult r =
      run_shell(fmt::format("XDG_RUNTIME_DIR={} PARTRAIN_RUN_ID=job43 {} trace -o {} -- true",
                            runtime.string(), partrain_binary(), trace.string()));
  ::close(lock);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("is being written by another process"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::is_directory(runtime / "partrain" / "job43"));

  std::ofstream(runtime / "partrain" / "job44") << "not a directory";
  r = run_shell(fmt::format("cd {} && XDG_RUNTIME_DIR={} PARTRAIN_RUN_ID=job44 {} trace -- true",
                            dir_.string(), runtime.string(), partrain_binary()));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("job44 exists but is not a directory"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("--trace FILE"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "partrain-runs" / "job44.db"));
}

// RANK set for `partrain trace` itself (exported in the shell, a batch script's): the command it
// starts is that rank, not a helper of the tracer. Its own children, which inherit the same
// RANK, stay helpers of it.
TEST_F(TraceCommandTest, ACommandTracedUnderAnOuterRankIsThatRank) {
  CommandResult r = run_partrain(
      fmt::format("trace -o {} -- bash -c 'sleep 0.1; sleep 0.1; true'", db("outer_rank.db")),
      "RANK=0 WORLD_SIZE=1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(query(db("outer_rank.db"), "SELECT rank, count(DISTINCT pid) FROM ranks GROUP BY rank"),
            "0|1\n");
  EXPECT_EQ(query(db("outer_rank.db"), "SELECT count(*) FROM slices WHERE name = 'process'"),
            "1\n");
}

// A rank that replaces itself with exec (a shell's exec, `#!/usr/bin/env python3`, pyenv's shims)
// ends each image's tracing as exit does: no connection ends without a goodbye, and the rank's
// row and each image's lifetime are there. Without it the collector counted every exec as a
// crash (collector_unclean_disconnects).
TEST_F(TraceCommandTest, ARankThatExecsEndsEachImageCleanly) {
  CommandResult r =
      run_partrain(fmt::format("trace -o {} -- {} launch -n 2 -- sh -c 'exec env sleep 0.1'",
                               db("exec.db"), PARTRAIN_BINARY));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(query(db("exec.db"),
                  "SELECT count(*) FROM stats WHERE name = "
                  "'collector_unclean_disconnects'"),
            "0\n");
  EXPECT_EQ(query(db("exec.db"), "SELECT rank, count(DISTINCT pid) FROM ranks GROUP BY rank"),
            "0|1\n1|1\n");
  // sh, env and sleep: one pid, three images, each a process slice.
  EXPECT_EQ(query(db("exec.db"),
                  "SELECT rank, count(*) FROM slices WHERE name = 'process' GROUP BY rank"),
            "0|3\n1|3\n");
  // An exec that fails leaves the process running, traced again: here one of a file that passes
  // for a program (a regular, executable file) but is none; Python goes on to exit 3, cleanly.
  const fs::path not_a_program = dir_ / "not-a-program";
  { std::ofstream(not_a_program) << "\x01\x02 not an executable format"; }
  fs::permissions(not_a_program, fs::perms::owner_all);
  CommandResult failed = run_partrain(
      fmt::format("trace -o {} -- {} launch -n 1 -- python3 -c \"import os, sys\n"
                  "try:\n    os.execv('{}', ['x'])\nexcept OSError:\n    sys.exit(3)\"",
                  db("failed_exec.db"), PARTRAIN_BINARY, not_a_program.string()));
  EXPECT_EQ(failed.exit_code, 3) << failed.err;
  EXPECT_EQ(query(db("failed_exec.db"),
                  "SELECT count(*) FROM stats WHERE name = "
                  "'collector_unclean_disconnects'"),
            "0\n");
  // The image before the failed exec and the same image after it (python3 may itself be
  // reached through exec'ing shims, each an image more).
  EXPECT_GE(
      std::stoi(query(db("failed_exec.db"), "SELECT count(*) FROM slices WHERE name = 'process'")),
      2);
}

// A rank that has recorded no collective has no flight to dump: a SIGTERM takes effect at once,
// as without partrain, instead of reaching the program once the relay's thread has dumped and
// flushed. Relayed, it came late: the shell below printed "after-kill" (and a `bash -c '...;
// sleep 30'` rank, whose last command bash execs, lost it to the exec and ran out its sleep).
TEST_F(TraceCommandTest, AStopSignalToARankWithNothingToDumpTakesEffectAtOnce) {
  const fs::path flight_dir = dir_ / "flight";
  fs::create_directories(flight_dir);
  CommandResult r = run_partrain(
      fmt::format("trace -o {} -- env RANK=0 WORLD_SIZE=1 bash -c 'kill -TERM $$; echo after-kill'",
                  db("stopped.db")),
      fmt::format("PARTRAIN_FLIGHT_DIR={}", flight_dir.string()));
  EXPECT_EQ(r.exit_code, 143) << r.err;
  EXPECT_EQ(r.out.find("after-kill"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::is_empty(flight_dir));
}

TEST_F(TraceCommandTest, PartrainWorkersRecordThemselvesIntoTheOuterTrace) {
  CommandResult r = run_partrain(fmt::format(
      "trace -o {} -- {} launch -n 2 --workload mlp --layers 2 --hidden 32 --steps 2",
      db("workload.db"), PARTRAIN_BINARY));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(query(db("workload.db"), "SELECT count(*) FROM ranks"), "2\n");
  EXPECT_EQ(query(db("workload.db"), "SELECT count(*) FROM steps"), "4\n");
  EXPECT_EQ(query(db("workload.db"),
                  "SELECT count(*) > 0 FROM collectives WHERE op = 'all_reduce'"),
            "1\n");
  // No process was recorded twice: the injection library stays inert in partrain's workers.
  EXPECT_EQ(query(db("workload.db"), "SELECT count(*) FROM slices WHERE name = 'process'"), "0\n");
  // What only the inner launcher knows, added to the tracer's run row and ranks: the world size,
  // the workload's config and every rank's exit; the command stays the one that was traced.
  EXPECT_EQ(
      query(db("workload.db"),
            "SELECT world_size, json_extract(config, '$.workload'), command LIKE '%trace -o%' "
            "FROM runs"),
      "2|mlp|1\n");
  EXPECT_EQ(query(db("workload.db"), "SELECT rank, exit_code FROM ranks ORDER BY rank"),
            "0|0\n1|0\n");
  // A failing inner run: its ranks' exits as the launcher saw them (rank 1 stopped by SIGTERM).
  CommandResult failed = run_partrain(fmt::format(
      "trace -o {} -- {} launch -n 2 -- bash -c 'if [ $RANK = 0 ]; then exit 3; fi; sleep 30'",
      db("failed_inner.db"), PARTRAIN_BINARY));
  EXPECT_EQ(failed.exit_code, 3) << failed.err;
  EXPECT_EQ(
      query(db("failed_inner.db"), "SELECT rank, exit_code, exit_signal FROM ranks ORDER BY rank"),
      "0|3|0\n1|NULL|15\n")
      << failed.err;
  EXPECT_EQ(query(db("failed_inner.db"), "SELECT world_size, status FROM runs"), "2|failed\n");
  // And which rank failed first, which analyze reports first, as for a plain launch.
  const CommandResult analyzed = run_partrain("analyze " + db("failed_inner.db"));
  EXPECT_NE(analyzed.out.find("rank_failed (rank 0)"), std::string::npos) << analyzed.out;
}

TEST_F(TraceCommandTest, EnvironmentExitCodesAndRefusals) {
  CommandResult r = run_partrain(fmt::format(
      "trace -o {} -- sh -c 'echo $PARTRAIN_COLLECTOR; echo $LD_PRELOAD; "
      "echo $CUDA_INJECTION64_PATH; echo $PARTRAIN_RUN_ID; exit 5'",
      db("env.db")));
  EXPECT_EQ(r.exit_code, 5) << r.err;
  EXPECT_NE(r.out.find("/collector-"), std::string::npos) << r.out;  // <dir>/collector-<pid>.sock
  EXPECT_NE(r.out.find("libpartrain_inject.so\n"), std::string::npos) << r.out;
  EXPECT_EQ(query(db("env.db"), "SELECT status FROM runs"), "failed\n");
  const std::string run_id = query(db("env.db"), "SELECT run_id FROM runs");
  EXPECT_NE(r.out.find(run_id), std::string::npos) << r.out << run_id;

  r = run_partrain(fmt::format("trace -o {} -- true", db("env.db")));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("already exists"), std::string::npos) << r.err;
  r = run_partrain("trace");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no command to trace"), std::string::npos) << r.err;
  // A command that cannot start leaves no trace (a second try with the same -o found one there,
  // and a bare analyze would pick it up as the newest run); a path is not searched for in PATH.
  r = run_partrain(fmt::format("trace -o {} -- no-such-command-xyz", db("missing.db")));
  EXPECT_EQ(r.exit_code, 127) << r.err;
  EXPECT_NE(r.err.find("command not found: 'no-such-command-xyz' (searched PATH="),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(db("missing.db")));
  r = run_partrain(fmt::format("trace -o {} -- /no/such/program", db("missing.db")));
  EXPECT_EQ(r.exit_code, 127) << r.err;
  EXPECT_NE(r.err.find("command not found: '/no/such/program' (no such file)"), std::string::npos)
      << r.err;
  r = run_partrain(fmt::format("trace -o {} -- {}", db("missing.db"), dir_.string()));
  EXPECT_EQ(r.exit_code, 126) << r.err;
  EXPECT_NE(r.err.find("it is a directory"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(db("missing.db")));
  r = run_partrain(fmt::format("launch -n 2 --trace {} -- no-such-command-xyz", db("missing.db")));
  EXPECT_EQ(r.exit_code, 127) << r.err;
  EXPECT_FALSE(fs::exists(db("missing.db")));
}

// `trace` names its flags as `launch` does (--trace FILE, --trace-max-size SIZE, the same
// PARTRAIN_TRACE variable), and the spellings it had before (-o, --output, --max-size) still
// work and are listed beside them in --help.
TEST_F(TraceCommandTest, TheTraceFlagsAreSpelledAsLaunchsAndTheOldSpellingsStillWork) {
  for (const char* spelling : {"--trace", "-o", "--output"}) {
    const std::string file = db(fmt::format("by{}.db", spelling).c_str());  // by--trace.db
    CommandResult r = run_partrain(fmt::format("trace {} {} -- true", spelling, file));
    EXPECT_EQ(r.exit_code, 0) << spelling << ": " << r.err;
    EXPECT_EQ(query(file, "SELECT status FROM runs"), "completed\n") << spelling;
  }
  for (const char* spelling : {"--trace-max-size", "--max-size"}) {
    CommandResult r = run_partrain(fmt::format("trace {} 10K --trace {} -- true", spelling,
                                               db("small.db")));
    EXPECT_EQ(r.exit_code, 2) << spelling << ": " << r.err;
    EXPECT_NE(r.err.find("--trace-max-size/--max-size 10K: a trace needs at least 1M"),
              std::string::npos)
        << r.err;
    r = run_partrain(fmt::format("trace {} 2M --trace {} -- true", spelling,
                                 db(fmt::format("limit{}.db", spelling).c_str())));
    EXPECT_EQ(r.exit_code, 0) << spelling << ": " << r.err;
  }
  CommandResult r = run_partrain("trace -- true", "PARTRAIN_TRACE=" + db("from-env.db"));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(db("from-env.db"))) << r.err;
  // The same names in both commands' help, the old ones beside them.
  CommandResult trace_help = run_partrain("trace --help");
  EXPECT_NE(trace_help.out.find("-o,--trace,--output TEXT"), std::string::npos) << trace_help.out;
  EXPECT_NE(trace_help.out.find("--trace-max-size,--max-size TEXT"), std::string::npos)
      << trace_help.out;
  CommandResult launch_help = run_partrain("launch --help");
  EXPECT_NE(launch_help.out.find("  --trace TEXT"), std::string::npos) << launch_help.out;
  EXPECT_NE(launch_help.out.find("  --trace-max-size TEXT"), std::string::npos) << launch_help.out;
  EXPECT_NE(launch_help.out.find("  --nvml-interval TEXT"), std::string::npos) << launch_help.out;
  // Both refuse an existing file with the same words.
  for (const char* command : {"trace", "launch -n 1"}) {
    r = run_partrain(fmt::format("{} --trace {} -- true", command, db("by--trace.db")));
    EXPECT_EQ(r.exit_code, 2) << command;
    EXPECT_NE(r.err.find("the trace file " + db("by--trace.db") +
                         " already exists: remove it or pass another --trace FILE"),
              std::string::npos)
        << command << ": " << r.err;
  }
}

// --tui on a node other than 0 without --run-id or --trace: the file's name takes node 0's run
// id, known only at the rendezvous, so the dashboard could not know what to follow. Refused
// before a terminal is even needed.
TEST_F(TraceCommandTest, ADashboardOnALaterNodeNeedsARunIdOrATraceFile) {
  CommandResult r = run_partrain(
      "launch --nnodes 2 --node-rank 1 --master-addr 127.0.0.1 -n 1 --tui -- true </dev/null");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--tui on node 1 follows this node's trace file, named after node 0's "
                       "run id"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace partrain::testing
