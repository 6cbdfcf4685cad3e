// ClockResync: the offset measured at join is re-measured on the interval over a connection of its
// own, the fit's drift and observations grow, and each round re-sends the rank's metadata with the
// new offset (so the trace holds the latest offset, its uncertainty and the drift).
#include "runner/worker/clock_resync.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "core/clock.h"
#include "profiler/trace_session.h"
#include "runner/rendezvous/store_server.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/trace_query.h"

namespace partrain::runner {
namespace {
namespace fs = std::filesystem;

constexpr const char* kToken = "secret";

// The trace a rank's records go to, in `dir`.
StatusOr<std::unique_ptr<profiler::TraceSession>> start_session(const fs::path& dir) {
  profiler::TraceSessionOptions options;
  options.path = dir / "clock.db";
  options.run_id = dir.filename().string();
  options.token = kToken;
  return profiler::TraceSession::start(std::move(options));
}

// Rank `rank`'s view of the store at `port` on this host.
WorkerEnv rank_env(int rank, uint16_t port) {
  WorkerEnv env;
  env.rank = rank;
  env.master_addr = "127.0.0.1";
  env.master_port = port;
  env.token = kToken;
  return env;
}

profiler::RankTracerOptions tracer_options(const profiler::TraceSession& session, int rank) {
  profiler::RankTracerOptions options;
  options.socket_path = session.socket_path();
  options.token = kToken;
  options.rank = rank;
  return options;
}

TEST(ClockResync, RemeasuresOnTheIntervalAndPublishesTheFit) {
  auto server = rendezvous::StoreServer::start("127.0.0.1", 0, kToken);
  ASSERT_TRUE(server.is_ok()) << server.status().message();
  testing::ScratchDir scratch;
  const fs::path& dir = scratch.path();
  auto session = start_session(dir);
  ASSERT_TRUE(session.is_ok()) << session.status().message();

  const WorkerEnv env = rank_env(1, (*server)->port());
  {
    profiler::RankTracer tracer(tracer_options(**session, 1));
    profiler::RankInfo identity;
    identity.rank = 1;
    identity.host = "here";
    identity.device = "cpu";
    // A deliberately wrong first offset (5 ms): the re-measurements pull the fit towards the
    // true offset on one host (microseconds).
    auto resync = ClockResync::start(env, {5'000'000, 10, 16}, monotonic_ns(), identity, tracer,
                                     {.interval = std::chrono::milliseconds(40), .pings = 4});
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    resync->measure_now();
    const profiler::ClockDrift drift = resync->drift();
    EXPECT_GE(drift.observations, 4u);
    EXPECT_NE(drift.drift_ppm, 0.0);  // the fit sees the offset fall from 5 ms
    EXPECT_LT(std::abs(tracer.timeline_ns(monotonic_ns()) - monotonic_ns()), 5'000'000);
    resync.reset();
    EXPECT_TRUE(tracer.flush());
  }
  ASSERT_TRUE((*session)->finish(profiler::RunStatus::kCompleted).is_ok());
  testing::TraceQuery trace(dir / "clock.db");
  EXPECT_EQ(trace.rows("SELECT host FROM ranks WHERE rank = 1"), "here\n");
  // The latest fit, not the first offset; half a real round trip; a fitted drift.
  EXPECT_EQ(trace.rows("SELECT clock_offset_ns < 5000000, clock_uncertainty_ns > 0, "
                       "clock_drift_ppm <> 0 FROM ranks WHERE rank = 1"),
            "1|1|1\n");
}

// The store drops a connection that has sent nothing within its handshake timeout; with the
// default interval as long as that timeout, the first round raced it and one rank of most runs
// was never re-synced. The connection speaks at once, so a round after the timeout still works.
TEST(ClockResync, TheConnectionOutlivesTheStoresHandshakeTimeout) {
  rendezvous::StoreServerOptions options;
  options.handshake_timeout = std::chrono::milliseconds(100);
  auto server = rendezvous::StoreServer::start("127.0.0.1", 0, kToken, options);
  ASSERT_TRUE(server.is_ok()) << server.status().message();
  testing::ScratchDir scratch;
  auto session = start_session(scratch.path());
  ASSERT_TRUE(session.is_ok()) << session.status().message();
  const WorkerEnv env = rank_env(0, (*server)->port());
  {  // the rank closes its connection before the run ends
    profiler::RankTracer tracer(tracer_options(**session, 0));
    profiler::RankInfo identity;
    identity.rank = 0;
    auto resync = ClockResync::start(env, {0, 10, 16}, monotonic_ns(), identity, tracer,
                                     {.interval = std::chrono::seconds(100), .pings = 2});
    std::this_thread::sleep_for(std::chrono::milliseconds(400));  // 4 handshake timeouts
    resync->measure_now();
    EXPECT_EQ(resync->drift().observations, 2u);  // the join's and this round's
    resync.reset();
    EXPECT_TRUE(tracer.flush());
  }
  ASSERT_TRUE((*session)->finish(profiler::RunStatus::kCompleted).is_ok());
}

}  // namespace
}  // namespace partrain::runner
