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

TEST(ClockResync, RemeasuresOnTheIntervalAndPublishesTheFit) {
  auto server = rendezvous::StoreServer::start("127.0.0.1", 0, "secret");
  ASSERT_TRUE(server.is_ok()) << server.status().message();
  testing::ScratchDir scratch;
  const fs::path& dir = scratch.path();
  profiler::TraceSessionOptions session_options;
  session_options.path = dir / "clock.db";
  session_options.run_id = dir.filename().string();
  session_options.token = "secret";
  auto session = profiler::TraceSession::start(std::move(session_options));
  ASSERT_TRUE(session.is_ok()) << session.status().message();

  WorkerEnv env;
  env.rank = 1;
  env.master_addr = "127.0.0.1";
  env.master_port = (*server)->port();
  env.token = "secret";
  {
    profiler::RankTracerOptions tracer_options;
    tracer_options.socket_path = (*session)->socket_path();
    tracer_options.token = "secret";
    tracer_options.rank = 1;
    profiler::RankTracer tracer(tracer_options);
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
  auto server = rendezvous::StoreServer::start("127.0.0.1", 0, "secret", options);
  ASSERT_TRUE(server.is_ok()) << server.status().message();
  testing::ScratchDir scratch;
  profiler::TraceSessionOptions session_options;
  session_options.path = scratch.path() / "clock.db";
  session_options.run_id = scratch.path().filename().string();
  session_options.token = "secret";
  auto session = profiler::TraceSession::start(std::move(session_options));
  ASSERT_TRUE(session.is_ok()) << session.status().message();
  WorkerEnv env;
  env.rank = 0;
  env.master_addr = "127.0.0.1";
  env.master_port = (*server)->port();
  env.token = "secret";
  {  // the rank closes its connection before the run ends
    profiler::RankTracerOptions tracer_options;
    tracer_options.socket_path = (*session)->socket_path();
    tracer_options.token = "secret";
    tracer_options.rank = 0;
    profiler::RankTracer tracer(tracer_options);
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
