// The collectives an import makes of gloo jobs' Kineto traces: their numbering and sizes read as a
// live run's hooks record them (profiler/torch_collective.h), so analyze pairs and compares them
// alike.
#include "profiler/import/kineto_collectives.h"

#include <gtest/gtest.h>

#include <functional>

#include "profiler/import/kineto_import.h"
#include "tests/support/kineto_fixture.h"
#include "tests/support/kineto_import_run.h"
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
  return testing::import_kineto(testing::write_kineto_ranks(dir.path(), ranks),
                                dir.path() / "out.db");
}

// A 4-rank job of tests/data/kineto imported into `dir`/out.db.
StatusOr<TraceImportSummary> import_fixture(const ScratchDir& dir, std::string_view job) {
  return testing::import_kineto(testing::kineto_fixture_files(job), dir.path() / "out.db");
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

// A scatter from rank 0 and an all_to_all_single of 16 floats on 4 ranks as torch.profiler
// recorded them (tests/data/kineto/rooted): every member of each has the same size, a live run's.
TEST(KinetoCollectives, RootedFixtureSizesEveryMemberAlike) {
  ScratchDir dir;
  auto summary = import_fixture(dir, "rooted");
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  EXPECT_EQ(summary->unmatched_collectives, 0);
  TraceQuery trace(dir.path() / "out.db");
  EXPECT_EQ(trace.rows("SELECT op, dtype, count, bytes, count(*) FROM collectives "
                       "GROUP BY op, dtype, count, bytes ORDER BY op"),
            "all_to_all|float|4|64|8\nscatter|float|8|128|8\n");
}

// Adds to every rank's file one gloo collective as torch 2.15 records it: c10d's op issued at
// `issue_us` on the main thread, and gloo's annotation of the transfer on a worker thread from
// 100 us later, rank r's lasting 400 + 100 r us, its args `transfer_args(r)`.
void add_gloo_collective(std::vector<KinetoFixture>& ranks, double issue_us,
                         std::string_view c10d_op, std::string_view c10d_args,
                         std::string_view annotation,
                         const std::function<std::string(int)>& transfer_args) {
  for (size_t r = 0; r < ranks.size(); ++r) {
    KinetoFixture& f = ranks[r];
    f.event("cpu_op", c10d_op, f.pid(), issue_us, 30.0, c10d_args);
    f.event("user_annotation", annotation, 7000 + static_cast<int64_t>(r), issue_us + 100,
            400.0 + 100.0 * static_cast<double>(r), transfer_args(static_cast<int>(r)));
  }
}

// dist.scatter(out, chunks, src=0) of 8 floats per rank, as torch 2.15 records it: c10d's
// `scatter_` holds a list of tensors (no dtype), gloo's annotation shows the root's chunks and no
// tensor at all on the other rank. That rank's scatter had been stored as 0 bytes of dtype
// "other", a false desync against the root's 64 B.
TEST(KinetoCollectives, AScatterOffItsRootMovesTheBytesItsRootDoes) {
  ScratchDir dir;
  std::vector<KinetoFixture> ranks = world_of(2);
  add_gloo_collective(
      ranks, 1000.0, "c10d::scatter_",
      R"({"Input Dims": [[[8]], [], [], [], [], []], "Input type": ["TensorList", "", "", "Scalar",
          "Scalar", "Scalar"], "Concrete Inputs": ["", "", "", "0", "False", "-1"]})",
      "gloo:scatter", [](int r) -> std::string {
        return r == 0 ? R"({"Input Dims": [[8], [8]], "Input type": ["float", "float"]})" : "{}";
      });
  auto summary = import_ranks(dir, ranks);
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  EXPECT_EQ(summary->unmatched_collectives, 0);
  TraceQuery trace(dir.path() / "out.db");
  // nccl-tests' size of a scatter is the root's whole buffer; each lasts until its transfer ends.
  EXPECT_EQ(trace.rows("SELECT rank, seq, dtype, count, bytes, peer, (ts_ns + dur_ns) / 1000 "
                       "FROM collectives ORDER BY rank"),
            "0|0|float|8|64|0|1500\n1|0|float|8|64|0|1600\n");
}

std::string floats(int64_t elements) {
  return fmt::format(R"({{"Input Dims": [[{}]], "Input type": ["float"]}})", elements);
}

// dist.all_to_all_single of 8 floats on 2 ranks: count is a peer's share (4), bytes the input as
// it is (32), as a live run records it (docs/collectives.md). It had been 8 and 64.
TEST(KinetoCollectives, AnAllToAllIsAPeersShareOfTheInputAsLiveRunsRecordIt) {
  ScratchDir dir;
  std::vector<KinetoFixture> ranks = world_of(2);
  add_gloo_collective(
      ranks, 1000.0, "c10d::alltoall_base_",
      R"({"Input Dims": [[8], [8], [], [], [], [], []], "Input type": ["float", "float", "",
          "ScalarList", "ScalarList", "Scalar", "Scalar"], "Concrete Inputs": ["", "", "", "[]",
          "[]", "False", "-1"]})",
      "gloo:all_to_all", [](int) { return floats(8); });
  auto summary = import_ranks(dir, ranks);
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  TraceQuery trace(dir.path() / "out.db");
  EXPECT_EQ(trace.rows("SELECT rank, count, bytes, group_size FROM collectives ORDER BY rank"),
            "0|4|32|2\n1|4|32|2\n");
}

// FSDP's all-gather and reduce-scatter on a 2x2 mesh whose world group ran nothing in the window:
// the world and the pairs [0, 1], [2, 3] each had them due, so which group ran them is not in
// the trace and they stay unmatched. Their buffers still say their size: the gathered output
// (2 x 1056 floats) is twice a rank's input, so the group holds two ranks and the op moves
// 8448 bytes. It had been stored with group size 0 and half the bytes.
TEST(KinetoCollectives, AnUnmatchedAllGatherAndReduceScatterKeepTheirWholeBuffersBytes) {
  ScratchDir dir;
  std::vector<KinetoFixture> ranks = world_of(4);
  for (int r = 0; r < 4; ++r) {
    ranks[r].group(r < 2 ? "1" : "2", r < 2 ? std::vector<int>{0, 1} : std::vector<int>{2, 3});
  }
  add_gloo_collective(
      ranks, 1000.0, "c10d::_allgather_base_",
      R"({"Input Dims": [[2112], [1056], [], [], []], "Input type": ["float", "float", "", "Scalar",
          "Scalar"], "Concrete Inputs": ["", "", "", "False", "-1"]})",
      "gloo:all_gather", [](int) { return floats(1056); });
  add_gloo_collective(
      ranks, 2000.0, "c10d::_reduce_scatter_base_",
      R"({"Input Dims": [[1056], [2112], [], [], [], []], "Input type": ["float", "float", "", "",
          "Scalar", "Scalar"], "Concrete Inputs": ["", "", "", "", "False", "-1"]})",
      "gloo:all_reduce", [](int) { return floats(2112); });
  auto summary = import_ranks(dir, ranks);
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  EXPECT_EQ(summary->unmatched_collectives, 8);
  TraceQuery trace(dir.path() / "out.db");
  EXPECT_EQ(trace.rows("SELECT DISTINCT op, count, bytes, group_size, comm_id LIKE 'unmatched%' "
                       "FROM collectives ORDER BY op"),
            "all_gather|1056|8448|2|1\nreduce_scatter|1056|8448|2|1\n");
}

}  // namespace
}  // namespace partrain::profiler
