#include "profiler/import/nsys_import.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "profiler/sqlite_db.h"
#include "tests/support/nsys_fixture.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/trace_query.h"

namespace partrain::profiler {
namespace {

namespace fs = std::filesystem;
using testing::build_nsys_report;
using testing::ScratchDir;
using testing::TraceQuery;

StatusOr<TraceImportSummary> import(std::vector<fs::path> inputs, const fs::path& output) {
  TraceImportOptions options;
  options.inputs = std::move(inputs);
  options.output = output;
  options.step_marker = "train_step";
  return import_nsys_reports(options);
}

TEST(NsysImport, OneReportHoldingBothRanks) {
  ScratchDir dir;
  const fs::path report = build_nsys_report(dir.path(), "one_report");
  EXPECT_TRUE(is_sqlite_file(report));
  const fs::path out = dir.path() / "one.db";
  auto summary = import({report}, out);
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  EXPECT_EQ(summary->world_size, 2);
  ASSERT_EQ(summary->ranks.size(), 2u);
  TraceQuery trace(out);
  EXPECT_EQ(trace.rows("SELECT rank, pid, device, node, local_rank FROM ranks ORDER BY rank"),
            "0|4242|cuda:0|0|0\n1|4243|cuda:1|0|1\n");
  EXPECT_EQ(trace.rows("SELECT json_extract(config, '$.imported_from'), world_size FROM runs"),
            "nsys|2\n");
  EXPECT_EQ(trace.rows(
                "SELECT rank, name, count(*) FROM kernels GROUP BY rank, name ORDER BY rank, name"),
            "0|ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)|3\n"
            "0|void gemm<float>(float*)|3\n"
            "1|ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)|3\n"
            "1|void gemm<float>(float*)|3\n");
  EXPECT_EQ(trace.rows("SELECT rank, name, bytes, stream FROM transfers ORDER BY rank"),
            "0|memcpy HtoD|1048576|7\n1|memcpy HtoD|1048576|7\n");
  EXPECT_EQ(trace.rows("SELECT comm_id, seq, op, dtype, reduce_op, count, bytes, group_size, "
                       "group_ranks, count(*) FROM collectives GROUP BY comm_id, seq ORDER BY seq"),
            "nccl:0000000000c0ffee|0|all_reduce|float|sum|1024|4096|2|0,1|2\n"
            "nccl:0000000000c0ffee|1|all_reduce|float|sum|1024|4096|2|0,1|2\n"
            "nccl:0000000000c0ffee|2|all_reduce|float|sum|1024|4096|2|0,1|2\n");
  // The device span is the kernel's (30-60 us into each step), the host span NCCL's range.
  EXPECT_EQ(trace.rows("SELECT DISTINCT gpu_end_ns - gpu_start_ns, dur_ns FROM collectives"),
            "30000|10000\n");
  EXPECT_EQ(trace.rows("SELECT rank, step, dur_ns FROM steps ORDER BY rank, step"),
            "0|0|90000\n0|1|90000\n0|2|90000\n1|0|90000\n1|1|90000\n1|2|90000\n");
  EXPECT_EQ(trace.number("SELECT count(*) FROM slices WHERE name = 'cudaLaunchKernel' AND "
                         "track = 'thread 4242 (pt_main_thread)'"),
            6);
  EXPECT_EQ(trace.number("SELECT count(*) FROM slices WHERE category = 'kernel' AND step IS NULL"),
            0);
}

TEST(NsysImport, OneReportPerRankAlignedByTheAllReduceKernels) {
  ScratchDir dir;
  const fs::path out = dir.path() / "two.db";
  auto summary =
      import({build_nsys_report(dir.path(), "rank1"), build_nsys_report(dir.path(), "rank0")}, out);
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  ASSERT_EQ(summary->ranks.size(), 2u);
  // rank1.sql's host clock reads 500 us ahead.
  EXPECT_EQ(summary->ranks[1].clock.offset_ns, -500'000);
  EXPECT_EQ(summary->ranks[1].clock.estimates, 3);
  TraceQuery trace(out);
  // Its session started 2 s before rank 0's: the offset stored moves its session clock onto
  // rank 0's (the reference, though rank 1's report came first).
  EXPECT_EQ(trace.rows("SELECT rank, clock_offset_ns FROM ranks ORDER BY rank"),
            "0|0\n1|-2000500000\n");
  EXPECT_EQ(trace.number("SELECT max(s) FROM (SELECT max(gpu_end_ns) - min(gpu_end_ns) AS s FROM "
                         "collectives GROUP BY comm_id, seq)"),
            0);
}

TEST(NsysImport, UnknownExportSchemaVersionIsRefused) {
  ScratchDir dir;
  auto summary = import({build_nsys_report(dir.path(), "future")}, dir.path() / "f.db");
  ASSERT_FALSE(summary.is_ok());
  EXPECT_EQ(summary.status().exit_code(), 3);
  EXPECT_NE(summary.status().message().find(
                "future.sqlite: export schema version 4.0.0 is not one partrain knows"),
            std::string::npos)
      << summary.status().message();
  EXPECT_FALSE(fs::exists(dir.path() / "f.db"));
}

TEST(NsysImport, SqliteThatIsNoExportIsRefused) {
  ScratchDir dir;
  const fs::path other = dir.path() / "other.sqlite";
  {
    auto db = SqliteDb::open(other.string(), SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    ASSERT_TRUE(db.is_ok());
    ASSERT_TRUE(db->exec("CREATE TABLE t(x)").is_ok());
  }
  auto summary = import({other}, dir.path() / "o.db");
  ASSERT_FALSE(summary.is_ok());
  EXPECT_EQ(summary.status().exit_code(), 3);
  EXPECT_NE(summary.status().message().find("not an Nsight Systems export"), std::string::npos);
}

// An export without its string table (every name is an id into it) is refused naming the table,
// not with the SQL that failed on it.
TEST(NsysImport, AnExportWithoutStringIdsIsRefusedNamingTheTable) {
  ScratchDir dir;
  const fs::path report = build_nsys_report(dir.path(), "rank0");
  {
    auto db = SqliteDb::open(report.string(), SQLITE_OPEN_READWRITE);
    ASSERT_TRUE(db.is_ok());
    ASSERT_TRUE(db->exec("DROP TABLE StringIds").is_ok());
  }
  auto summary = import({report}, dir.path() / "s.db");
  ASSERT_FALSE(summary.is_ok());
  EXPECT_EQ(summary.status().exit_code(), 3);
  EXPECT_NE(summary.status().message().find("an Nsight Systems export without StringIds"),
            std::string::npos)
      << summary.status().message();
  EXPECT_FALSE(fs::exists(dir.path() / "s.db"));
}

// The communicator payload's "No. of ranks" sized the import's per-rank vectors: 2^31 - 1 was
// 4 GB and an "internal error ... please report it". A world past partrain's bound is the report's
// fault, exit 3 naming the field.
TEST(NsysImport, AWorldPastTheBoundIsRefusedNamingThePayloadField) {
  ScratchDir dir;
  const fs::path report = build_nsys_report(dir.path(), "one_report");
  {
    auto db = SqliteDb::open(report.string(), SQLITE_OPEN_READWRITE);
    ASSERT_TRUE(db.is_ok());
    // ncclCommInitRank's payload: a 32-byte header, the communicator id (8), nranks (4), rank.
    ASSERT_TRUE(db->exec("UPDATE NVTX_EVENTS SET binaryData = CAST(substr(binaryData, 1, 40) || "
                         "X'FFFFFF7F' || substr(binaryData, 45) AS BLOB) WHERE textId = 4")
                    .is_ok());
  }
  auto summary = import({report}, dir.path() / "w.db");
  ASSERT_FALSE(summary.is_ok());
  EXPECT_EQ(summary.status().exit_code(), 3) << summary.status().message();
  EXPECT_NE(summary.status().message().find("payload field 'No. of ranks' says 2147483647 ranks"),
            std::string::npos)
      << summary.status().message();
  EXPECT_FALSE(fs::exists(dir.path() / "w.db"));
}

// Kernels whose end precedes their start were kept 0 long without a word (Kineto's negative
// durs are said).
TEST(NsysImport, KernelsEndingBeforeTheyStartAreSaid) {
  ScratchDir dir;
  const fs::path report = build_nsys_report(dir.path(), "one_report");
  int64_t kernels = 0;
  {
    auto db = SqliteDb::open(report.string(), SQLITE_OPEN_READWRITE);
    ASSERT_TRUE(db.is_ok());
    ASSERT_TRUE(db->exec("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = start - 1000000").is_ok());
    auto count = SqliteStatement::prepare(*db, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL");
    ASSERT_TRUE(count.is_ok());
    ASSERT_EQ(count->step(), SQLITE_ROW);
    kernels = count->column_int(0);
  }
  ASSERT_GT(kernels, 0);
  auto summary = import({report}, dir.path() / "r.db");
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  bool said = false;
  for (const std::string& w : summary->warnings) {
    said = said || w == fmt::format(
                            "{} events end before they start: each is kept as an instant "
                            "(0 long) at its start",
                            kernels);
  }
  EXPECT_TRUE(said) << ::testing::PrintToString(summary->warnings);
}

TEST(NsysImport, TwoReportsOfOneRankAreRefused) {
  ScratchDir dir;
  auto summary =
      import({build_nsys_report(dir.path(), "one_report"), build_nsys_report(dir.path(), "rank0")},
             dir.path() / "d.db");
  ASSERT_FALSE(summary.is_ok());
  EXPECT_EQ(summary.status().exit_code(), 3);
  EXPECT_NE(summary.status().message().find("is rank 0, and so is"), std::string::npos)
      << summary.status().message();
  EXPECT_FALSE(fs::exists(dir.path() / "d.db"));
}

}  // namespace
}  // namespace partrain::profiler
