// A foreign rank's stop signals (profiler/inject/rank_flight.h): a SIGTERM dumps the flight
// recorder and ships its unfinished operations before it reaches the program's own disposition,
// and the dump never waits on the thread the signal interrupted, which may hold what the dump
// needs. Here that thread is the only reader of the dump's file (a FIFO where the dump writes
// it): a handler that waited for the dump would wait for itself. Run in a death-test child: the
// handlers are the process's and stay.
#include "profiler/inject/rank_flight.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>

#include "profiler/flight/flight_dumper.h"
#include "tests/support/rank_tracer_fixture.h"
#include "tests/support/trace_query.h"

namespace partrain::profiler::inject {
namespace {

namespace fs = std::filesystem;

std::atomic<int> g_program_handled{0};
std::atomic<int> g_program_value{0};

// The program's own SIGTERM handler, installed before the tracing took the signal.
void program_handler(int, siginfo_t* info, void*) {
  g_program_value.store(info->si_value.sival_int);
  g_program_handled.fetch_add(1);
}

void install_program_handler(int signal) {
  struct sigaction program = {};
  program.sa_sigaction = program_handler;
  program.sa_flags = SA_SIGINFO;
  sigemptyset(&program.sa_mask);
  ::sigaction(signal, &program, nullptr);
}

bool wait_for_program_handler() {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (g_program_handled.load() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return g_program_handled.load() != 0;
}

// Runs `check` in a death-test child (the signal handlers it installs are the process's and
// stay): it passes when `check` finds no problem, and prints the one it found.
void expect_no_problem_in_a_child(const std::function<std::string()>& check) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        const std::string problem = check();
        if (!problem.empty()) std::fprintf(stderr, "%s\n", problem.c_str());
        std::fflush(stderr);
        std::_Exit(problem.empty() ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

using RankFlightTest = testing::RankTracerFixture;

// Rank 0's all_reduce `seq` on a 2-rank "world", started and not finished.
CollectiveEvent started_all_reduce(uint64_t seq, uint64_t bytes) {
  CollectiveEvent op;
  op.comm_id = "world";
  op.seq = seq;
  op.op = "all_reduce";
  op.dtype = "float";
  op.bytes = bytes;
  op.group_ranks = {0, 1};
  op.rank = 0;
  op.state = CollectiveState::kStarted;
  op.start_ns = 1;
  return op;
}

// A rank's stop signals as a launcher that reads dumps from `dir` has them taken (no watchdog),
// its recorder holding one unfinished all_reduce.
struct StartedFlight {
  FlightRecorder recorder;
  std::unique_ptr<RankTracer> tracer;
  RankFlight* flight = nullptr;  // null: not started
};
std::unique_ptr<StartedFlight> start_flight(const fs::path& dir, const RankTracerOptions& options) {
  ::setenv(kFlightDirEnv, dir.c_str(), 1);
  ::unsetenv("PARTRAIN_COLLECTIVE_TIMEOUT");
  auto started = std::make_unique<StartedFlight>();
  started->recorder.record(started_all_reduce(6, 256));
  started->tracer = std::make_unique<RankTracer>(options);
  started->flight = RankFlight::start(started->recorder, *started->tracer);
  return started;
}

// What the child checks; empty when all holds.
std::string stop_while_holding_the_dump(const fs::path& dir, RankTracerOptions options,
                                        const fs::path& db,
                                        std::unique_ptr<TraceSession>& session) {
  fs::create_directories(dir);
  install_program_handler(SIGTERM);
  auto started = start_flight(dir, options);
  if (started->flight == nullptr) return "no RankFlight with PARTRAIN_FLIGHT_DIR set";
  RankFlight* flight = started->flight;
  std::unique_ptr<RankTracer>& tracer = started->tracer;

  const fs::path partial = flight_dump_path(dir, 0).string() + ".partial";
  if (::mkfifo(partial.c_str(), 0600) != 0) return "mkfifo failed";

  // Delivered to this thread before pthread_sigqueue returns.
  union sigval value;
  value.sival_int = 42;
  if (::pthread_sigqueue(::pthread_self(), SIGTERM, value) != 0) return "pthread_sigqueue failed";
  if (g_program_handled.load() != 0) {
    return "the program's handler ran before the dump was read: the signal's handler waited on "
           "the thread it interrupted";
  }
  std::stringstream dump;
  dump << std::ifstream(partial).rdbuf();  // opens once the dump opens it to write
  if (dump.str().find("\"signal\"") == std::string::npos ||
      dump.str().find("all_reduce") == std::string::npos) {
    return "the dump lacks the trigger or the operation: " + dump.str();
  }
  if (!wait_for_program_handler()) return "the program's handler never ran after the dump";
  if (g_program_handled.load() != 1) return "the program's handler ran more than once";
  if (g_program_value.load() != 42) return "the program's handler lost the sender's value";

  flight->close();
  tracer.reset();
  session.reset();
  const std::string rows =
      testing::TraceQuery(db).rows("SELECT op || ' ' || seq || ' ' || state FROM collectives");
  if (rows != "all_reduce 6 started\n") return "the trace holds: " + rows;
  return "";
}

TEST_F(RankFlightTest,
       AStopSignalDumpsWithoutWaitingOnTheThreadItInterruptedThenReachesTheProgram) {
  expect_no_problem_in_a_child([&] {
    return stop_while_holding_the_dump(dir_ / "flight", tracer_options(0), db(), session_);
  });
}

// CPython puts its SIGINT handler in after the library took the signal (sitecustomize gives a rank
// its KeyboardInterrupt back): a Ctrl-C then reached Python alone and the rank stopped without a
// dump. Taken back, the signal dumps first and then reaches the program's handler.
std::string sigint_after_the_program_replaced_the_handler(const fs::path& dir,
                                                          RankTracerOptions options) {
  fs::create_directories(dir);
  auto started = start_flight(dir, options);
  if (started->flight == nullptr) return "no RankFlight with PARTRAIN_FLIGHT_DIR set";
  install_program_handler(SIGINT);  // what Python's signal.signal(SIGINT, ...) does
  if (!retake_stop_signal(SIGINT)) return "SIGINT was not taken back";
  union sigval value;
  value.sival_int = 7;
  if (::pthread_sigqueue(::pthread_self(), SIGINT, value) != 0) return "pthread_sigqueue failed";
  if (!wait_for_program_handler()) return "the program's handler never ran";
  std::stringstream dump;
  dump << std::ifstream(flight_dump_path(dir, 0)).rdbuf();
  if (dump.str().find("\"signal\"") == std::string::npos ||
      dump.str().find("all_reduce") == std::string::npos) {
    return "no dump before the program's handler ran: " + dump.str();
  }
  if (g_program_value.load() != 7) return "the program's handler lost the sender's value";
  if (retake_stop_signal(SIGKILL)) return "took SIGKILL, not a stop signal";
  started->flight->close();
  return "";
}

TEST_F(RankFlightTest, SigintTakenBackFromTheProgramDumpsThenReachesItsHandler) {
  expect_no_problem_in_a_child([&] {
    return sigint_after_the_program_replaced_the_handler(dir_ / "flight", tracer_options(0));
  });
}

// A PyTorch rank whose collective failed (gloo's own timeout, a closed connection) dumps as a
// collective error, so its launcher diagnoses the job though no watchdog ran; quietly on stderr,
// where the rank's traceback follows. Until 2026-11-30 only the watchdog and signals dumped, and
// a job on torch's own timeouts got no diagnosis.
std::string fail_a_collective(const fs::path& dir, RankTracerOptions options) {
  fs::create_directories(dir);
  auto started = start_flight(dir, options);
  if (started->flight == nullptr) return "no RankFlight with PARTRAIN_FLIGHT_DIR set";
  CollectiveEvent failed = started_all_reduce(6, 256);
  failed.state = CollectiveState::kFailed;
  (void)started->recorder.update(0, failed);
  ::testing::internal::CaptureStderr();
  started->flight->on_collective_failed(failed);
  const std::string err = ::testing::internal::GetCapturedStderr();
  if (!err.empty()) return "the dump was printed: " + err;
  std::stringstream dump;
  dump << std::ifstream(flight_dump_path(dir, 0)).rdbuf();
  if (dump.str().find("\"collective_error\"") == std::string::npos ||
      dump.str().find("all_reduce (comm world, seq 6) failed") == std::string::npos ||
      dump.str().find("\"failed\"") == std::string::npos) {
    return "no collective-error dump holding the failed op: " + dump.str();
  }
  started->flight->close();
  return "";
}

TEST_F(RankFlightTest, AFailedCollectiveDumpsAsACollectiveErrorWithoutPrintingIt) {
  expect_no_problem_in_a_child(
      [&] { return fail_a_collective(dir_ / "flight", tracer_options(0)); });
}

// A rank told to stop as it execs: the exec took the relay's thread, and the stop signal it held,
// and the new image ran on. settle_stop_signals (which exec calls first) returns only once the
// signal's dump is written and the signal sent again. Here the dump is held back (its file a FIFO
// nobody reads) until the settle has been seen waiting.
std::string settle_while_the_dump_is_held(const fs::path& dir, RankTracerOptions options) {
  fs::create_directories(dir);
  install_program_handler(SIGTERM);
  auto started = start_flight(dir, options);
  if (started->flight == nullptr) return "no RankFlight with PARTRAIN_FLIGHT_DIR set";
  const fs::path partial = flight_dump_path(dir, 0).string() + ".partial";
  if (::mkfifo(partial.c_str(), 0600) != 0) return "mkfifo failed";
  if (::pthread_sigqueue(::pthread_self(), SIGTERM, sigval{}) != 0)
    return "pthread_sigqueue failed";
  std::atomic<bool> settled{false};
  std::thread exec_thread([&] {
    settle_stop_signals(std::chrono::seconds(30));
    settled.store(true);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const bool settled_while_held = settled.load();
  std::stringstream dump;
  dump << std::ifstream(partial).rdbuf();  // lets the dump go on
  exec_thread.join();
  if (settled_while_held) return "the settle returned while the signal's dump was under way";
  if (!fs::exists(flight_dump_path(dir, 0)))
    return "the settle returned before the dump was written";
  if (!wait_for_program_handler()) return "the signal never reached the program after the dump";
  started->flight->close();
  return "";
}

TEST_F(RankFlightTest, AnExecWaitsForTheStopSignalItsRelayHolds) {
  expect_no_problem_in_a_child(
      [&] { return settle_while_the_dump_is_held(dir_ / "flight", tracer_options(0)); });
}

// A library's thread that calls abort() (std::terminate in gloo's enforce, PyTorch's NCCL
// watchdog): the rank still dies of SIGABRT, but its dump and its unshipped records go first
// (the trace lost a failing rank's last collectives). The child's body, which never returns;
// it ships to the parent's collector and dumps into the parent's directory, both named in the
// environment (the threadsafe death test's child runs the test, and its SetUp, afresh).
constexpr const char* kParentSocket = "PARTRAIN_TEST_PARENT_SOCKET";
constexpr const char* kParentFlightDir = "PARTRAIN_TEST_PARENT_FLIGHT_DIR";

[[noreturn]] void abort_from_a_thread(RankTracerOptions options) {
  options.socket_path = std::getenv(kParentSocket);
  ::setenv(kFlightDirEnv, std::getenv(kParentFlightDir), 1);
  ::unsetenv("PARTRAIN_COLLECTIVE_TIMEOUT");
  auto* recorder = new FlightRecorder();
  recorder->record(started_all_reduce(3, 1024));
  auto* tracer = new RankTracer(options);
  if (RankFlight::start(*recorder, *tracer) == nullptr) std::_Exit(2);
  std::thread([] { std::abort(); }).join();
  std::_Exit(3);  // never: abort() does not return
}

TEST_F(RankFlightTest, AnAbortingThreadDumpsAndShipsBeforeTheRankDies) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const fs::path dir = dir_ / "flight";
  fs::create_directories(dir);
  // Not replaced in the child, which inherits the parent's.
  ::setenv(kParentSocket, session_->socket_path().c_str(), 0);
  ::setenv(kParentFlightDir, dir.c_str(), 0);
  EXPECT_EXIT(abort_from_a_thread(tracer_options(0)), ::testing::KilledBySignal(SIGABRT), "");
  ::unsetenv(kParentSocket);
  ::unsetenv(kParentFlightDir);
  std::stringstream dump;
  dump << std::ifstream(flight_dump_path(dir, 0)).rdbuf();
  EXPECT_NE(dump.str().find("\"signal\""), std::string::npos) << dump.str();
  EXPECT_NE(dump.str().find("SIGABRT"), std::string::npos) << dump.str();
  session_.reset();
  EXPECT_EQ(testing::TraceQuery(db()).rows("SELECT op || ' ' || seq || ' ' || state FROM "
                                           "collectives"),
            "all_reduce 3 started\n");
}

}  // namespace
}  // namespace partrain::profiler::inject
