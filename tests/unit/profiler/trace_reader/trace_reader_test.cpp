// The reader on traces written by the real TraceWriter: the codes it decodes against the
// schema's own tables, the merge of a rank's tracks in start order, the live reads by id, and
// the small tables.
#include "profiler/trace_reader/trace_reader.h"

#include <gtest/gtest.h>

#include "profiler/sqlite_db.h"
#include "profiler/trace_open.h"
#include "profiler/trace_reader/collective_reads.h"
#include "profiler/trace_reader/live_reads.h"
#include "profiler/trace_reader/memory_reads.h"
#include "profiler/trace_reader/slice_reads.h"
#include "profiler/trace_reader/step_reads.h"
#include "profiler/trace_reader/trace_codes.h"
#include "profiler/trace_writer.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/trace_fixture.h"

// Unwraps a StatusOr into `lhs`, or fails the test there.
#define READER_CONCAT_(a, b) a##b
#define READER_CONCAT(a, b) READER_CONCAT_(a, b)
#define ASSERT_OK_AND_ASSIGN(lhs, expr) \
  ASSERT_OK_AND_ASSIGN_IMPL(READER_CONCAT(status_or_, __LINE__), lhs, expr)
#define ASSERT_OK_AND_ASSIGN_IMPL(tmp, lhs, expr)              \
  auto tmp = (expr);                                           \
  ASSERT_TRUE(tmp.is_ok()) << tmp.status().message();          \
  lhs = std::move(tmp).value()

