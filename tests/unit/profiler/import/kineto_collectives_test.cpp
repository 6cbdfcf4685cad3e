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

// The ranks' files imported into `dir`/out.db, leaving no collective unmatched.
void import_all_matched(const ScratchDir& dir, const std::vector<KinetoFixture>& ranks) {
  auto summary = import_ranks(dir, ranks);
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  EXPECT_EQ(summary->unmatched_collectives, 0);
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

// dist.all_reduce_coalesced([a, b]) of 100 and 200 floats, as torch 2.15 records it with gloo:
// c10d's op holds one TensorList of both, gloo's annotation lists each tensor. The transfer had
// been sized by its first tensor alone (100 elements), so it paired with nothing and the op was
// stored as 0 bytes of dtype "other", lasting as long as its issue (92 us of a 1.7 ms transfer).
TEST(KinetoCollectives, AnAllReduceCoalescedIsPairedWithTheTransferOfAllItsTensors) {
  ScratchDir dir;
  std::vector<KinetoFixture> ranks = world_of(2);
  add_gloo_collective(
      ranks, 1000.0, "c10d::allreduce_coalesced_",
      R"({"Input Dims": [[[100], [200]], [], [], [], []], "Input type": ["TensorList", "", "",
          "Scalar", "Scalar"], "Concrete Inputs": ["", "", "", "False", "-1"]})",
      "gloo:all_reduce",
      [](int) { return R"({"Input Dims": [[100], [200]], "Input type": ["float", "float"]})"; });
  ASSERT_NO_FATAL_FAILURE(import_all_matched(dir, ranks));
  TraceQuery trace(dir.path() / "out.db");
  EXPECT_EQ(trace.rows("SELECT rank, op, dtype, count, bytes, (ts_ns + dur_ns) / 1000 "
                       "FROM collectives ORDER BY rank"),
            "0|all_reduce|float|300|1200|1500\n1|all_reduce|float|300|1200|1600\n");
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
// the world and the pairs [0, 1], [2, 3] each had them due, but their buffers say their size:
// the gathered output (2 x 1056 floats) is twice a rank's input, so the group holds two ranks
// (a pair, not the world) and the op moves 8448 bytes. It had been stored with group size 0 and
// half the bytes, then left unmatched as if the world might have run it.
TEST(KinetoCollectives, AnAllGatherAndReduceScatterAreMatchedToTheGroupTheirBuffersSize) {
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
  ASSERT_NO_FATAL_FAILURE(import_all_matched(dir, ranks));
  TraceQuery trace(dir.path() / "out.db");
  EXPECT_EQ(trace.rows("SELECT DISTINCT op, count, bytes, group_size, comm_id FROM collectives "
                       "ORDER BY op, comm_id"),
            "all_gather|1056|8448|2|pg:1\nall_gather|1056|8448|2|pg:2\n"
            "reduce_scatter|1056|8448|2|pg:1\nreduce_scatter|1056|8448|2|pg:2\n");
}

// A rank's file without distributedInfo.pg_config (torch before 2.2: HTA's test traces).
std::string without_pg_config(const KinetoFixture& f) {
  std::string json = f.json();
  const size_t from = json.find(", \"pg_count\"");
  const size_t to = json.find("]},\n", from) + 1;  // distributedInfo's closing brace stays
  json.erase(from, to - from);
  return json;
}

// Without pg_config the world's collectives had all been left unmatched ("no process group
// listed in distributedInfo holds rank N"): the default group of every rank is implied.
TEST(KinetoCollectives, WithoutPgConfigTheWorldsCollectivesAreTheDefaultGroups) {
  ScratchDir dir;
  std::vector<KinetoFixture> ranks = world_of(2);
  std::vector<fs::path> files;
  for (int r = 0; r < 2; ++r) {
    ranks[r].gloo_all_reduce(520, 1000.0, 1100.0, 1500.0, 7000 + r);
    files.push_back(dir.path() / fmt::format("rank{}.json", r));
    testing::write_text(files.back(), without_pg_config(ranks[r]));
  }
  auto summary = testing::import_kineto(files, dir.path() / "out.db");
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  EXPECT_EQ(summary->unmatched_collectives, 0);
  TraceQuery trace(dir.path() / "out.db");
  EXPECT_EQ(trace.rows("SELECT rank, comm_id, seq, group_size, group_ranks FROM collectives "
                       "ORDER BY rank"),
            "0|default_pg:0|0|2|0,1\n1|default_pg:0|0|2|0,1\n");
}

