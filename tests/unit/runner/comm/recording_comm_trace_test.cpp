// all_to_all end to end: recorded by RecordingComm over real Gloo ranks, shipped by each rank's
// RankTracer to the node's collector and writer, and read by `analyze`'s collective table with
// nccl-tests' size (the whole per-rank buffer, n x the per-peer count) and busbw = algbw x (n-1)/n,
// the dispatch and the combine (labelled with OpLabel) in rows of their own. No built-in workload
// issues all_to_all yet (the MoE dispatch and combine will), so the ranks here issue it
// themselves.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "analyzers/analysis_window.h"
#include "analyzers/collective_stats.h"
#include "profiler/flight/flight_recorder.h"
#include "profiler/trace_open.h"
#include "runner/comm/recording_comm.h"
#include "tests/support/rank_tracer_fixture.h"
#include "tests/support/trace_query.h"
#include "tests/unit/runner/comm/gloo_world.h"

namespace partrain::comm {
namespace {

using RecordingCommTraceTest = partrain::testing::RankTracerFixture;

TEST_F(RecordingCommTraceTest, AllToAllReachesAnalyzeWithNcclTestsSizeAndBusbw) {
  constexpr int kRanks = 4;
  constexpr size_t kPerPeer = 4096;  // floats each rank sends to each peer
  constexpr int kOps = 3;
  testing::run_world(kRanks, [&](int rank, Comm& base) {
    profiler::RankTracer tracer(tracer_options(rank));
    profiler::FlightRecorder recorder(
        100, [&tracer](const profiler::CollectiveEvent& event) { tracer.collective(event); });
    {
      StatusOr<std::unique_ptr<Comm>> whole = base.split(0, rank);
      ASSERT_TRUE(whole.is_ok());
      RecordingComm comm(std::move(*whole), recorder);
      std::vector<float> send(kPerPeer * kRanks), recv(kPerPeer * kRanks);
      for (size_t i = 0; i < send.size(); ++i) send[i] = static_cast<float>(rank * 100000 + i);
      for (int op = 0; op < kOps; ++op) {
        // Two dispatches, then a combine; the label ends with its scope.
        OpLabel label(comm, op < 2 ? "moe_dispatch" : "moe_combine");
        ASSERT_TRUE(comm.all_to_all(send.data(), recv.data(), kPerPeer, DType::kF32).is_ok());
      }
      EXPECT_EQ(comm.label(), "");
      // Block j of recv came from rank j: its block `rank`.
      EXPECT_EQ(recv[kPerPeer * 2], static_cast<float>(2 * 100000 + rank * kPerPeer));
      ASSERT_TRUE(comm.barrier().is_ok());
    }
    EXPECT_TRUE(tracer.flush());
  });
  ASSERT_TRUE(session_->finish(profiler::RunStatus::kCompleted).is_ok());

  auto trace = profiler::open_trace(db());
  ASSERT_TRUE(trace.is_ok()) << trace.status().message();
  analyzers::AnalysisWindow window;
  window.world_size = kRanks;
  for (int r = 0; r < kRanks; ++r) {
    window.ranks.push_back(r);
    window.spans[r] = analyzers::RankSpan{0, int64_t{1} << 62, 0};
  }
  window.end_ns = int64_t{1} << 62;
  auto report = analyzers::analyze_collective_stats(trace->db, window);
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  // nccl-tests' S for alltoall: the whole send buffer, n x count x 4 bytes.
  constexpr int64_t kS = kRanks * kPerPeer * 4;
  for (const auto& [label, ops] : {std::pair<std::string, int>{"moe_dispatch", 2},
                                   std::pair<std::string, int>{"moe_combine", 1}}) {
    const analyzers::CollectiveStatsRow* row = nullptr;
    for (const analyzers::CollectiveStatsRow& r : report->rows) {
      if (r.op == "all_to_all" && r.label == label) row = &r;
    }
    ASSERT_NE(row, nullptr) << label;
    EXPECT_EQ(row->size_bucket, kS);
    EXPECT_EQ(row->group_size, kRanks);
    EXPECT_EQ(row->count, kRanks * ops);
    EXPECT_EQ(row->bytes, kRanks * ops * kS);
    EXPECT_EQ(row->matched, ops);
    ASSERT_GT(row->algbw_gbps, 0);
    EXPECT_NEAR(row->busbw_gbps, row->algbw_gbps * (kRanks - 1) / kRanks, 1e-12);
  }
  const std::string text = analyzers::format_collective_stats(*report);
  EXPECT_NE(text.find("all_to_all moe_dispatch"), std::string::npos) << text;
  // The trace: the label names the slice, the op stays in the collective's row.
  partrain::testing::TraceQuery query(db());
  EXPECT_EQ(query.rows("SELECT op, label, count(*), min(bytes), min(count) FROM collectives "
                       "WHERE op = 'all_to_all' GROUP BY label ORDER BY label"),
            fmt::format("all_to_all|moe_combine|4|{}|{}\nall_to_all|moe_dispatch|8|{}|{}\n", kS,
                        kPerPeer, kS, kPerPeer));
  EXPECT_EQ(query.rows("SELECT count(*) FROM slices WHERE name = 'moe_dispatch' AND "
                       "category = 'collective'"),
            "8\n");
  // An unlabelled op has no label.
  EXPECT_EQ(query.rows("SELECT DISTINCT label IS NULL FROM collectives WHERE op = 'barrier'"),
            "1\n");
}

}  // namespace
}  // namespace partrain::comm