namespace partrain::profiler {
namespace {

SliceEvent slice(int rank, TrackKind kind, std::string track, SliceCategory category,
                 int64_t start, int64_t end) {
  return SliceEvent{rank, kind, std::move(track), "s", category, start, end - start, 1, -1, -1};
}

class TraceReaderTest : public ::testing::Test {
 protected:
  std::filesystem::path path() const { return dir_.path() / "run.db"; }
  TraceFile write(std::vector<TraceEvent> events) {
    return testing::write_completed_trace(path(), "{\"backend\":\"gloo\"}", 2, std::move(events));
  }
  testing::ScratchDir dir_;
};

// The codes the reader decodes are those of the trace's lookup tables, by name.
TEST_F(TraceReaderTest, DecodesCodesAsTheSchemasTablesName) {
  TraceFile trace = write({});
  for (const char* table : {"slice_category", "track_kind"}) {
    auto stmt = SqliteStatement::prepare(trace.db, std::string("SELECT id, name FROM ") + table);
    ASSERT_TRUE(stmt.is_ok());
    int rows = 0;
    while (stmt->step() == SQLITE_ROW) {
      ++rows;
      const int64_t code = stmt->column_int(0);
      const std::string name = stmt->column_text(1);
      if (std::string(table) == "slice_category") {
        ASSERT_TRUE(slice_category_from_code(code)) << name;
        EXPECT_EQ(slice_category_name(*slice_category_from_code(code)), name);
      } else {
        ASSERT_TRUE(track_kind_from_code(code)) << name;
        EXPECT_EQ(track_kind_name(*track_kind_from_code(code)), name);
      }
    }
    EXPECT_GT(rows, 4) << table;
  }
  EXPECT_FALSE(slice_category_from_code(9));
  EXPECT_FALSE(slice_category_from_code(-1));
  EXPECT_EQ(memory_category_from_code(3), 3);
  EXPECT_EQ(memory_category_from_code(42), kMemoryCategoryCount - 1);  // other
  EXPECT_EQ(run_status_from_name("killed"), RunStatus::kKilled);
  EXPECT_EQ(stat_severity_from_name("data_loss"), StatSeverity::kDataLoss);
  EXPECT_FALSE(run_status_from_name("paused"));
}

// The collectives view spells each state; the reader's enum says the same.
TEST_F(TraceReaderTest, CollectiveStatesReadAsTheViewNamesThem) {
  std::vector<TraceEvent> events;
  const CollectiveState states[] = {CollectiveState::kEnqueued, CollectiveState::kStarted,
                                    CollectiveState::kCompleted, CollectiveState::kFailed};
  for (uint64_t seq = 0; seq < 4; ++seq) {
    auto op = testing::completed_all_reduce("dp", 0, {0, 1}, seq, 1024, 100 * (seq + 1), 50);
    op.event.state = states[seq];
    events.push_back(op);
  }
  TraceFile trace = write(events);
  TraceReader reader(trace.db);
  ASSERT_OK_AND_ASSIGN(const std::vector<Communicator> comms, communicators(reader));
  ASSERT_EQ(comms.size(), 1u);
  EXPECT_EQ(comms[0].comm_id, "dp");
  ASSERT_OK_AND_ASSIGN(CommunicatorOpCursor ops, communicator_ops(reader, comms[0]));
  auto view = SqliteStatement::prepare(trace.db, "SELECT state FROM collectives ORDER BY seq");
  ASSERT_TRUE(view.is_ok());
  CollectiveOp op;
  int64_t seq = 0;
  while (ops.next(op)) {
    ASSERT_EQ(view->step(), SQLITE_ROW);
    EXPECT_EQ(op.seq, seq++);
    ASSERT_TRUE(op.state);
    EXPECT_EQ(collective_state_name(*op.state), view->column_text(0));
    EXPECT_EQ(op.op, "all_reduce");
    EXPECT_EQ(op.comm_id, "dp");
    EXPECT_EQ(op.group_ranks, "0,1");
    EXPECT_EQ(op.group_size, 2);
    EXPECT_EQ(op.bytes, 1024);
  }
  EXPECT_TRUE(ops.status().is_ok());
  EXPECT_EQ(seq, 4);
}

// A rank's slices over several tracks come merged in order of start, clipped to those that
// overlap the stretch asked for, of the categories asked for; other ranks' are left out.
TEST_F(TraceReaderTest, RankSlicesMergeTracksInStartOrder) {
  TraceFile trace = write({
      slice(0, TrackKind::kCpuThread, "main", SliceCategory::kCompute, 0, 40),
      slice(0, TrackKind::kComm, "dp", SliceCategory::kCollective, 10, 20),
      slice(0, TrackKind::kCpuThread, "main", SliceCategory::kCompute, 50, 70),
      slice(0, TrackKind::kCudaStream, "s7", SliceCategory::kMemcpy, 45, 60),
      slice(0, TrackKind::kCpuThread, "main", SliceCategory::kSync, 30, 35),
      slice(1, TrackKind::kCpuThread, "main", SliceCategory::kCompute, 5, 90),
      slice(0, TrackKind::kCpuThread, "main", SliceCategory::kCompute, 100, 120),
  });
  TraceReader reader(trace.db);
  ASSERT_OK_AND_ASSIGN(
      RankSliceCursor slices,
      rank_slices(reader, 0, 15, 100,
                  {SliceCategory::kCompute, SliceCategory::kCollective, SliceCategory::kMemcpy}));
  std::vector<std::pair<int64_t, SliceCategory>> got;
  SliceSpan s;
  while (slices.next(s)) got.emplace_back(s.start_ns, s.category);
  EXPECT_TRUE(slices.status().is_ok());
  const std::vector<std::pair<int64_t, SliceCategory>> expected = {
      {0, SliceCategory::kCompute}, {10, SliceCategory::kCollective},
      {45, SliceCategory::kMemcpy}, {50, SliceCategory::kCompute}};
  EXPECT_EQ(got, expected);
}

// A rank's tracks, by id, those a live writer adds later included; no other rank's.
TEST_F(TraceReaderTest, TracksOfARankIncludeThoseCreatedSince) {
  auto writer = TraceWriter::create(path());
  ASSERT_TRUE(writer.is_ok());
  std::vector<TraceEvent> first{
      slice(0, TrackKind::kCpuThread, "main", SliceCategory::kCompute, 0, 9),
      slice(1, TrackKind::kCpuThread, "main", SliceCategory::kCompute, 0, 9)};
  (*writer)->append(first);
  ASSERT_TRUE((*writer)->commit().is_ok());
  ASSERT_OK_AND_ASSIGN(TraceFile trace, open_trace(path()));
  TraceReader reader(trace.db);
  auto names = [&reader](int rank) {
    std::vector<std::string> out;
    auto tracks = reader.tracks_of_rank(rank);
    EXPECT_TRUE(tracks.is_ok());
    for (const TrackRow& t : *tracks) out.push_back(t.name);
    return out;
  };
  EXPECT_EQ(names(0), std::vector<std::string>{"main"});
  std::vector<TraceEvent> later{
      slice(0, TrackKind::kComm, "dp", SliceCategory::kCollective, 10, 20),
      slice(1, TrackKind::kComm, "tp", SliceCategory::kCollective, 10, 20)};
  (*writer)->append(later);
  ASSERT_TRUE((*writer)->commit().is_ok());
  EXPECT_EQ(names(0), (std::vector<std::string>{"main", "dp"}));
  EXPECT_EQ(names(1), (std::vector<std::string>{"main", "tp"}));
  EXPECT_TRUE(names(7).empty());
}

// What a live reader reads: slices by id with their collective row, then only what came since.
TEST_F(TraceReaderTest, StoredSlicesAreReadByIdWithTheirCollectives) {
  auto writer = TraceWriter::create(path());
  ASSERT_TRUE(writer.is_ok());
  (*writer)->append(slice(0, TrackKind::kCpuThread, "main", SliceCategory::kCompute, 0, 10));
  (*writer)->append(testing::completed_all_reduce("dp", 1, {0, 1}, 7, 4096, 20, 5));
  ASSERT_TRUE((*writer)->commit().is_ok());
  auto trace = open_trace(path(), TraceOpenMode::kReadStrict);
  ASSERT_TRUE(trace.is_ok()) << trace.status().message();
  TraceReader reader(trace->db);
  ASSERT_OK_AND_ASSIGN(const int64_t last, last_slice_id(reader));
  EXPECT_EQ(last, 2);
  ASSERT_OK_AND_ASSIGN(StoredSliceCursor slices, slices_stored_between(reader, 0, last));
  StoredSlice s;
  ASSERT_TRUE(slices.next(s));
  EXPECT_EQ(s.rank, 0);
  EXPECT_EQ(s.category, SliceCategory::kCompute);
  EXPECT_FALSE(s.is_collective);
  ASSERT_TRUE(slices.next(s));
  EXPECT_EQ(s.rank, 1);
  EXPECT_EQ(s.end_ns, 25);
  ASSERT_TRUE(s.is_collective);
  EXPECT_EQ(s.collective.comm_id, "dp");
  EXPECT_EQ(s.collective.seq, 7);
  EXPECT_EQ(s.collective.bytes, 4096);
  EXPECT_EQ(s.collective.rank, 1);
  EXPECT_FALSE(slices.next(s));

  // A new rank's track arrives after the reader cached the tracks: it is found.
  (*writer)->append(slice(2, TrackKind::kCpuThread, "main", SliceCategory::kPhase, 30, 40));
  ASSERT_TRUE((*writer)->commit().is_ok());
  ASSERT_OK_AND_ASSIGN(const int64_t newest, last_slice_id(reader));
  ASSERT_OK_AND_ASSIGN(StoredSliceCursor more, slices_stored_between(reader, last, newest));
  ASSERT_TRUE(more.next(s));
  EXPECT_EQ(s.rank, 2);
  EXPECT_EQ(s.category, SliceCategory::kPhase);
  EXPECT_FALSE(more.next(s));
}

TEST_F(TraceReaderTest, ReadsTheRunRanksStatsStepsAndMemory) {
  RankInfo r0{0, 0, 0, "node0", 100, "cpu"};
  r0.exited = true;
  r0.exit_signal = 9;
  TraceFile trace = write({
      r0, RankInfo{1, 1, 0, "node0", 101, "cpu"},
      StepEvent{0, 1, 0, 100, 2.5, 64}, StepEvent{0, 2, 100, 120, 2.4, 64},
      StepEvent{1, 1, 0, 110, 2.5, 64}, StepEvent{3, 1, 0, 90, 2.5, 64},
      MemorySample{0, 2, 50, 1000}, MemorySample{0, 200, 10, 7}, MemorySample{1, 0, 5, 9},
      StatEvent{"events_dropped", 1, 4, StatSeverity::kDataLoss, "buffer full"},
      StatEvent{"run_note", -1, 1, StatSeverity::kInfo, ""},
  });
  TraceReader reader(trace.db);
  ASSERT_OK_AND_ASSIGN(const std::optional<RunRow> run, reader.run());
  ASSERT_TRUE(run);
  EXPECT_EQ(run->run_id, "run-1");
  EXPECT_EQ(run->status, RunStatus::kCompleted);
  EXPECT_EQ(run->world_size, 2);
  EXPECT_EQ(run->backend, "gloo");
  // A count no int holds, in a damaged or hostile file, is absent, not its low 32 bits.
  {
    auto edit = SqliteDb::open(path().string(), SQLITE_OPEN_READWRITE);
    ASSERT_TRUE(edit.is_ok()) << edit.status().message();
    const Status updated =
        edit->exec("UPDATE run SET world_size = 4294967298, failing_rank = -4294967295");
    ASSERT_TRUE(updated.is_ok()) << updated.message();
  }
  ASSERT_OK_AND_ASSIGN(const std::optional<RunRow> damaged, reader.run());
  ASSERT_TRUE(damaged);
  EXPECT_FALSE(damaged->world_size);
  EXPECT_FALSE(damaged->failing_rank);

  ASSERT_OK_AND_ASSIGN(const std::vector<RankRow> ranks, reader.ranks());
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_EQ(ranks[0].host, "node0");
  EXPECT_EQ(ranks[0].exit_signal, 9);
  EXPECT_FALSE(ranks[1].exit_code);
  ASSERT_OK_AND_ASSIGN(const std::vector<int> recorded, reader.recorded_ranks());
  EXPECT_EQ(recorded, (std::vector<int>{0, 1, 3}));  // rank 3 recorded a step only

  ASSERT_OK_AND_ASSIGN(const std::vector<StatRow> stats, reader.stats());
  auto stat = [&stats](std::string_view name) {
    auto it = std::find_if(stats.begin(), stats.end(),
                           [name](const StatRow& row) { return row.name == name; });
    EXPECT_NE(it, stats.end()) << name;
    return it == stats.end() ? StatRow{} : *it;
  };
  EXPECT_EQ(stat("events_dropped").rank, 1);
  EXPECT_EQ(stat("events_dropped").value, 4);
  EXPECT_EQ(stat("events_dropped").severity, StatSeverity::kDataLoss);
  EXPECT_EQ(stat("events_dropped").description, "buffer full");
  EXPECT_FALSE(stat("run_note").rank);  // the whole run
  EXPECT_EQ(stat("run_note").severity, StatSeverity::kInfo);

  ASSERT_OK_AND_ASSIGN(const std::vector<int64_t> steps, recorded_steps(reader));
  EXPECT_EQ(steps, (std::vector<int64_t>{1, 2}));
  ASSERT_OK_AND_ASSIGN(const StepSpan span, step_span(reader, 0, 1, 2));
  EXPECT_EQ(span.start_ns, 0);
  EXPECT_EQ(span.end_ns, 220);
  EXPECT_EQ(span.steps, 2);
  ASSERT_OK_AND_ASSIGN(StepCursor rank0, rank_steps(reader, 0, 2, 9));
  StepRow step;
  ASSERT_TRUE(rank0.next(step));
  EXPECT_EQ(step.step, 2);
  EXPECT_EQ(step.dur_ns, 120);
  EXPECT_EQ(step.tokens, 64);
  EXPECT_FALSE(rank0.next(step));

  // Rank 0's samples by time; a code this build does not know reads as `other`.
  ASSERT_OK_AND_ASSIGN(RankMemoryCursor memory, rank_memory(reader, 0));
  MemoryLevel sample;
  ASSERT_TRUE(memory.next(sample));
  EXPECT_EQ(sample.bytes, 7);  // at 10 ns
  EXPECT_EQ(sample.category, kMemoryCategoryCount - 1);
  ASSERT_TRUE(memory.next(sample));
  EXPECT_EQ(sample.category, 2);
  EXPECT_EQ(sample.bytes, 1000);
  EXPECT_FALSE(memory.next(sample));
  ASSERT_OK_AND_ASSIGN(const int64_t events, reader.event_count());
  EXPECT_EQ(events, 3 + 4);  // memory samples and steps: no slices
}

}  // namespace
}  // namespace partrain::profiler