// A world of 1 whose pg_config lists two groups of rank 0 alone (HTA's MTIA trace): which of them
// ran a collective changes nothing. It had said "98 collectives left unmatched: process groups
// '0' or '1' hold the same ranks".
TEST(KinetoCollectives, InAWorldOfOneGroupsOfTheSameRankLeaveNothingUnmatched) {
  ScratchDir dir;
  KinetoFixture f(0, 1);
  f.group("1", {0});
  f.gloo_all_reduce(520, 1000.0, 1100.0, 1500.0, 7000);
  f.gloo_all_reduce(520, 2000.0, 2100.0, 2500.0, 7000);
  auto summary = import_ranks(dir, {f});
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  EXPECT_EQ(summary->unmatched_collectives, 0);
  EXPECT_TRUE(summary->warnings.empty()) << summary->warnings.front();
  TraceQuery trace(dir.path() / "out.db");
  EXPECT_EQ(trace.rows("SELECT comm_id, seq, group_size FROM collectives ORDER BY seq"),
            "pg:0|1|0|1\npg:0|1|1|1\n");
}

// An NCCL all-gather of 1 GiB as older Kineto (HTA's test traces, torch 2.0) records it: c10d's op
// around a record_param_comms whose args say nothing of the collective, around nccl's
// annotation, around the cudaLaunchKernel of the kernel's correlation id; the kernel carries
// that correlation id as its External id, which is no op's. It had been stored without its
// kernel, timed by the 0.18 ms enqueue: 6.10 TB/s on an A100.
void old_kineto_host_ops(KinetoFixture& f, double issue_us) {
  f.backend("nccl");
  f.event("cpu_op", "c10d::_allgather_base_", f.pid(), issue_us, 176.0,
          R"({"External id": 71476, "Input Dims": [[268435456], [134217728], [], [], []],
              "Input type": ["float", "float", "", "", "Scalar"]})");
  f.event("cpu_op", "record_param_comms", f.pid(), issue_us + 5, 160.0,
          R"({"External id": 71477, "Input Dims": [[134217728], [], [], [], [], [], []],
              "Input type": ["float", "Scalar", "Scalar", "Scalar", "", "", ""]})");
  f.event("user_annotation", "nccl:_all_gather_base", f.pid(), issue_us + 10, 150.0,
          R"({"External id": 71478, "Input Dims": [[134217728]], "Input type": ["float"]})");
}

void old_kineto_launch(KinetoFixture& f, double issue_us, int64_t correlation, double kernel_us,
                       double kernel_dur_us) {
  f.event("cuda_runtime", "cudaLaunchKernel", f.pid(), issue_us + 100, 13.0,
          fmt::format(R"({{"External id": {0}, "cbid": 211, "correlation": {0}}})", correlation));
  f.raw_event(fmt::format(
      R"j({{"ph": "X", "cat": "kernel", "name": "ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)",
           "pid": 0, "tid": 84, "ts": {:.3f}, "dur": {:.3f}, "args": {{"External id": {}, "device": 0,
           "stream": 84, "correlation": {}}}}})j",
      kernel_us, kernel_dur_us, correlation, correlation));
}

void old_kineto_nccl_all_gather(KinetoFixture& f, double issue_us, int64_t correlation,
                                double kernel_us, double kernel_dur_us) {
  old_kineto_host_ops(f, issue_us);
  old_kineto_launch(f, issue_us, correlation, kernel_us, kernel_dur_us);
}

