// A damaged trace's string table that lost rows: the views join strings inwardly, so every read
// (analyze, export, a user's SQL) dropped the rows naming a lost string, while strings_lost said
// they were read as "(lost string N)". open_trace shadows those views with TEMP views that keep
// the rows; on a whole table they read exactly what the file's views read.
#include "profiler/trace_reader/lost_strings.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "profiler/trace_schema.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/trace_fixture.h"

namespace partrain::profiler {
namespace {

// The views of views.sql that join the string table.
const std::vector<std::string> kStringViews = {"tracks",  "slices",    "collectives",
                                               "kernels", "transfers", "counters"};

// One row of every kind that names strings: a slice, a collective with its reduce op and group,
// a kernel, a transfer and a counter sample, on two ranks.
std::vector<TraceEvent> rows_of_every_kind() {
  std::vector<TraceEvent> events;
  for (int rank = 0; rank < 2; ++rank) {
    events.push_back(SliceEvent{rank, TrackKind::kCpuThread, "main", "forward",
                                SliceCategory::kCompute, 1'000, 500, 0, -1, -1});
    events.push_back(testing::completed_all_reduce("world", rank, {0, 1}, 0, 4096, 2'000, 300));
    KernelRecord kernel;
    kernel.slice = {rank,
                    TrackKind::kCudaStream,
                    "stream 7",
                    "gemm_kernel",
                    SliceCategory::kKernel,
                    3'000,
                    200,
                    0,
                    -1,
                    -1};
    kernel.correlation_id = 11;
    events.push_back(kernel);
    TransferRecord copy;
    copy.slice = {rank,
                  TrackKind::kCudaStream,
                  "stream 7",
                  "memcpy HtoD",
                  SliceCategory::kMemcpy,
                  4'000,
                  100,
                  0,
                  -1,
                  -1};
    copy.bytes = 1 << 20;
    events.push_back(copy);
    events.push_back(CounterSample{rank, "gpu_util", 5'000, 42.0});
  }
  return events;
}

int64_t count(SqliteDb& db, const std::string& sql) {
  auto value = db.query_text(sql);
  EXPECT_TRUE(value.is_ok()) << sql << ": " << value.status().message();
  return value.is_ok() && value->has_value() ? std::stoll(**value) : -1;
}

TEST(LostStrings, EveryStringJoinOfTheViewsIsRewrittenAndAWholeTableReadsTheSameRows) {
  const std::string views(views_sql());
  const std::string kept = fmt::format("{};", fmt::join(views_keeping_lost_strings(views), ";\n"));
  size_t joins = 0;
  for (size_t at = views.find("JOIN string "); at != std::string::npos;
       at = views.find("JOIN string ", at + 1)) {
    ++joins;
  }
  size_t left_joins = 0;
  for (size_t at = kept.find("LEFT JOIN string "); at != std::string::npos;
       at = kept.find("LEFT JOIN string ", at + 1)) {
    ++left_joins;
  }
  EXPECT_EQ(left_joins, joins) << "a string join views.sql writes in another form:\n" << kept;
  for (const std::string& view : kStringViews) {
    EXPECT_NE(kept.find("CREATE TEMP VIEW " + view + " AS"), std::string::npos) << view;
  }

  testing::ScratchDir scratch;
  TraceFile trace =
      testing::write_completed_trace(scratch.path() / "whole.db", "{}", 2, rows_of_every_kind());
  // open_trace left a whole table's views alone, as it does those of a trace with no string yet.
  EXPECT_EQ(count(trace.db, "SELECT count(*) FROM sqlite_temp_schema"), 0);
  TraceFile empty = testing::write_completed_trace(scratch.path() / "empty.db", "{}", 2, {});
  EXPECT_EQ(count(empty.db, "SELECT count(*) FROM sqlite_temp_schema"), 0);
  ASSERT_TRUE(trace.db.exec(kept).is_ok()) << trace.db.error_message();
  for (const std::string& view : kStringViews) {
    const int64_t rows = count(trace.db, "SELECT count(*) FROM main." + view);
    EXPECT_GE(rows, 2) << view;
    EXPECT_EQ(count(trace.db, "SELECT count(*) FROM temp." + view), rows) << view;
    EXPECT_EQ(count(trace.db, "SELECT count(*) FROM (SELECT * FROM main." + view +
                                  " EXCEPT SELECT * FROM temp." + view + ")"),
              0)
        << view;
  }
}

TEST(LostStrings, RowsNamingALostStringStayInEveryViewReadAsItsText) {
  testing::ScratchDir scratch;
  const auto path = scratch.path() / "damaged.db";
  std::vector<int64_t> before;
  {
    TraceFile whole = testing::write_completed_trace(path, "{}", 2, rows_of_every_kind());
    for (const std::string& view : kStringViews) {
      before.push_back(count(whole.db, "SELECT count(*) FROM " + view));
    }
  }
  {
    auto db = SqliteDb::open(path.string(), SQLITE_OPEN_READWRITE);
    ASSERT_TRUE(db.is_ok()) << db.status().message();
    ASSERT_TRUE(db->exec("DELETE FROM string WHERE value IN ('main', 'forward', 'all_reduce', "
                         "'gemm_kernel', 'memcpy HtoD', 'gpu_util', 'sum')")
                    .is_ok());
  }
  auto trace = open_trace(path);
  ASSERT_TRUE(trace.is_ok()) << trace.status().message();
  for (size_t i = 0; i < kStringViews.size(); ++i) {
    EXPECT_EQ(count(trace->db, "SELECT count(*) FROM " + kStringViews[i]), before[i])
        << kStringViews[i];
  }
  auto op = trace->db.query_text("SELECT op || ' ' || reduce_op FROM collectives LIMIT 1");
  ASSERT_TRUE(op.is_ok() && op->has_value());
  EXPECT_EQ(op->value().rfind("(lost string ", 0), 0u) << op->value();
  EXPECT_NE(op->value().find(" (lost string "), std::string::npos) << op->value();
  EXPECT_EQ(count(trace->db, "SELECT count(*) FROM slices WHERE name = 'forward'"), 0);
  EXPECT_EQ(count(trace->db, "SELECT count(*) FROM kernels WHERE name LIKE '(lost string %)'"), 2);
  EXPECT_EQ(count(trace->db, "SELECT count(*) FROM collectives WHERE reduce_op IS NULL"), 0);
  // A string id a row leaves NULL stays NULL (the collectives of a track without a label).
  EXPECT_EQ(count(trace->db, "SELECT count(*) FROM collectives WHERE label IS NOT NULL"), 0);
}

}  // namespace
}  // namespace partrain::profiler
