// A damaged trace (an edited file, a damaged page, a writer's bug) holds values that cannot be
// true: steps of negative length, a collective whose GPU end precedes its start, a negative size,
// a group larger than the world, rows whose strings or track kinds are lost. The analyses never
// show such a value as measured, and never drop such a row without a word: each is data loss.
#include "analyzers/trace_data_loss.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "analyzers/analysis_report.h"
#include "analyzers/analysis_window.h"
#include "analyzers/collective_groups.h"
#include "profiler/trace_reader/trace_reader.h"
#include "tests/support/trace_query.h"
#include "tests/unit/analyzers/analysis_trace_fixture.h"

namespace partrain::analyzers {
namespace {

using testing::kMs;

// A trace written whole, then damaged by SQL on the closed file, then opened to read.
class DamagedTraceTest : public testing::AnalysisTraceTest {
 protected:
  void write(std::vector<profiler::TraceEvent> events, int world_size = 2) {
    path_ = dir_ / "damaged.db";
    auto writer = profiler::TraceWriter::create(path_);
    ASSERT_TRUE(writer.is_ok()) << writer.status().message();
    (*writer)->append(profiler::RunInfo{"run-1", "test", "{}", world_size, 1, 0});
    (*writer)->append(events);
    ASSERT_TRUE((*writer)->set_run_status(profiler::RunStatus::kCompleted).is_ok());
  }
  void damage(const std::string& sql) {
    auto db = profiler::SqliteDb::open(path_.string(), SQLITE_OPEN_READWRITE);
    ASSERT_TRUE(db.is_ok()) << db.status().message();
    ASSERT_TRUE(db->exec(sql).is_ok()) << sql;
  }
  const profiler::SqliteDb& open() {
    query_ = std::make_unique<partrain::testing::TraceQuery>(path_);
    return query_->db();
  }
  // name -> rank (-1: the run) -> value.
  static std::map<std::string, std::map<int, int64_t>> losses(const RunOutcome& outcome) {
    std::map<std::string, std::map<int, int64_t>> out;
    for (const DataLossStat& loss : outcome.data_loss)
      out[loss.name][loss.rank.value_or(-1)] = loss.value;
    return out;
  }