TEST(KinetoCollectives, AnOldKinetoNcclKernelIsLinkedThroughItsLaunch) {
  ScratchDir dir;
  std::vector<KinetoFixture> ranks = world_of(2);
  for (int r = 0; r < 2; ++r) {
    // The kernel runs 42.5 ms (rank 0) and 63.6 ms (rank 1), well after the enqueue.
    old_kineto_nccl_all_gather(ranks[r], 1000.0, 869830 + r, 2000.0, r == 0 ? 42'500.0 : 63'600.0);
  }
  ASSERT_NO_FATAL_FAILURE(import_all_matched(dir, ranks));
  TraceQuery trace(dir.path() / "out.db");
  EXPECT_EQ(trace.rows("SELECT rank, comm_id, op, bytes, state, gpu_start_ns, gpu_end_ns - "
                       "gpu_start_ns FROM collectives ORDER BY rank"),
            "0|default_pg:0|all_gather|1073741824|completed|2000000|42500000\n"
            "1|default_pg:0|all_gather|1073741824|completed|2000000|63600000\n");
  EXPECT_EQ(trace.number("SELECT count(*) FROM stats WHERE name = "
                         "'import_collectives_without_kernel'"),
            0);
}

// Kineto writes the host ops first and the runtime's events after them: each launch still finds
// the op around it (the import keeps only launches inside an op already read).
TEST(KinetoCollectives, LaunchesWrittenAfterEveryHostOpFindTheirOps) {
  ScratchDir dir;
  std::vector<KinetoFixture> ranks = world_of(2);
  for (int r = 0; r < 2; ++r) {
    old_kineto_host_ops(ranks[r], 1000.0);
    old_kineto_host_ops(ranks[r], 100'000.0);
    old_kineto_launch(ranks[r], 1000.0, 500 + r, 2000.0, 40'000.0 + r);
    old_kineto_launch(ranks[r], 100'000.0, 600 + r, 101'000.0, 50'000.0 + r);
  }
  ASSERT_NO_FATAL_FAILURE(import_all_matched(dir, ranks));
  TraceQuery trace(dir.path() / "out.db");
  EXPECT_EQ(trace.rows("SELECT rank, seq, (gpu_end_ns - gpu_start_ns) / 1000 FROM collectives "
                       "ORDER BY rank, seq"),
            "0|0|40000\n0|1|50000\n1|0|40001\n1|1|50001\n");
}

// A GPU rank (it ran a GEMM) whose trace holds record_param_comms but no NCCL kernel: its host
// span is only the enqueue. It had been timed by it (882 GB/s busbw of a 0.03 ms all_reduce).
TEST(KinetoCollectives, AGpuRanksCollectiveWithoutItsKernelHasNoTimeAndIsSaid) {
  ScratchDir dir;
  KinetoFixture f(0, 1);
  f.backend("nccl")
      .event("cpu_op", "record_param_comms", f.pid(), 1000.0, 30.0,
             R"({"External id": 5, "Collective name": "allreduce", "dtype": "Float",
                 "In msg nelems": 7025664, "Out msg nelems": 7025664, "Group size": 1,
                 "Process Group Name": "0", "Process Group Ranks": "[0]", "Rank": 0, "Seq": 1})")
      .raw_event(R"j({"ph": "X", "cat": "kernel", "name": "void gemm<float>(float*)", "pid": 0,
                      "tid": 7, "ts": 900.000, "dur": 50.000, "args": {"device": 0, "stream": 7,
                      "correlation": 11}})j");
  auto summary = import_ranks(dir, {f});
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  TraceQuery trace(dir.path() / "out.db");
  EXPECT_EQ(trace.rows("SELECT op, state, gpu_start_ns FROM collectives"),
            "all_reduce|enqueued|NULL\n");
  EXPECT_EQ(trace.rows("SELECT rank, value, severity FROM stats WHERE name = "
                       "'import_collectives_without_kernel'"),
            "0|1|data_loss\n");
  ASSERT_FALSE(summary->warnings.empty());
  EXPECT_NE(summary->warnings.back().find("no NCCL kernel"), std::string::npos)
      << summary->warnings.back();
}

}  // namespace
}  // namespace partrain::profiler
