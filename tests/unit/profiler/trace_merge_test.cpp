// merge_traces: two node files of one run (node 0: ranks 0-1, node 1: ranks 2-3) become one trace
// whose views see every rank (collectives matched across nodes, strings interned once, stats
// added up, ids consistent), with the run row's rules, refusals and untouched inputs.
#include "profiler/trace_merge.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "profiler/sqlite_db.h"
#include "profiler/trace_open.h"
#include "profiler/trace_schema.h"
#include "profiler/trace_writer.h"
#include "tests/support/schema6_steps.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/trace_fixture.h"
#include "tests/support/trace_query.h"

namespace partrain::profiler {
namespace {

namespace fs = std::filesystem;
using testing::open_read_only;
using testing::query_number;
using testing::query_rows;

constexpr std::string_view kRunId = "20240611-1402-ab12";

// What one node's file holds besides its ranks' events.
struct NodeSpec {
  int node = 0;
  std::vector<int> ranks;
  std::string run_id = std::string(kRunId);
  std::string config = "{\"node\":0}";
  std::optional<RunStatus> status = RunStatus::kCompleted;  // nullopt: left running
  std::optional<int> failing_rank;
  int64_t start_ns = 1'000;
  int64_t end_ns = 90'000;
  int64_t dropped_events = 3;  // stat recorder_dropped_events of the whole run
  bool with_transfers = false;  // a GPU copy per rank (schema version 3)
  // What its import_missing_ranks says, as `partrain import` of some ranks' files writes it
  // (empty: no such stat).
  std::string missing_ranks;
};

NodeSpec with_transfers(NodeSpec spec) {
  spec.with_transfers = true;
  return spec;
}

CollectiveRecord world_all_reduce(int rank, uint64_t seq) {
  return testing::completed_all_reduce("world", rank, {0, 1, 2, 3}, seq, 4096,
                                       10'000 + static_cast<int64_t>(seq) * 1'000 + rank, 500);
}

std::vector<TraceEvent> rank_events(const NodeSpec& spec, int rank) {
  RankInfo info;
  info.rank = rank;
  info.local_rank = rank % 2;
  info.node = spec.node;
  info.host = fmt::format("host{}", spec.node);
  info.pid = 100 + rank;
  info.device = "cpu";
  std::vector<TraceEvent> events{info};
  // "forward" is in both files; "load node N" only in its node's file.
  for (const char* name : {"forward", "backward"}) {
    events.push_back(SliceEvent{rank, TrackKind::kCpuThread, "main", name, SliceCategory::kCompute,
                                2'000 + rank, 100, 1, 0, 3});
  }
  events.push_back(SliceEvent{rank, TrackKind::kCpuThread, "loader",
                              fmt::format("load node {}", spec.node), SliceCategory::kPhase,
                              1'500, 50});
  for (uint64_t seq = 0; seq < 3; ++seq) {
    CollectiveRecord all_reduce = world_all_reduce(rank, seq);
    if (seq == 1) {  // what NCCL's profiler plugin said of it (schema version 4)
      all_reduce.event.algorithm = "Ring";
      all_reduce.event.protocol = "LL128";
      all_reduce.event.channels = rank + 1;
    }
    events.push_back(std::move(all_reduce));
  }
  events.push_back(MemorySample{rank, 0, 1'000, 4096});
  events.push_back(MemorySample{rank, 3, 2'000, 8192 + rank});
  events.push_back(CounterSample{rank, fmt::format("gpu{}.power_w", rank), 3'000, 100.5 + rank});
  if (spec.with_transfers) {
    events.push_back(TransferRecord{SliceEvent{rank, TrackKind::kCudaStream, "gpu0 stream 7",
                                               "memcpy HtoD", SliceCategory::kMemcpy, 2'500, 40, 1},
                                    uint64_t{1} << 20 | static_cast<uint64_t>(rank), 5, 0, 7});
  }
  events.push_back(StepEvent{rank, 1, 2'000, 20'000, 2.5 - 0.1 * rank, 512});
  // A mixture-of-experts layer's routing (schema version 5).
  events.push_back(ExpertLoadRecord{rank, 1, 2, {10 + rank, 6}, rank, 0.5});
  events.push_back(StatEvent{"per_rank_errors", rank, 1, StatSeverity::kError, "one per rank"});
  return events;
}

void write_node(const fs::path& path, const NodeSpec& spec) {
  auto writer = TraceWriter::create(path);
  ASSERT_TRUE(writer.is_ok()) << writer.status().message();
  RunInfo run{spec.run_id, "partrain launch --nnodes 2 --workload mlp", spec.config, 4,
              1'700'000'000'000'000'000 + spec.node, spec.start_ns};
  (*writer)->append(run);
  for (int rank : spec.ranks) (*writer)->append(rank_events(spec, rank));
  (*writer)->append(StatEvent{"recorder_dropped_events", -1, spec.dropped_events,
                              StatSeverity::kDataLoss, ""});
  if (!spec.missing_ranks.empty()) {
    (*writer)->append(StatEvent{"import_missing_ranks", -1, 4 - std::ssize(spec.ranks),
                                StatSeverity::kDataLoss,
                                spec.missing_ranks + " of the world of 4 had no trace file: their "
                                                     "events and their part of every collective "
                                                     "are absent"});
  }
  ASSERT_TRUE((*writer)->commit().is_ok());
  if (spec.status) {
    ASSERT_TRUE((*writer)->set_run_status(*spec.status, spec.failing_rank, spec.end_ns).is_ok());
  }
}

NodeSpec node0() {
  NodeSpec spec;
  spec.ranks = {0, 1};
  return spec;
}
NodeSpec node1() {
  NodeSpec spec;
  spec.node = 1;
  spec.ranks = {2, 3};
  spec.config = "{\"node\":1}";
  spec.start_ns = 900;
  spec.end_ns = 95'000;
  spec.dropped_events = 4;
  return spec;
}

std::string file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

class TraceMergeTest : public ::testing::Test {
 protected:
  fs::path file(std::string_view name) const { return dir_ / name; }

  // Writes node 0's and node 1's files as run.db and run.node1.db.
  std::vector<fs::path> write_nodes(const NodeSpec& first, const NodeSpec& second) {
    std::vector<fs::path> paths{file("run.db"), file("run.node1.db")};
    write_node(paths[0], first);
    write_node(paths[1], second);
    return paths;
  }
  StatusOr<TraceMergeSummary> merge(const std::vector<fs::path>& inputs,
                                    TraceMergeOptions options = {}) {
    return merge_traces(inputs, file("all.db"), options);
  }
  // Names of the files left in the test directory that look like temporary outputs.
  std::vector<std::string> temporaries() const {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(dir_)) {
      std::string name = entry.path().filename().string();
      if (name.find(".merge-") != std::string::npos) names.push_back(name);
    }
    return names;
  }
  testing::ScratchDir scratch_;
  const fs::path& dir_ = scratch_.path();
};

TEST_F(TraceMergeTest, RowCountsAreTheSumsOfTheInputs) {
  auto inputs = write_nodes(node0(), node1());
  auto summary = merge(inputs);
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  EXPECT_EQ(summary->files, 2);
  EXPECT_EQ(summary->ranks, 4);
  EXPECT_EQ(summary->slices, 4 * (3 + 3));
  EXPECT_EQ(summary->collectives, 4 * 3);
  EXPECT_EQ(summary->run_id, kRunId);

  SqliteDb out = open_read_only(file("all.db"));
  for (std::string_view table : {"rank", "track", "slice", "collective", "memory", "step"}) {
    int64_t sum = 0;
    for (const fs::path& input : inputs) {
      sum += query_number(open_read_only(input), fmt::format("SELECT count(*) FROM {}", table));
    }
    EXPECT_EQ(query_number(out, fmt::format("SELECT count(*) FROM {}", table)), sum) << table;
  }
  EXPECT_EQ(query_number(out, "SELECT count(*) FROM slice"), 24);
  EXPECT_EQ(query_rows(out, "SELECT rank, node, host FROM ranks ORDER BY rank"),
            "0|0|host0\n1|0|host0\n2|1|host1\n3|1|host1\n");
}

TEST_F(TraceMergeTest, CollectivesAreMatchedAcrossNodes) {
  auto summary = merge(write_nodes(node0(), node1()));
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  SqliteDb out = open_read_only(file("all.db"));
  EXPECT_EQ(query_rows(out, "SELECT comm_id, seq, count(*), group_concat(rank) FROM "
                      "(SELECT * FROM collectives ORDER BY rank) GROUP BY comm_id, seq "
                      "ORDER BY seq"),
            "world|0|4|0,1,2,3\nworld|1|4|0,1,2,3\nworld|2|4|0,1,2,3\n");
  EXPECT_EQ(query_rows(out, "SELECT DISTINCT op, dtype, reduce_op, group_ranks, bytes FROM collectives"),
            "all_reduce|float|sum|0,1,2,3|4096\n");
  // Each collective's slice id leads to its own slice: same rank, comm track, op name, start.
  EXPECT_EQ(query_number(out, "SELECT count(*) FROM collectives c JOIN slices s "
                        "ON s.slice_id = c.slice_id WHERE s.rank = c.rank AND "
                        "s.track_kind = 'comm' AND s.track = 'world' AND s.name = 'all_reduce' "
                        "AND s.category = 'collective' AND s.ts_ns = 10000 + c.seq * 1000 + c.rank"),
            12);
}

TEST_F(TraceMergeTest, SlicesKeepTheirNamesTracksAndRanks) {
  auto summary = merge(write_nodes(node0(), node1()));
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  SqliteDb out = open_read_only(file("all.db"));
  EXPECT_EQ(query_rows(out, "SELECT rank, track, name, ts_ns, step, micro_batch, layer FROM slices "
                      "WHERE track_kind = 'cpu_thread' ORDER BY rank, track, name"),
            "0|loader|load node 0|1500|NULL|NULL|NULL\n0|main|backward|2000|1|0|3\n"
            "0|main|forward|2000|1|0|3\n"
            "1|loader|load node 0|1500|NULL|NULL|NULL\n1|main|backward|2001|1|0|3\n"
            "1|main|forward|2001|1|0|3\n"
            "2|loader|load node 1|1500|NULL|NULL|NULL\n2|main|backward|2002|1|0|3\n"
            "2|main|forward|2002|1|0|3\n"
            "3|loader|load node 1|1500|NULL|NULL|NULL\n3|main|backward|2003|1|0|3\n"
            "3|main|forward|2003|1|0|3\n");
  // Interned once: a value used by both files has one id, and ids are unique per track.
  EXPECT_EQ(query_number(out, "SELECT count(*) FROM string WHERE value = 'forward'"), 1);
  EXPECT_EQ(query_number(out, "SELECT count(*) FROM string"),
            query_number(out, "SELECT count(DISTINCT value) FROM string"));
  EXPECT_EQ(query_rows(out, "SELECT rank, kind, name FROM tracks ORDER BY rank, kind, name"),
            "0|comm|world\n0|counter|gpu0.power_w\n0|cpu_thread|loader\n0|cpu_thread|main\n"
            "1|comm|world\n1|counter|gpu1.power_w\n1|cpu_thread|loader\n1|cpu_thread|main\n"
            "2|comm|world\n2|counter|gpu2.power_w\n2|cpu_thread|loader\n2|cpu_thread|main\n"
            "3|comm|world\n3|counter|gpu3.power_w\n3|cpu_thread|loader\n3|cpu_thread|main\n");
}

TEST_F(TraceMergeTest, MemoryStepsAndStatsAreCopiedAndStatsAddUp) {
  auto summary = merge(write_nodes(node0(), node1()));
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  SqliteDb out = open_read_only(file("all.db"));
  EXPECT_EQ(query_rows(out, "SELECT rank, category, bytes FROM memory_events WHERE category = "
                      "'activations' ORDER BY rank"),
            "0|activations|8192\n1|activations|8193\n2|activations|8194\n3|activations|8195\n");
  EXPECT_EQ(query_rows(out, "SELECT rank, step, loss, tokens FROM steps ORDER BY rank"),
            "0|1|2.5|512\n1|1|2.4|512\n2|1|2.3|512\n3|1|2.2|512\n");
  // Counter samples keep their tracks (ids shifted past node 0's).
  EXPECT_EQ(query_rows(out, "SELECT rank, name, ts_ns, value FROM counters ORDER BY rank"),
            "0|gpu0.power_w|3000|100.5\n1|gpu1.power_w|3000|101.5\n"
            "2|gpu2.power_w|3000|102.5\n3|gpu3.power_w|3000|103.5\n");
  EXPECT_EQ(query_number(out, "SELECT count(DISTINCT track_id) FROM counter"), 4);
  EXPECT_EQ(query_rows(out, "SELECT name, rank, value, severity FROM stats ORDER BY name, rank"),
            "per_rank_errors|0|1|error\nper_rank_errors|1|1|error\n"
            "per_rank_errors|2|1|error\nper_rank_errors|3|1|error\n"
            "recorder_dropped_events|NULL|7|data_loss\n");
}

// Imports of ranks 0-1 and of ranks 2-3 of a world of 4, each saying the other's ranks had no
// file: merged, every rank is there and nothing is missing. The stat had been summed ("4 ...
// ranks 2,3 of the world of 4 had no trace file"), a false data-loss finding. With rank 3's
// file in neither, the merged trace says rank 3 alone is missing.
TEST_F(TraceMergeTest, ImportedRanksMissingFromOneInputAndPresentInAnotherAreNotMissing) {
  NodeSpec first = node0(), second = node1();
  first.missing_ranks = "ranks 2,3";
  second.missing_ranks = "ranks 0,1";
  auto summary = merge(write_nodes(first, second));
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  EXPECT_EQ(query_number(open_read_only(file("all.db")),
                         "SELECT count(*) FROM stats WHERE name = 'import_missing_ranks'"),
            0);

  second.ranks = {2};
  second.missing_ranks = "ranks 0,1,3";
  for (std::string_view written : {"all.db", "run.node1.db"}) fs::remove(file(written));
  write_node(file("run.node1.db"), second);
  summary = merge({file("run.db"), file("run.node1.db")});
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  EXPECT_EQ(query_rows(open_read_only(file("all.db")),
                       "SELECT rank, value, severity, description FROM stats WHERE name = "
                       "'import_missing_ranks'"),
            "NULL|1|data_loss|rank 3 of the world of 4 had no trace file: their events and their "
            "part of every collective are absent\n");
}

TEST_F(TraceMergeTest, KernelRowsFollowTheirSlices) {
  auto inputs = write_nodes(node0(), node1());
  {  // TraceWriter has no kernel events yet (GPU tracing): add one row to node 1's file by hand.
    auto db = SqliteDb::open(inputs[1].string(), SQLITE_OPEN_READWRITE);
    ASSERT_TRUE(db.is_ok());
    ASSERT_TRUE(db->exec("INSERT INTO string (id, value) VALUES (1000, 'sgemm_kernel');"
                         "INSERT INTO slice (id, track_id, ts_ns, dur_ns, name_id, category) "
                         "SELECT 1000, id, 7000, 40, 1000, 3 FROM track WHERE rank = 3 LIMIT 1;"
                         "INSERT INTO kernel (slice_id, correlation_id, device, grid_x) "
                         "VALUES (1000, 77, 0, 128)").is_ok());
  }
  auto summary = merge(inputs);
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  SqliteDb out = open_read_only(file("all.db"));
  EXPECT_EQ(query_rows(out, "SELECT rank, name, ts_ns, correlation_id, grid_x FROM kernels"),
            "3|sgemm_kernel|7000|77|128\n");
}

// A node file of schema version 1 has no counter table and no transfer table (version 3): it
// merges, with no samples or transfers of its own; the other node's keep their slices.
TEST_F(TraceMergeTest, AVersionOneInputHasNoCounterSamplesOrTransfers) {
  auto inputs = write_nodes(with_transfers(node0()), with_transfers(node1()));
  {
    auto db = SqliteDb::open(inputs[1].string(), SQLITE_OPEN_READWRITE);
    ASSERT_TRUE(db.is_ok());
    ASSERT_TRUE(db->exec("DROP VIEW counters; DELETE FROM track WHERE kind = 4; "
                         "DROP TABLE counter; DROP VIEW transfers; DELETE FROM slice WHERE id IN "
                         "(SELECT slice_id FROM transfer); DROP TABLE transfer; "
                         "PRAGMA user_version = 1; "
                         "UPDATE meta SET value = '1' WHERE key = 'schema_version'").is_ok())
        << db->error_message();
  }
  auto summary = merge(inputs);
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  SqliteDb out = open_read_only(file("all.db"));
  EXPECT_EQ(query_rows(out, "SELECT rank, name FROM counters ORDER BY rank"),
            "0|gpu0.power_w\n1|gpu1.power_w\n");
  EXPECT_EQ(query_rows(out, "SELECT rank, name, category, ts_ns, dur_ns, bytes, device, stream "
                            "FROM transfers ORDER BY rank"),
            "0|memcpy HtoD|memcpy|2500|40|1048576|0|7\n1|memcpy HtoD|memcpy|2500|40|1048577|0|7\n");
  EXPECT_EQ(query_number(out, "SELECT count(*) FROM steps"), 4);
}

// NCCL's choices stay with their collectives; an input older than version 4 has none.
TEST_F(TraceMergeTest, NcclChoicesFollowTheirCollectivesAndOlderInputsHaveNone) {
  auto inputs = write_nodes(node0(), node1());
  {
    auto db = SqliteDb::open(inputs[1].string(), SQLITE_OPEN_READWRITE);
    ASSERT_TRUE(db.is_ok());
    ASSERT_TRUE(db->exec("DROP TABLE collective_nccl; PRAGMA user_version = 3; "
                         "UPDATE meta SET value = '3' WHERE key = 'schema_version'").is_ok())
        << db->error_message();
  }
  ASSERT_TRUE(merge(inputs).is_ok());
  SqliteDb out = open_read_only(file("all.db"));
  EXPECT_EQ(query_rows(out, "SELECT rank, seq, algorithm, protocol, channels FROM collectives "
                            "WHERE algorithm IS NOT NULL OR channels IS NOT NULL ORDER BY rank"),
            "0|1|Ring|LL128|1\n1|1|Ring|LL128|2\n");
  EXPECT_EQ(query_number(out, "SELECT count(*) FROM collectives"), 12);
}

// `input` made a trace of an older schema `version`: `drop` removes what that version lacks.
void make_older(const fs::path& input, std::string_view drop, int version) {
  auto db = SqliteDb::open(input.string(), SQLITE_OPEN_READWRITE);
  ASSERT_TRUE(db.is_ok());
  ASSERT_TRUE(db->exec(fmt::format("{} PRAGMA user_version = {}; UPDATE meta SET value = '{}' "
                                   "WHERE key = 'schema_version'",
                                   drop, version, version))
                  .is_ok())
      << db->error_message();
}

// Expert loads are copied from every input; an input older than version 5 has none.
TEST_F(TraceMergeTest, ExpertLoadsAreCopiedAndOlderInputsHaveNone) {
  auto inputs = write_nodes(node0(), node1());
  make_older(inputs[1], "DROP VIEW expert_loads; DROP VIEW expert_layers; DROP TABLE expert_load;",
             4);
  ASSERT_TRUE(merge(inputs).is_ok());
  SqliteDb out = open_read_only(file("all.db"));
  EXPECT_EQ(query_rows(out,
                       "SELECT rank, step, layer, routed_tokens, dropped_tokens, aux_loss "
                       "FROM expert_layers ORDER BY rank"),
            "0|1|2|16|0|0.5\n1|1|2|17|1|0.5\n");
  EXPECT_EQ(query_rows(out,
                       "SELECT expert, tokens FROM expert_loads WHERE rank = 1 ORDER BY "
                       "expert"),
            "0|11\n1|6\n");
}

// The step rows a restarted worker replaced are copied from every input; an input older than
// version 6 kept none.
TEST_F(TraceMergeTest, EarlierStepsAreCopiedAndOlderInputsHaveNone) {
  auto inputs = write_nodes(node0(), node1());
  {
    auto db = SqliteDb::open(inputs[0].string(), SQLITE_OPEN_READWRITE);
    ASSERT_TRUE(db.is_ok());
    ASSERT_TRUE(db->exec("INSERT INTO earlier_step VALUES (0, 1, 10, 5, 2.5, NULL, 0), "
                         "(1, 1, 10, 6, NULL, 64, 0)")
                    .is_ok())
        << db->error_message();
  }
  make_older(inputs[1], "DROP VIEW earlier_steps; DROP TABLE earlier_step;", 5);
  ASSERT_TRUE(merge(inputs).is_ok());
  SqliteDb out = open_read_only(file("all.db"));
  EXPECT_EQ(query_rows(out,
                       "SELECT rank, step, ts_ns, dur_ns, loss, tokens FROM earlier_steps "
                       "ORDER BY rank"),
            "0|1|10|5|2.5|NULL\n1|1|10|6|NULL|64\n");
}

// Each step keeps its torchrun attempt; an input older than version 7 stored none, and its steps
// and replaced rows are merged as attempt 0's.
TEST_F(TraceMergeTest, StepsKeepTheirAttemptAndOlderInputsAreAttemptZero) {
  auto inputs = write_nodes(node0(), node1());
  for (const fs::path& input : inputs) {
    auto db = SqliteDb::open(input.string(), SQLITE_OPEN_READWRITE);
    ASSERT_TRUE(db.is_ok());
    ASSERT_TRUE(db->exec("UPDATE step SET attempt = 1; INSERT INTO earlier_step SELECT rank, "
                         "step, ts_ns - 1, dur_ns, loss, tokens, attempt FROM step")
                    .is_ok())
        << db->error_message();
  }
  make_older(inputs[1], testing::kStepTablesOfSchema6, 6);
  ASSERT_TRUE(merge(inputs).is_ok());
  SqliteDb out = open_read_only(file("all.db"));
  EXPECT_EQ(query_rows(out, "SELECT rank, step, attempt FROM steps ORDER BY rank"),
            "0|1|1\n1|1|1\n2|1|0\n3|1|0\n");
  EXPECT_EQ(query_rows(out, "SELECT rank, attempt FROM earlier_steps ORDER BY rank"),
            "0|1\n1|1\n2|0\n3|0\n");
}

// Both nodes' transfers, each on its own slice after the ids are shifted.
TEST_F(TraceMergeTest, TransfersKeepTheirSlices) {
  ASSERT_TRUE(merge(write_nodes(with_transfers(node0()), with_transfers(node1()))).is_ok());
  SqliteDb out = open_read_only(file("all.db"));
  EXPECT_EQ(query_rows(out, "SELECT x.rank, s.track, x.bytes - 1048576 FROM transfers x JOIN "
                            "slices s ON s.slice_id = x.slice_id AND s.rank = x.rank AND "
                            "s.category = 'memcpy' ORDER BY x.rank"),
            "0|gpu0 stream 7|0\n1|gpu0 stream 7|1\n2|gpu0 stream 7|2\n3|gpu0 stream 7|3\n");
}

TEST_F(TraceMergeTest, OutputIsAValidTraceWithMergedRunAndMeta) {
  auto inputs = write_nodes(node0(), node1());
  auto summary = merge(inputs);
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  // Complete in one file: no WAL to replay, no temporary left beside it.
  EXPECT_FALSE(fs::exists(file("all.db-wal")));
  EXPECT_TRUE(temporaries().empty());
  auto trace = open_trace(file("all.db"), TraceOpenMode::kReadStrict);
  ASSERT_TRUE(trace.is_ok()) << trace.status().message();
  EXPECT_EQ(trace->status, RunStatus::kCompleted);
  EXPECT_FALSE(trace->writer_alive);
  EXPECT_EQ(query_rows(trace->db, "PRAGMA integrity_check"), "ok\n");
  // As a closed trace is: one file, which a read-only reader leaves alone (no -wal, no -shm).
  EXPECT_EQ(query_rows(trace->db, "PRAGMA journal_mode"), "delete\n");
  EXPECT_FALSE(fs::exists(file("all.db-wal")));
  EXPECT_FALSE(fs::exists(file("all.db-shm")));
  EXPECT_EQ(query_rows(trace->db, "SELECT run_id, command, config, status, start_ns, end_ns, "
                            "world_size, failing_rank FROM runs"),
            fmt::format("{}|partrain launch --nnodes 2 --workload mlp|{{\"node\":0}}|completed|"
                        "900|95000|4|NULL\n", kRunId));
  EXPECT_EQ(query_rows(trace->db, "SELECT value FROM meta WHERE key IN ('format', 'schema_version') "
                            "ORDER BY key"),
            fmt::format("partrain-trace\n{}\n", kTraceSchemaVersion));
  EXPECT_EQ(query_rows(trace->db, "SELECT value FROM meta WHERE key = 'merged_from'"),
            fmt::format("[\"{}\", \"{}\"]\n", inputs[0].string(), inputs[1].string()));
}

TEST_F(TraceMergeTest, RunLevelFieldsComeFromNodeZeroWhateverTheOrder) {
  auto inputs = write_nodes(node0(), node1());
  auto summary = merge({inputs[1], inputs[0]});
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  SqliteDb out = open_read_only(file("all.db"));
  EXPECT_EQ(query_rows(out, "SELECT config, start_ns, end_ns FROM runs"), "{\"node\":0}|900|95000\n");
}

struct StatusCase {
  std::optional<RunStatus> node0, node1;
  std::optional<int> failing_rank;  // node 1's, when it failed
  std::string expected;             // status|failing_rank
};

TEST_F(TraceMergeTest, RunStatusIsTheGravestOfTheNodes) {
  const StatusCase cases[] = {
      {RunStatus::kCompleted, RunStatus::kCompleted, std::nullopt, "completed|NULL"},
      {RunStatus::kCompleted, RunStatus::kFailed, 3, "failed|3"},
      {RunStatus::kKilled, RunStatus::kFailed, 2, "failed|2"},
      {RunStatus::kKilled, RunStatus::kCompleted, std::nullopt, "killed|NULL"},
      // Left running by a writer that is gone: open_trace reads it as incomplete.
      {RunStatus::kCompleted, std::nullopt, std::nullopt, "incomplete|NULL"},
      {std::nullopt, RunStatus::kKilled, std::nullopt, "killed|NULL"},
  };
  for (const StatusCase& c : cases) {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    NodeSpec first = node0(), second = node1();
    first.status = c.node0;
    second.status = c.node1;
    second.failing_rank = c.failing_rank;
    auto summary = merge(write_nodes(first, second));
    ASSERT_TRUE(summary.is_ok()) << summary.status().message();
    SqliteDb out = open_read_only(file("all.db"));
    EXPECT_EQ(query_rows(out, "SELECT status, failing_rank FROM runs"), c.expected + "\n");
  }
}

TEST_F(TraceMergeTest, LiveInputMakesARunningRun) {
  write_node(file("run.db"), node0());
  auto writer = TraceWriter::create(file("run.node1.db"));
  ASSERT_TRUE(writer.is_ok());
  NodeSpec spec = node1();
  (*writer)->append(RunInfo{spec.run_id, "", "{}", 4, 0, spec.start_ns});
  for (int rank : spec.ranks) (*writer)->append(rank_events(spec, rank));
  ASSERT_TRUE((*writer)->commit().is_ok());
  auto summary = merge({file("run.db"), file("run.node1.db")});
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  EXPECT_EQ(summary->status, RunStatus::kRunning);
  EXPECT_EQ(summary->slices, 24);
  SqliteDb out = open_read_only(file("all.db"));
  EXPECT_EQ(query_rows(out, "SELECT status FROM runs"), "running\n");
}

TEST_F(TraceMergeTest, InputsAreNotModified) {
  auto inputs = write_nodes(node0(), node1());
  std::vector<std::string> bytes;
  std::vector<fs::file_time_type> times;
  for (const fs::path& input : inputs) {
    bytes.push_back(file_bytes(input));
    times.push_back(fs::last_write_time(input));
  }
  auto summary = merge(inputs);
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  for (size_t i = 0; i < inputs.size(); ++i) {
    EXPECT_EQ(file_bytes(inputs[i]), bytes[i]) << inputs[i];
    EXPECT_EQ(fs::last_write_time(inputs[i]), times[i]) << inputs[i];
    // Any SQLite reader of a WAL file leaves an empty -wal beside it; nothing may be in it.
    fs::path wal = inputs[i].string() + "-wal";
    if (fs::exists(wal)) {
      EXPECT_EQ(fs::file_size(wal), 0u) << wal;
    }
  }
}

TEST_F(TraceMergeTest, OneInputIsACopy) {
  // Characters that mean something in a URI (the input is ATTACHed as file:...?mode=ro).
  const fs::path input = file("node 0 #1?%41.db");
  write_node(input, node0());
  auto summary = merge({input});
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  EXPECT_EQ(summary->ranks, 2);
  EXPECT_EQ(summary->slices, 12);
  SqliteDb in = open_read_only(input);
  SqliteDb out = open_read_only(file("all.db"));
  for (std::string_view view : {"slices", "collectives", "memory_events", "steps", "stats",
                                "ranks", "tracks", "runs"}) {
    std::string sql = fmt::format("SELECT * FROM {} ORDER BY 1, 2, 3, 4", view);
    EXPECT_EQ(query_rows(out, sql), query_rows(in, sql)) << view;
  }
}

// Merging one node's file alone copies it, and says which files the other nodes left, as the
// launcher names them, and the merge that joins them all.
TEST_F(TraceMergeTest, OneNodesFileAloneIsCopiedWithAWarningNamingTheOthers) {
  const fs::path node1_file = file("run.node1.db");
  write_node(node1_file, node1());
  ::testing::internal::CaptureStderr();
  auto summary = merge({node1_file});
  const std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  EXPECT_NE(err.find(fmt::format("{} is node 1's file of a run of 2 nodes (2 of its 4 ranks): "
                                 "the other nodes' files ({}) are not merged",
                                 node1_file.string(), file("run.db").string())),
            std::string::npos)
      << err;
  EXPECT_NE(err.find(fmt::format("partrain merge {} {} -o {}", file("run.db").string(),
                                 node1_file.string(), file("all.db").string())),
            std::string::npos)
      << err;
}

// A string table that lost rows (the strings of a slice name and of a communicator): the rows
// that name them are merged with "(lost string N)" in their place, said on stderr and counted in
// the stat merge_lost_strings, instead of the merge failing on "NOT NULL constraint failed".
TEST_F(TraceMergeTest, AStringTableThatLostRowsIsMergedWithPlaceholders) {
  auto inputs = write_nodes(node0(), node1());
  {
    auto db = SqliteDb::open(inputs[1].string(), SQLITE_OPEN_READWRITE);
    ASSERT_TRUE(db.is_ok());
    ASSERT_TRUE(db->exec("DELETE FROM string WHERE value IN ('load node 1', 'world')").is_ok());
  }
  ::testing::internal::CaptureStderr();
  auto summary = merge(inputs);
  const std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  EXPECT_EQ(summary->lost_strings, 2);
  EXPECT_NE(err.find(inputs[1].string() + ": its rows name 2 string(s) its string table lost"),
            std::string::npos)
      << err;
  SqliteDb out = open_read_only(file("all.db"));
  EXPECT_EQ(query_number(out, "SELECT count(*) FROM slices"),
            query_number(open_read_only(inputs[0]), "SELECT count(*) FROM slices") +
                query_number(open_read_only(inputs[1]), "SELECT count(*) FROM slice"));
  EXPECT_EQ(query_number(out, "SELECT count(*) FROM slices WHERE name LIKE '(lost string %)'"), 2);
  EXPECT_EQ(query_number(out, "SELECT count(*) FROM collectives WHERE comm_id LIKE "
                              "'(lost string %)'"),
            6);
  EXPECT_EQ(query_rows(out, "SELECT value, severity FROM stats WHERE name = "
                            "'merge_lost_strings'"),
            "2|data_loss\n");
}

TEST_F(TraceMergeTest, FilesOfDifferentRunsAreRefused) {
  NodeSpec other = node1();
  other.run_id = "20240611-1500-cd34";
  auto summary = merge(write_nodes(node0(), other));
  ASSERT_FALSE(summary.is_ok());
  EXPECT_EQ(summary.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(summary.status().message().find(std::string(kRunId)), std::string::npos);
  EXPECT_NE(summary.status().message().find("20240611-1500-cd34"), std::string::npos);
  EXPECT_FALSE(fs::exists(file("all.db")));
  EXPECT_TRUE(temporaries().empty());
}

// Imports of one job's ranks made apart: each aligned only its own files' clocks, so the ranks
// of a host the reference import does not have are unaligned with it (the merge was silent and
// analyze compared their times as if aligned). Node files of a launched run share its clock.
TEST_F(TraceMergeTest, ImportsOfOtherHostsMergedAreSaidUnaligned) {
  NodeSpec first = node0(), second = node1();
  first.config = second.config = "{\"imported_from\":\"kineto\"}";
  auto summary = merge(write_nodes(first, second));
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  EXPECT_EQ(query_rows(open_read_only(file("all.db")),
                       "SELECT rank, severity FROM stats WHERE name = 'import_clock_unaligned' "
                       "ORDER BY rank"),
            "2|data_loss\n3|data_loss\n");

  for (std::string_view written : {"all.db", "run.db", "run.node1.db"}) fs::remove(file(written));
  summary = merge(write_nodes(node0(), node1()));  // a launched run's node files
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  EXPECT_EQ(query_number(open_read_only(file("all.db")),
                         "SELECT count(*) FROM stats WHERE name = 'import_clock_unaligned'"),
            0);
}

// Imports name their run by their first event's time, so imports of one job made apart name
// different runs: refused, naming the one import that brings them together.
TEST_F(TraceMergeTest, ImportsOfDifferentRunsAreRefusedNamingOneImport) {
  NodeSpec first = node0(), second = node1();
  first.config = second.config = "{\"imported_from\":\"kineto\"}";
  second.run_id = "kineto-20240611-140203";
  auto summary = merge(write_nodes(first, second));
  ASSERT_FALSE(summary.is_ok());
  EXPECT_NE(summary.status().message().find(
                "import every rank's files with one `partrain import`, which also aligns"),
            std::string::npos)
      << summary.status().message();
}

TEST_F(TraceMergeTest, ARankInTwoInputsIsRefused) {
  NodeSpec overlapping = node1();
  overlapping.ranks = {1, 2};
  auto inputs = write_nodes(node0(), overlapping);
  auto summary = merge(inputs);
  ASSERT_FALSE(summary.is_ok());
  EXPECT_EQ(summary.status().code(), StatusCode::kInvalidArgument);
  const std::string& message = summary.status().message();
  EXPECT_NE(message.find("rank 1 "), std::string::npos) << message;
  EXPECT_NE(message.find(inputs[0].string()), std::string::npos) << message;
  EXPECT_NE(message.find(inputs[1].string()), std::string::npos) << message;
}

TEST_F(TraceMergeTest, TheSameFileTwiceIsRefused) {
  write_node(file("run.db"), node0());
  fs::path same_again = dir_ / "." / "run.db";
  auto summary = merge({file("run.db"), same_again});
  ASSERT_FALSE(summary.is_ok());
  EXPECT_EQ(summary.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(summary.status().message().find("same file"), std::string::npos);
}

TEST_F(TraceMergeTest, ExistingOutputNeedsOverwrite) {
  auto inputs = write_nodes(node0(), node1());
  { std::ofstream(file("all.db")) << "an older merge"; }
  auto refused = merge(inputs);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(file_bytes(file("all.db")), "an older merge");
  auto replaced = merge(inputs, TraceMergeOptions{.overwrite = true});
  ASSERT_TRUE(replaced.is_ok()) << replaced.status().message();
  EXPECT_TRUE(open_trace(file("all.db"), TraceOpenMode::kReadStrict).is_ok());
  // An input is never the output, even when overwriting is allowed.
  auto onto_input = merge_traces(inputs, inputs[1], TraceMergeOptions{.overwrite = true});
  ASSERT_FALSE(onto_input.is_ok());
  EXPECT_EQ(onto_input.status().code(), StatusCode::kInvalidArgument);
}

TEST_F(TraceMergeTest, UnreadableInputIsExitThree) {
  write_node(file("run.db"), node0());
  { std::ofstream(file("notes.db")) << "not a database at all, just some text\n"; }
  auto summary = merge({file("run.db"), file("notes.db")});
  ASSERT_FALSE(summary.is_ok());
  EXPECT_EQ(summary.status().code(), StatusCode::kUnreadable);
  EXPECT_EQ(summary.status().exit_code(), 3);
  EXPECT_NE(summary.status().message().find("notes.db"), std::string::npos);
  EXPECT_FALSE(fs::exists(file("all.db")));
}

}  // namespace
}  // namespace partrain::profiler
