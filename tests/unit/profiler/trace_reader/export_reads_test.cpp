// The export's reads of a selection of ranks go through the indexes to those ranks' rows: a
// filter written `?1 IS NULL OR rank IN (...)` had SQLite scan every slice of the trace for each
// rank, so `export --per-rank` of 1,024 ranks took 15 minutes.
#include "profiler/trace_reader/export_reads.h"

#include <gtest/gtest.h>

#include "tests/support/scratch_dir.h"
#include "tests/support/trace_fixture.h"

namespace partrain::profiler {
namespace {

std::vector<TraceEvent> slices_of(int rank, int count) {
  std::vector<TraceEvent> events;
  for (int i = 0; i < count; ++i) {
    events.push_back(SliceEvent{rank, TrackKind::kCpuThread, "main", "op", SliceCategory::kCompute,
                                1000 * i, 10, i / 10, -1, -1});
  }
  return events;
}

struct Read {
  int rows = 0;
  int vm_steps = 0;
};

Read read_slices(const TraceReader& reader, std::vector<int> ranks) {
  ExportSelection selection;
  selection.ranks = std::move(ranks);
  auto cursor = export_slices(reader, selection, SliceDetail::kNone);
  EXPECT_TRUE(cursor.is_ok()) << cursor.status().message();
  Read read;
  ExportSlice slice;
  while (cursor->next(slice)) ++read.rows;
  EXPECT_TRUE(cursor->status().is_ok()) << cursor->status().message();
  read.vm_steps = cursor->vm_steps();
  return read;
}

TEST(ExportReadsTest, ASelectedRankIsReadWithoutScanningTheOthers) {
  testing::ScratchDir scratch;
  std::vector<TraceEvent> events = slices_of(0, 20);
  std::vector<TraceEvent> others = slices_of(1, 20'000);
  events.insert(events.end(), others.begin(), others.end());
  TraceFile trace = testing::write_completed_trace(scratch.path() / "t.db", "{}", 2, events);
  TraceReader reader(trace.db);

  const Read all = read_slices(reader, {});
  EXPECT_EQ(all.rows, 20'020);
  const Read rank0 = read_slices(reader, {0});
  EXPECT_EQ(rank0.rows, 20);
  // Its 20 rows, each a handful of lookups; a scan of rank 1's 20,000 would take more than that
  // many steps.
  EXPECT_LT(rank0.vm_steps, 2'000) << "the whole trace took " << all.vm_steps;
  EXPECT_EQ(read_slices(reader, {1}).rows, 20'000);
}

}  // namespace
}  // namespace partrain::profiler