  std::filesystem::path path_;
  std::unique_ptr<partrain::testing::TraceQuery> query_;
};

std::vector<profiler::TraceEvent> four_steps_of_two_ranks() {
  std::vector<profiler::TraceEvent> events;
  for (int rank = 0; rank < 2; ++rank) {
    for (int step = 0; step < 4; ++step) {
      testing::add_step(events, rank, step, 100.0 * step, 100.0 * step + 90);
      events.push_back(testing::slice(rank, profiler::SliceCategory::kCompute, 100.0 * step + 10,
                                      100.0 * step + 80, step));
    }
  }
  return events;
}

// F7: a step whose stored length is negative or zero is not a step: left out of the window (it
// neither shrinks nor reverses a rank's span, so tokens/s and step times stay true) and counted.
TEST_F(DamagedTraceTest, StepsOfZeroOrNegativeLengthAreLeftOutAndCountedAsDataLoss) {
  write(four_steps_of_two_ranks());
  damage("UPDATE step SET dur_ns = -dur_ns WHERE rank = 0");
  damage("UPDATE step SET dur_ns = 0 WHERE rank = 1 AND step = 3");
  const profiler::TraceReader reader(open());
  auto window = choose_window(reader, WindowOptions{});
  ASSERT_TRUE(window.is_ok()) << window.status().message();
  // Rank 1's steps 1..2 are the window (warm-up step 0 skipped, step 3 unusable); rank 0, whose
  // steps are all unusable, is given the window of the others, never a span ending before it
  // starts.
  EXPECT_EQ(window->first_step, 1);
  EXPECT_EQ(window->last_step, 2);
  EXPECT_EQ(window->spans.at(1).steps, 2);
  EXPECT_EQ(window->spans.at(0).steps, 0);
  EXPECT_EQ(window->spans.at(0).start_ns, 100 * kMs);
  EXPECT_EQ(window->spans.at(0).end_ns, 290 * kMs);
  auto outcome = read_run_outcome(reader);
  ASSERT_TRUE(outcome.is_ok()) << outcome.status().message();
  const auto lost = losses(*outcome);
  ASSERT_TRUE(lost.contains("step_duration_unusable"));
  EXPECT_EQ(lost.at("step_duration_unusable"), (std::map<int, int64_t>{{0, 4}, {1, 1}}));
  const std::vector<Finding> findings = run_outcome_findings(*outcome);
  ASSERT_FALSE(findings.empty());
  EXPECT_EQ(findings.front().kind, "trace_data_loss");
  EXPECT_NE(findings.front().evidence.find("step_duration_unusable = 4 on rank 0"),
            std::string::npos)
      << findings.front().evidence;
}

// F8 and F11: a backwards GPU span, a negative size, a group of 2^31 - 1 ranks in a world of 2, a
// group_ranks list naming rank -1: each read as not recorded (the host span times the op; no
// size, so no bandwidth; no group, so no "rank -1 never recorded"), and each counted.
TEST_F(DamagedTraceTest, ImpossibleCollectiveValuesReadAsNotRecordedAndAreCounted) {
  std::vector<profiler::TraceEvent> events;
  for (int rank = 0; rank < 2; ++rank) {
    for (uint64_t seq = 1; seq <= 4; ++seq) {
      profiler::CollectiveRecord r;
      r.world_rank = rank;
      const int64_t start_ns = static_cast<int64_t>(seq) * 10 * kMs;
      r.gpu_start_ns = start_ns + kMs / 2;
      r.gpu_end_ns = start_ns + kMs;
      r.event.comm_id = "dp0";
      r.event.seq = seq;
      r.event.op = "all_reduce";
      r.event.dtype = "float";
      r.event.count = 1 << 18;
      r.event.bytes = 1 << 20;
      r.event.rank = rank;
      r.event.group_ranks = {0, 1};
      r.event.enqueue_ns = r.event.start_ns = start_ns;
      r.event.end_ns = start_ns + 2 * kMs;
      r.event.state = profiler::CollectiveState::kCompleted;
      events.push_back(std::move(r));
    }
  }
  write(std::move(events));
  damage("UPDATE collective SET gpu_end_ns = gpu_start_ns - 1000000 WHERE seq = 1");
  damage("UPDATE collective SET bytes = -bytes WHERE seq = 2");
  damage("INSERT INTO string (value) VALUES ('0,1,-1')");
  damage(
      "UPDATE collective SET group_ranks_id = (SELECT id FROM string WHERE value = '0,1,-1') "
      "WHERE seq = 3");
  damage("UPDATE collective SET group_size = 2147483647 WHERE seq = 4");
  const profiler::TraceReader reader(open());
  std::map<uint64_t, std::vector<CollectiveRow>> rows;
  GroupVisitor visitor;
  visitor.on_group = [&](const CollectiveGroup& group) { rows[group.seq] = group.rows; };
  AnalysisWindow window;
  window.ranks = {0, 1};
  for (int rank : window.ranks) window.spans[rank] = RankSpan{0, int64_t{1} << 60, 0};
  ASSERT_TRUE(for_each_collective_group(reader, window, visitor).is_ok());
  ASSERT_EQ(rows.size(), 4u);
  for (const CollectiveRow& row : rows[1]) EXPECT_EQ(row.time_ns, 2 * kMs) << row.rank;
  for (const CollectiveRow& row : rows[2]) {
    EXPECT_EQ(row.bytes, 0) << row.rank;
    EXPECT_FALSE(row.sized) << row.rank;
  }
  for (const CollectiveRow& row : rows[3]) {
    EXPECT_TRUE(row.group_ranks.empty()) << row.group_ranks;
    for (int member : parse_group_ranks(row.group_ranks)) EXPECT_GE(member, 0);
  }
  for (const CollectiveRow& row : rows[4]) EXPECT_EQ(row.group_size, 0) << row.rank;
  for (const CollectiveRow& row : rows[4]) EXPECT_EQ(row.time_ns, kMs / 2) << "intact GPU span";
  auto outcome = read_run_outcome(reader);
  ASSERT_TRUE(outcome.is_ok()) << outcome.status().message();
  const auto lost = losses(*outcome);
  const std::map<int, int64_t> one_each{{0, 1}, {1, 1}}, two_each{{0, 2}, {1, 2}};
  ASSERT_TRUE(lost.contains("collective_gpu_span_reversed"));
  EXPECT_EQ(lost.at("collective_gpu_span_reversed"), one_each);
  ASSERT_TRUE(lost.contains("collective_bytes_negative"));
  EXPECT_EQ(lost.at("collective_bytes_negative"), one_each);
  ASSERT_TRUE(lost.contains("collective_group_unusable"));
  EXPECT_EQ(lost.at("collective_group_unusable"), two_each);
}

// F9: a string table that lost its rows keeps the tracks and slices that name them (read as
// "(lost string N)", as merge writes them) and says how many strings were lost.
TEST_F(DamagedTraceTest, RowsWhoseStringsWereLostAreKeptAndTheLossCounted) {
  write(four_steps_of_two_ranks());
  damage("DELETE FROM string");
  const profiler::TraceReader reader(open());
  auto tracks = reader.tracks();
  ASSERT_TRUE(tracks.is_ok());
  ASSERT_EQ(tracks->size(), 2u);  // rank 0's and rank 1's main thread
  EXPECT_EQ(tracks->front().name.rfind("(lost string ", 0), 0u) << tracks->front().name;
  auto outcome = read_run_outcome(reader);
  ASSERT_TRUE(outcome.is_ok()) << outcome.status().message();
  const auto lost = losses(*outcome);
  ASSERT_TRUE(lost.contains("strings_lost"));
  EXPECT_EQ(lost.at("strings_lost").at(-1), 2);  // the track name "main" and the slice name "s"
}

// F9: slices on tracks of a kind no partrain writes cannot be decoded: counted as data loss, and
// the report does not then blame the program for compute it did not record.
TEST_F(DamagedTraceTest, SlicesOfAnUnknownTrackKindAreCountedAndComputeIsNotCalledUnrecorded) {
  write(four_steps_of_two_ranks());
  damage("UPDATE track SET kind = 99");
  const profiler::TraceReader reader(open());
  auto window = choose_window(reader, WindowOptions{});
  ASSERT_TRUE(window.is_ok()) << window.status().message();
  auto report = analyze_run(reader, *window, {});
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  const auto lost = losses(report->outcome);
  ASSERT_TRUE(lost.contains("track_kind_unknown"));
  // Each rank's one track: its 4 step slices and 4 compute slices.
  EXPECT_EQ(lost.at("track_kind_unknown"), (std::map<int, int64_t>{{0, 8}, {1, 8}}));
  for (const Finding& finding : report->findings) {
    if (finding.kind != "compute_unrecorded") continue;
    EXPECT_EQ(finding.advice.find("torch.profiler"), std::string::npos) << finding.advice;
    EXPECT_NE(finding.evidence.find("track_kind_unknown"), std::string::npos) << finding.evidence;
  }
}

}  // namespace
}  // namespace partrain::analyzers
