// The collectives an import makes of gloo jobs' Kineto traces: their numbering and sizes read as a
// live run's hooks record them (profiler/torch_collective.h), so analyze pairs and compares them
// alike.
#include "profiler/import/kineto_collectives.h"

#include <gtest/gtest.h>

#include <functional>

#include "profiler/import/kineto_import.h"
#include "tests/support/kineto_fixture.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/trace_query.h"

namespace partrain::profiler {
namespace {

namespace fs = std::filesystem;
using testing::KinetoFixture;
using testing::ScratchDir;
using testing::TraceQuery;

std::vector<KinetoFixture> world_of(int size) {
  std::vector<KinetoFixture> ranks;
  for (int r = 0; r < size; ++r) ranks.emplace_back(r, size);
  return ranks;
}

// The ranks' files imported into `dir`/out.db.
StatusOr<TraceImportSummary> import_ranks(const ScratchDir& dir,
                                          const std::vector<KinetoFixture>& ranks) {
  TraceImportOptions options;
  options.inputs = testing::write_kineto_ranks(dir.path(), ranks);
  options.output = dir.path() / "out.db";
  options.command_line = "partrain import test";
  return import_kineto_traces(options);
}

// A 4-rank job of tests/data/kineto (real torch 2.15 traces, make_fixtures.py) imported into
// `dir`/out.db.
StatusOr<TraceImportSummary> import_fixture(const ScratchDir& dir, std::string_view job) {
  TraceImportOptions options;
  for (int r = 0; r < 4; ++r) {
    options.inputs.push_back(fs::path(PARTRAIN_SOURCE_DIR) / "tests/data/kineto" / job /
                             fmt::format("rank{}.pt.trace.json.gz", r));
  }
  options.output = dir.path() / "out.db";
  options.command_line = "partrain import test";
  return import_kineto_traces(options);
}

// A gloo send or recv of `elements` floats as torch 2.15 records it: c10d's op with the peer
// (a rank of the group) in Concrete Inputs, gloo's annotation of the transfer on the same thread.
void gloo_p2p(KinetoFixture& f, std::string_view op, int peer, int64_t elements, double issue_us) {
  const bool send = op == "send";
  f.event("cpu_op", send ? "c10d::send" : "c10d::recv_", f.pid(), issue_us, 50.0,
          fmt::format(R"({{"Input Dims": [[[{}]], [], [], []], "Input type": ["TensorList", "",
                         "Scalar", "Scalar"], "Concrete Inputs": ["", "", "{}", "0"]}})",
                      elements, peer));
  f.event("user_annotation", send ? "gloo:send" : "gloo:recv", f.pid(), issue_us + 5, 40.0,
          fmt::format(R"({{"Input Dims": [[{}]], "Input type": ["float"]}})", elements));
}

// Every send with the recv it pairs with: the same communicator and seq, on the send's peer,
// from the send's rank (analyzers/collective_stats.cpp, match_p2p).
constexpr std::string_view kPairedSends =
    "SELECT count(*) FROM collectives s JOIN collectives r ON r.comm_id = s.comm_id AND "
    "r.seq = s.seq AND r.rank = s.peer AND r.peer = s.rank AND r.op = 'recv' AND "
    "r.bytes = s.bytes WHERE s.op = 'send'";

// A pipeline of two stages (torch.distributed.pipelining's schedules): the ranks issue send and
// recv only, no collective. The import had aborted (std::out_of_range, exit 134), leaving its
// temporary files.
TEST(KinetoCollectives, RanksThatIssuedOnlySendAndRecvImport) {
  ScratchDir dir;
  std::vector<KinetoFixture> ranks = world_of(2);
  for (int micro_batch = 0; micro_batch < 3; ++micro_batch) {
    const double t = 1000.0 * (micro_batch + 1);
    gloo_p2p(ranks[0], "send", 1, 32, t);
    gloo_p2p(ranks[1], "recv", 0, 32, t);
  }
  auto summary = import_ranks(dir, ranks);
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  EXPECT_EQ(summary->unmatched_collectives, 0);
  TraceQuery trace(dir.path() / "out.db");
  EXPECT_EQ(trace.rows("SELECT rank, op, peer, group_concat(seq), bytes FROM collectives "
                       "GROUP BY rank"),
            "0|send|1|0,1,2|128\n1|recv|0|0,1,2|128\n");
  EXPECT_EQ(trace.number(kPairedSends), 3);
}

// Both directions with one peer: 1F1B (a stage sends activations forward and receives gradients
// back) and batch_isend_irecv([isend, irecv]) on both ends. Numbered per (group, peer) alone,
// rank 0's first send was seq 0 and rank 1's first recv seq 1 (its send took 0): none paired.
TEST(KinetoCollectives, SendAndRecvAreNumberedPerDirectionAsLiveRunsNumberThem) {
  ScratchDir dir;
  std::vector<KinetoFixture> ranks = world_of(2);
  for (int step = 0; step < 2; ++step) {
    const double t = 1000.0 * (step + 1);
    for (int r = 0; r < 2; ++r) {
      gloo_p2p(ranks[r], "send", 1 - r, 30, t);
      gloo_p2p(ranks[r], "recv", 1 - r, 30, t + 100);
    }
  }
  auto summary = import_ranks(dir, ranks);
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  TraceQuery trace(dir.path() / "out.db");
  EXPECT_EQ(trace.rows("SELECT rank, op, group_concat(seq) FROM collectives GROUP BY rank, op"),
            "0|recv|0,1\n0|send|0,1\n1|recv|0,1\n1|send|0,1\n");
  EXPECT_EQ(trace.number(kPairedSends), 4);
}

// Two 2-stage pipelines as torch.profiler recorded them (tests/data/kineto/pipeline): per step
// 1F1B's activations forward and gradients back, then batch_isend_irecv([isend, irecv]) on both
// ends, and no collective at all. Every send pairs with its recv.
TEST(KinetoCollectives, PipelineFixtureImportsWithEverySendPaired) {
  ScratchDir dir;
  auto summary = import_fixture(dir, "pipeline");
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  EXPECT_EQ(summary->unmatched_collectives, 0);
  TraceQuery trace(dir.path() / "out.db");
  // Two steps, three sends per rank each (two micro-batches' and the exchange's).
  EXPECT_EQ(trace.number("SELECT count(*) FROM collectives WHERE op = 'send'"), 24);
  EXPECT_EQ(trace.number(kPairedSends), 24);
}

}  // namespace
}  // namespace partrain::profiler
