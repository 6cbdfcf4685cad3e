// A live trace session for tests of what a rank records: the node's collector writing
// <scratch>/rank.db, and the options a RankTracer connects to it with. Tests make their tracers,
// record, then finish the session (or let TearDown drop it) and read db().
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>

#include "profiler/rank_tracer.h"
#include "profiler/trace_session.h"
#include "tests/support/scratch_dir.h"

namespace partrain::testing {

class RankTracerFixture : public ::testing::Test {
 protected:
  static constexpr const char* kToken = "secret-token";

  void SetUp() override {
    profiler::TraceSessionOptions options;
    options.path = db();
    options.run_id = dir_.filename().string();
    options.token = kToken;
    auto session = profiler::TraceSession::start(std::move(options));
    ASSERT_TRUE(session.is_ok()) << session.status().message();
    session_ = std::move(*session);
  }
  void TearDown() override { session_.reset(); }

  profiler::RankTracerOptions tracer_options(int rank) const {
    profiler::RankTracerOptions options;
    options.socket_path = session_->socket_path();
    options.token = kToken;
    options.rank = rank;
    return options;
  }
  std::filesystem::path db() const { return dir_ / "rank.db"; }

  ScratchDir scratch_;
  const std::filesystem::path& dir_ = scratch_.path();
  std::unique_ptr<profiler::TraceSession> session_;
};

}  // namespace partrain::testing
