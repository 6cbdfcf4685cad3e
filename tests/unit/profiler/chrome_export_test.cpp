// export_chrome_trace: a synthetic three-rank trace (steps, phases, an all_reduce on two ranks,
// sends and recvs, memory samples) exported and read back as JSON: every slice once, a process
// per rank, flows that pair up and bind to slices, counters, filters, and a golden file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "profiler/chrome_export.h"
#include "profiler/trace_open.h"
#include "profiler/trace_writer.h"

namespace partrain::profiler {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr uint8_t kParams = 0, kGrads = 1, kActivations = 3;  // memory::Category codes

SliceEvent phase(int rank, std::string name, int64_t ts, int64_t dur, int64_t step) {
  return SliceEvent{
      rank, TrackKind::kCpuThread, "main", std::move(name), SliceCategory::kPhase, ts, dur,
      step, step < 0 ? -1 : 0,     -1};
}

CollectiveRecord collective(int rank, std::string_view op, std::string comm, uint64_t seq,
                            int64_t start, int64_t dur, int64_t step, int peer) {
  CollectiveRecord r;
  r.world_rank = rank;
  r.step = step;
  r.event.comm_id = std::move(comm);
  r.event.seq = seq;
  r.event.op = op;
  r.event.dtype = "float";
  r.event.reduce_op = op == "all_reduce" ? "sum" : "";
  r.event.count = 256;
  r.event.bytes = 1024;
  r.event.peer = peer;
  r.event.rank = rank;
  r.event.group_ranks = op == "all_reduce" ? std::vector<int>{0, 1} : std::vector<int>{0, 2};
  r.event.start_ns = start;
  r.event.end_ns = start + dur;
  r.event.state = CollectiveState::kCompleted;
  return r;
}

// Step s spans [s * 10'000, (s + 1) * 10'000) ns on every rank, s = 1..3. Per rank: forward and
// backward in each step, "init" before the steps and "data_wait" across the 1|2 boundary with
// no step. all_reduce dp0 on ranks 0 and 1 (rank 1 starts first in step 2); rank 0 sends to 2
// in step 1 and rank 2 sends to 0 in step 3. Rank 0 also has a kernel on a CUDA stream.
std::vector<TraceEvent> sample_events(const std::string& config, const std::string& device,
                                      int world_size) {
  std::vector<TraceEvent> events = {
      RunInfo{"run-7", "partrain launch -n 3", config, world_size, 1'700'000'000'000'000'000, 0}};
  for (int r = 0; r < 3; ++r) {
    events.push_back(RankInfo{r, r, r / 2, r < 2 ? "hostA" : "hostB", 100 + r,
                              device == "cpu" ? device : device + std::to_string(r)});
    events.push_back(phase(r, "init", 1'234, 2'001, -1));
    events.push_back(phase(r, "data_wait", 19'500, 1'000, -1));
    for (int64_t s = 1; s <= 3; ++s) {
      events.push_back(StepEvent{r, s, s * 10'000, 10'000, 2.5, 4096});
      events.push_back(phase(r, "forward", s * 10'000 + 1'000, 3'000, s));
      events.push_back(phase(r, "backward", s * 10'000 + 4'000, 3'000, s));
    }
  }
  for (int64_t s = 1; s <= 3; ++s) {
    const int64_t late = s == 2 ? 50 : 0;
    events.push_back(
        collective(0, "all_reduce", "dp0", s - 1, s * 10'000 + 7'000 + late, 900, s, -1));
    events.push_back(collective(1, "all_reduce", "dp0", s - 1, s * 10'000 + 7'020, 880, s, -1));
  }
  events.push_back(collective(0, "send", "pp0-2", 0, 18'000, 500, 1, 2));
  events.push_back(collective(2, "recv", "pp0-2", 0, 17'900, 700, 1, 0));
  events.push_back(collective(2, "send", "pp0-2", 1, 38'000, 500, 3, 0));
  events.push_back(collective(0, "recv", "pp0-2", 1, 37'950, 600, 3, 2));
  events.push_back(SliceEvent{0, TrackKind::kCudaStream, "stream 7", "sgemm",
                              SliceCategory::kKernel, 11'000, 400, 1, 0, 2});
  for (auto [rank, category, ts, bytes] :
       {std::tuple{0, kParams, 500, 1000}, std::tuple{0, kGrads, 15'000, 400},
        std::tuple{0, kGrads, 25'000, 0}, std::tuple{0, kActivations, 21'000, 300},
        std::tuple{1, kParams, 500, 1000}, std::tuple{2, kParams, 500, 1000},
        std::tuple{2, kGrads, 30'000, 123}}) {
    events.push_back(MemorySample{rank, category, ts, bytes});
  }
  return events;
}

class ChromeExportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           fmt::format("chrome_export_{}_{}", getpid(),
                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes the trace, closes the run and opens it as a reader would.
  TraceFile write_trace(const std::vector<TraceEvent>& events) {
    const fs::path path = dir_ / fmt::format("trace{}.db", traces_++);
    {
      auto writer = TraceWriter::create(path);
      EXPECT_TRUE(writer.is_ok()) << writer.status().message();
      (*writer)->append(events);
      EXPECT_TRUE((*writer)->set_run_status(RunStatus::kCompleted).is_ok());
    }
    auto trace = open_trace(path);
    EXPECT_TRUE(trace.is_ok()) << trace.status().message();
    return std::move(trace).value();
  }
  TraceFile sample_trace(const std::string& config = R"({"backend":"gloo","dp":2})",
                         const std::string& device = "cpu", int world_size = 3) {
    return write_trace(sample_events(config, device, world_size));
  }

  // The document and the counts; the test fails when the export does.
  std::pair<json, ChromeExportCounts> export_json(const TraceFile& trace,
                                                  const ChromeExportOptions& options = {}) {
    std::ostringstream out;
    auto counts = export_chrome_trace(trace.db, options, out);
    EXPECT_TRUE(counts.is_ok()) << counts.status().message();
    text_ = out.str();
    json doc = json::parse(text_);  // throws (and fails the test) on invalid JSON
    return {doc, counts.is_ok() ? *counts : ChromeExportCounts{}};
  }

  fs::path dir_;
  int traces_ = 0;
  std::string text_;  // the last export's raw text
};

ChromeExportOptions selection(std::vector<int> ranks, std::optional<StepRange> steps = {}) {
  ChromeExportOptions options;
  options.ranks = std::move(ranks);
  options.steps = steps;
  return options;
}

// The rank an event belongs to: rank r is exported as pid r + 1.
int rank_of(const json& event) { return event.at("pid").get<int>() - 1; }

std::vector<json> events_of(const json& doc, std::string_view phase) {
  std::vector<json> out;
  for (const json& e : doc.at("traceEvents")) {
    if (e.at("ph") == phase) out.push_back(e);
  }
  return out;
}

int64_t count_rows(const SqliteDb& db, const std::string& sql) {
  auto stmt = SqliteStatement::prepare(db, sql);
  EXPECT_TRUE(stmt.is_ok()) << stmt.status().message();
  return stmt.is_ok() && stmt->step() == SQLITE_ROW ? stmt->column_int(0) : -1;
}

std::multiset<std::string> names_of(const std::vector<json>& events) {
  std::multiset<std::string> names;
  for (const json& e : events) names.insert(e.at("name").get<std::string>());
  return names;
}

TEST_F(ChromeExportTest, EverySliceIsOneCompleteEventOnItsRanksProcess) {
  TraceFile trace = sample_trace();
  auto [doc, counts] = export_json(trace);
  std::vector<json> slices = events_of(doc, "X");
  EXPECT_EQ(static_cast<int64_t>(slices.size()),
            count_rows(trace.db, "SELECT count(*) FROM slices"));
  EXPECT_EQ(slices.size(), 35u);
  EXPECT_EQ(counts.slices, 35);
  EXPECT_EQ(counts.events, static_cast<int64_t>(doc.at("traceEvents").size()));
  EXPECT_EQ(counts.ranks, 3);

  std::map<int, std::string> process_names;
  std::set<std::pair<int, int>> named_threads;
  for (const json& m : events_of(doc, "M")) {
    if (m.at("name") == "process_name")
      process_names[rank_of(m)] = m.at("args").at("name");
    if (m.at("name") == "thread_name")
      named_threads.insert({rank_of(m), m.at("tid").get<int>()});
  }
  EXPECT_EQ(process_names,
            (std::map<int, std::string>{
                {0, "rank 0 (hostA)"}, {1, "rank 1 (hostA)"}, {2, "rank 2 (hostB)"}}));
  std::set<int> pids;
  for (const json& x : slices) {
    pids.insert(rank_of(x));
    EXPECT_GT(x.at("tid").get<int>(), 0);
    EXPECT_TRUE(named_threads.count({rank_of(x), x.at("tid").get<int>()})) << x.dump();
  }
  EXPECT_EQ(pids, (std::set<int>{0, 1, 2}));
  EXPECT_EQ(named_threads.size(), 4u + 2u + 2u);  // rank 0: main, stream 7, dp0, pp0-2
}

TEST_F(ChromeExportTest, SlicesCarryCoordinatesAndCollectiveFieldsAsArgs) {
  TraceFile trace = sample_trace();
  auto [doc, counts] = export_json(trace);
  int all_reduces = 0;
  for (const json& x : events_of(doc, "X")) {
    const json args = x.value("args", json::object());
    if (x.at("name") == "init") {
      EXPECT_FALSE(args.contains("step")) << x.dump();
      EXPECT_EQ(x.at("cat"), "phase");
    }
    if (x.at("name") == "forward") {
      EXPECT_EQ(args.at("micro_batch"), 0);
    }
    if (x.at("name") == "sgemm") {
      EXPECT_EQ(args.at("layer"), 2);
    }
    if (x.at("name") == "all_reduce") {
      ++all_reduces;
      EXPECT_EQ(x.at("cat"), "collective");
      EXPECT_EQ(args.at("comm_id"), "dp0");
      EXPECT_EQ(args.at("dtype"), "float");
      EXPECT_EQ(args.at("reduce_op"), "sum");
      EXPECT_EQ(args.at("bytes"), 1024);
      EXPECT_EQ(args.at("group_ranks"), "0,1");
      EXPECT_EQ(args.at("seq").get<int>() + 1, args.at("step").get<int>());
    }
    if (x.at("name") == "send") {
      EXPECT_EQ(args.at("peer"), rank_of(x) == 0 ? 2 : 0);
    }
  }
  EXPECT_EQ(all_reduces, 6);
  // ns precision kept: ts 1234 ns, dur 2001 ns.
  EXPECT_NE(text_.find("\"ts\":1.234,\"dur\":2.001,\"name\":\"init\""), std::string::npos);
}

// Whether `at` falls inside an X event of the same pid and tid (what "s" and "f" bind to).
bool inside_a_slice(const json& doc, const json& flow_end) {
  for (const json& x : events_of(doc, "X")) {
    if (x.at("pid") != flow_end.at("pid") || x.at("tid") != flow_end.at("tid")) continue;
    double ts = x.at("ts"), end = ts + x.at("dur").get<double>(), at = flow_end.at("ts");
    if (at >= ts && at <= end) return true;
  }
  return false;
}

// id -> {"s" event, "f" event}; fails unless each id has exactly one of each.
std::map<int64_t, std::pair<json, json>> paired_flows(const json& doc) {
  std::map<int64_t, std::pair<json, json>> flows;
  std::map<int64_t, int> starts, finishes;
  for (const json& s : events_of(doc, "s")) {
    ++starts[s.at("id").get<int64_t>()];
    flows[s.at("id").get<int64_t>()].first = s;
  }
  for (const json& f : events_of(doc, "f")) {
    ++finishes[f.at("id").get<int64_t>()];
    flows[f.at("id").get<int64_t>()].second = f;
    EXPECT_EQ(f.at("bp"), "e");
  }
  for (const auto& [id, pair] : flows) {
    EXPECT_EQ(starts[id], 1) << "flow " << id;
    EXPECT_EQ(finishes[id], 1) << "flow " << id;
    EXPECT_EQ(pair.first.value("cat", ""), pair.second.value("cat", ""));
    EXPECT_EQ(pair.first.value("name", ""), pair.second.value("name", ""));
  }
  return flows;
}

TEST_F(ChromeExportTest, FlowsGoFromSendToRecvAndFromTheFirstMemberOfACollective) {
  TraceFile trace = sample_trace();
  auto [doc, counts] = export_json(trace);
  auto flows = paired_flows(doc);
  EXPECT_EQ(flows.size(), 5u);
  EXPECT_EQ(counts.flows, 5);
  std::multiset<std::pair<int, int>> p2p, collectives;
  for (const auto& [id, pair] : flows) {
    const auto& [s, f] = pair;
    EXPECT_TRUE(inside_a_slice(doc, s)) << s.dump();
    EXPECT_TRUE(inside_a_slice(doc, f)) << f.dump();
    // Never back in time: the first member of a collective waits longest, so its middle comes
    // late (a fifth of the arrows pointed backwards from there).
    EXPECT_LE(s.at("ts").get<double>(), f.at("ts").get<double>()) << s.dump() << f.dump();
    auto& kind = s.at("cat") == "p2p" ? p2p : collectives;
    kind.insert({rank_of(s), rank_of(f)});
  }
  EXPECT_EQ(p2p, (std::multiset<std::pair<int, int>>{{0, 2}, {2, 0}}));
  // Rank 0 starts steps 1 and 3 first, rank 1 starts step 2 first.
  EXPECT_EQ(collectives, (std::multiset<std::pair<int, int>>{{0, 1}, {1, 0}, {0, 1}}));
}

TEST_F(ChromeExportTest, MemoryIsACounterPerCategoryAndRank) {
  TraceFile trace = sample_trace();
  auto [doc, counts] = export_json(trace);
  std::vector<json> counters = events_of(doc, "C");
  EXPECT_EQ(static_cast<int64_t>(counters.size()),
            count_rows(trace.db, "SELECT count(*) FROM memory_events"));
  EXPECT_EQ(counts.counters, 7);
  std::set<std::pair<int, std::string>> tracks;
  for (const json& c : counters)
    tracks.insert({rank_of(c), c.at("name").get<std::string>()});
  EXPECT_EQ(tracks, (std::set<std::pair<int, std::string>>{{0, "memory params"},
                                                           {0, "memory grads"},
                                                           {0, "memory activations"},
                                                           {1, "memory params"},
                                                           {2, "memory params"},
                                                           {2, "memory grads"}}));
  for (const json& c : counters) {
    if (rank_of(c) == 0 && c.at("name") == "memory grads" && c.at("ts") == 15.0) {
      EXPECT_EQ(c.at("args").at("bytes"), 400);
    }
  }
}

TEST_F(ChromeExportTest, DistributedInfoAndRunMetadata) {
  auto [doc, counts] = export_json(sample_trace());
  EXPECT_EQ(doc.at("distributedInfo"), (json{{"backend", "gloo"}, {"rank", 0}, {"world_size", 3}}));
  EXPECT_EQ(doc.at("displayTimeUnit"), "ns");
  // traceEvents leads: older Perfetto versions stop at the first top-level key they do not know.
  EXPECT_EQ(text_.rfind("{\"traceEvents\":[", 0), 0u) << text_.substr(0, 40);
  for (const json& e : doc.at("traceEvents")) EXPECT_TRUE(e.contains("ts")) << e.dump();
  EXPECT_EQ(doc.at("otherData").at("run_id"), "run-7");
  EXPECT_EQ(doc.at("otherData").at("command"), "partrain launch -n 3");
  EXPECT_EQ(doc.at("otherData").at("status"), "completed");

  // No backend in the config: NCCL when the ranks ran on CUDA devices; the lowest exported rank.
  auto [cuda, cuda_counts] = export_json(sample_trace("{}", "cuda:", 3), selection({2, 1}));
  EXPECT_EQ(cuda.at("distributedInfo"),
            (json{{"backend", "nccl"}, {"rank", 1}, {"world_size", 3}}));
  // A config that is not JSON (a traced program's), CPU ranks, no world size: the count of
  // ranks; the collectives it recorded came through the NCCL interposition.
  auto [cpu, cpu_counts] = export_json(sample_trace("not json", "cpu", 0), selection({2}));
  EXPECT_EQ(cpu.at("distributedInfo"), (json{{"backend", "nccl"}, {"rank", 2}, {"world_size", 3}}));
  // Without collectives the backend is not known: left out, not guessed (it said gloo).
  std::vector<TraceEvent> events = sample_events("{}", "cpu", 0);
  std::erase_if(events,
                [](const TraceEvent& e) { return std::holds_alternative<CollectiveRecord>(e); });
  auto [quiet, quiet_counts] = export_json(write_trace(events));
  EXPECT_EQ(quiet.at("distributedInfo"), (json{{"rank", 0}, {"world_size", 3}}));
}

TEST_F(ChromeExportTest, RankFilterKeepsThoseRanksAndTheFlowsBetweenThem) {
  TraceFile trace = sample_trace();
  auto [doc, counts] = export_json(trace, selection({0, 2}));
  EXPECT_EQ(counts.slices,
            count_rows(trace.db, "SELECT count(*) FROM slices WHERE rank IN (0, 2)"));
  EXPECT_EQ(counts.slices, 9 + 3 + 2 + 8 + 2);
  std::set<int> pids;
  for (const json& e : doc.at("traceEvents")) pids.insert(rank_of(e));
  EXPECT_EQ(pids, (std::set<int>{0, 2}));
  EXPECT_EQ(paired_flows(doc).size(), 2u);  // the sends; the all_reduce lost rank 1
  EXPECT_EQ(counts.counters, 6);
  EXPECT_EQ(doc.at("otherData").at("ranks"), "0,2");
}

TEST_F(ChromeExportTest, StepFilterKeepsThoseStepsAndWhatOverlapsTheirWindow) {
  TraceFile trace = sample_trace();
  auto [doc, counts] = export_json(trace, selection({}, StepRange{2, 2}));
  // forward+backward x 3 ranks, all_reduce x 2, data_wait (no step, crosses 20'000) x 3.
  EXPECT_EQ(names_of(events_of(doc, "X")),
            (std::multiset<std::string>{"forward", "forward", "forward", "backward", "backward",
                                        "backward", "all_reduce", "all_reduce", "data_wait",
                                        "data_wait", "data_wait"}));
  EXPECT_EQ(paired_flows(doc).size(), 1u);
  // At the window's start (20 us): rank 0 params and grads, ranks 1 and 2 params; then rank 0
  // activations at 21 us, grads at 25 us, rank 2 grads at 30 us (the window's end).
  std::multiset<std::string> counters;
  for (const json& c : events_of(doc, "C")) {
    counters.insert(fmt::format("{} {} {} {}", rank_of(c),
                                c.at("name").get<std::string>(), c.at("ts").get<double>(),
                                c.at("args").at("bytes").get<int64_t>()));
  }
  EXPECT_EQ(counters,
            (std::multiset<std::string>{"0 memory params 20 1000", "0 memory grads 20 400",
                                        "1 memory params 20 1000", "2 memory params 20 1000",
                                        "0 memory activations 21 300", "0 memory grads 25 0",
                                        "2 memory grads 30 123"}));

  auto [open_end, open_counts] = export_json(trace, selection({}, StepRange{3, std::nullopt}));
  EXPECT_EQ(open_counts.slices, 6 + 2 + 2);  // phases, all_reduce, the step-3 send and recv
  EXPECT_EQ(open_counts.flows, 2);
  auto [up_to, up_to_counts] = export_json(trace, selection({}, StepRange{std::nullopt, 1}));
  EXPECT_EQ(up_to_counts.slices, 6 + 1 + 2 + 2 + 3);  // + sgemm, all_reduce, p2p, data_wait
  EXPECT_EQ(up_to.at("otherData").at("steps"), ":1");
}

// torchrun restarted the job: attempt 1 ran steps 1-2 again (from 110 us on) after attempt 0 ran
// 1-3. A step selection is attempt 1's steps, and its slices: not attempt 0's of those numbers,
// nor the steps attempt 1 did not reach.
TEST_F(ChromeExportTest, ARestartedJobsStepsAreTheLastAttempts) {
  std::vector<TraceEvent> events = sample_events(R"({"backend":"gloo","dp":2})", "cpu", 3);
  for (int r = 0; r < 3; ++r) {
    for (int64_t s = 1; s <= 2; ++s) {
      events.push_back(StepEvent{r, s, 100'000 + s * 10'000, 10'000, 2.5, 4096, 1});
      events.push_back(phase(r, "forward", 100'000 + s * 10'000 + 1'000, 3'000, s));
    }
  }
  TraceFile trace = write_trace(events);
  auto [doc, counts] = export_json(trace, selection({}, StepRange{2, 2}));
  std::multiset<std::string> slices;
  for (const json& e : events_of(doc, "X")) {
    slices.insert(fmt::format("{} {}", e.at("name").get<std::string>(), e.at("ts").get<double>()));
  }
  EXPECT_EQ(slices, (std::multiset<std::string>{"forward 121", "forward 121", "forward 121"}));
  std::ostringstream out;
  auto unreached = export_chrome_trace(trace.db, selection({}, StepRange{3, 3}), out);
  ASSERT_FALSE(unreached.is_ok());
  EXPECT_NE(unreached.status().message().find("steps recorded: 1..2"), std::string::npos)
      << unreached.status().message();
}

TEST_F(ChromeExportTest, RankOrStepsNotInTheTraceAreUsageErrors) {
  TraceFile trace = sample_trace();
  std::ostringstream out;
  auto rank = export_chrome_trace(trace.db, selection({1, 7}), out);
  ASSERT_FALSE(rank.is_ok());
  EXPECT_EQ(rank.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(rank.status().message(), "rank 7 is not in this trace (ranks present: 0-2)");
  auto steps = export_chrome_trace(trace.db, selection({}, StepRange{8, 9}), out);
  ASSERT_FALSE(steps.is_ok());
  EXPECT_EQ(steps.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(steps.status().message().find("steps recorded: 1..3"), std::string::npos)
      << steps.status().message();
  EXPECT_TRUE(out.str().empty());
}

// A GPU copy is one X event on its stream's thread with the bytes it moved among its args; the
// plain pass does not write it a second time.
TEST_F(ChromeExportTest, GpuCopiesCarryTheirBytesAsArgs) {
  std::vector<TraceEvent> events = {RunInfo{"r", "cmd", "{}", 1, 0, 0}};
  events.push_back(TransferRecord{SliceEvent{0, TrackKind::kCudaStream, "gpu0 stream 7",
                                             "memcpy HtoD", SliceCategory::kMemcpy, 2'000, 500, 1},
                                  4096, 12, 0, 7});
  auto [doc, counts] = export_json(write_trace(events));
  std::vector<json> slices = events_of(doc, "X");
  ASSERT_EQ(slices.size(), 1u);
  EXPECT_EQ(counts.slices, 1);
  EXPECT_EQ(slices[0].at("name"), "Memcpy HtoD");  // Kineto's name, which HTA classifies by
  EXPECT_EQ(slices[0].at("cat"), "memcpy");
  const json& args = slices[0].at("args");
  EXPECT_EQ(args.at("bytes"), 4096);
  EXPECT_EQ(args.at("correlation"), 12);
  EXPECT_EQ(args.at("stream"), 7);
}

// The first member of a collective waits longest: its middle can come after a later member's
// whole slice. The arrow still goes forward in time, from just after the first member's start.
TEST_F(ChromeExportTest, AnArrowFromAMemberThatWaitedLongGoesForward) {
  std::vector<TraceEvent> events = {RunInfo{"r", "cmd", "{}", 2, 0, 0}};
  events.push_back(collective(0, "barrier", "world", 0, 1'000, 20'000, -1, -1));
  events.push_back(collective(1, "barrier", "world", 0, 9'000, 1'000, -1, -1));
  auto [doc, counts] = export_json(write_trace(events));
  auto flows = paired_flows(doc);
  ASSERT_EQ(flows.size(), 1u);
  const auto& [s, f] = flows.begin()->second;
  EXPECT_EQ(rank_of(s), 0);
  EXPECT_LE(s.at("ts").get<double>(), f.at("ts").get<double>()) << s.dump() << f.dump();
  EXPECT_TRUE(inside_a_slice(doc, s)) << s.dump();
  EXPECT_TRUE(inside_a_slice(doc, f)) << f.dump();
}

// A rank's streams in their numbers' order: stream 7 before 13 and 20 (as text it came last).
TEST_F(ChromeExportTest, StreamsAreOrderedByTheirNumbers) {
  std::vector<TraceEvent> events = {RunInfo{"r", "cmd", "{}", 1, 0, 0}};
  for (int stream : {20, 7, 13}) {
    events.push_back(SliceEvent{0, TrackKind::kCudaStream, fmt::format("gpu0 stream {}", stream),
                                "sgemm", SliceCategory::kKernel, 1'000 * stream, 500, 1});
  }
  auto [doc, counts] = export_json(write_trace(events));
  std::map<int, std::string> names;  // tid -> name
  std::map<int, int64_t> order;      // tid -> sort index
  for (const json& m : events_of(doc, "M")) {
    if (m.at("name") == "thread_name") names[m.at("tid")] = m.at("args").at("name");
    if (m.at("name") == "thread_sort_index") order[m.at("tid")] = m.at("args").at("sort_index");
  }
  std::vector<std::pair<int64_t, std::string>> sorted;
  for (const auto& [tid, name] : names) sorted.emplace_back(order[tid], name);
  std::sort(sorted.begin(), sorted.end());
  ASSERT_EQ(sorted.size(), 3u);
  EXPECT_EQ(sorted[0].second, "gpu0 stream 7 (cuda_stream)");
  EXPECT_EQ(sorted[1].second, "gpu0 stream 13 (cuda_stream)");
  EXPECT_EQ(sorted[2].second, "gpu0 stream 20 (cuda_stream)");
}

// What HolisticTraceAnalysis needs of a per-rank file (docs/import.md, "HTA"): the rank in
// distributedInfo where its pattern `"rank":\s+(\d+)` finds it first; GPU work (kernels, copies,
// fills) with Kineto's stream, device and correlation args and names; no stream on host slices.
TEST_F(ChromeExportTest, PerRankFileHasWhatHtaReads) {
  std::vector<TraceEvent> events = sample_events(R"({"backend":"nccl"})", "cuda:", 3);
  // Text that looks like the rank inside a string (the command) is escaped: never a match.
  std::get<RunInfo>(events[0]).command = R"(train.py --meta '{"rank": 9}')";
  KernelRecord nccl;
  nccl.slice = SliceEvent{2, TrackKind::kCudaStream, "gpu2 stream 13",
                          "ncclDevKernel_AllReduce_Sum_f32_RING_LL", SliceCategory::kKernel,
                          12'000, 800, 1};
  nccl.correlation_id = 41;
  nccl.device = 2;
  nccl.stream = 13;
  events.push_back(nccl);
  events.push_back(TransferRecord{SliceEvent{2, TrackKind::kCudaStream, "gpu2 stream 13",
                                             "memset", SliceCategory::kMemset, 13'000, 50, 1},
                                  64, 42, 2, 13});
  // A step as an import of a torch.profiler trace keeps it.
  events.push_back(SliceEvent{2, TrackKind::kCpuThread, "main", "ProfilerStep#1",
                              SliceCategory::kStep, 10'000, 10'000, 1});
  auto [doc, counts] = export_json(write_trace(events), selection({2}, std::nullopt));

  std::smatch rank;
  ASSERT_TRUE(std::regex_search(text_, rank, std::regex(R"("rank":\s+(\d+))"))) << text_;
  EXPECT_EQ(rank[1], "2");
  EXPECT_EQ(doc.at("distributedInfo").at("world_size"), 3);
  EXPECT_EQ(doc.at("distributedInfo").at("backend"), "nccl");
  int gpu = 0;
  for (const json& slice : events_of(doc, "X")) {
    const json args = slice.value("args", json::object());
    if (slice.at("cat") == "kernel" || slice.at("cat") == "memset") {
      ++gpu;
      EXPECT_EQ(args.at("stream"), 13) << slice.dump();
      EXPECT_EQ(args.at("device"), 2) << slice.dump();
      EXPECT_TRUE(args.at("correlation").is_number_integer()) << slice.dump();
    } else {
      EXPECT_FALSE(args.contains("stream")) << slice.dump();
    }
  }
  EXPECT_EQ(gpu, 2);
  std::set<std::string> names;
  for (const json& slice : events_of(doc, "X")) names.insert(slice.at("name"));
  EXPECT_TRUE(names.contains("Memset"));
  // No ProfilerStep: HTA would keep only kernels whose CPU launch it finds, which are not stored.
  EXPECT_FALSE(text_.find("ProfilerStep") != std::string::npos) << text_;
  EXPECT_TRUE(names.contains("step"));
  EXPECT_TRUE(names.contains("ncclDevKernel_AllReduce_Sum_f32_RING_LL"));
}

TEST_F(ChromeExportTest, NamesAreEscapedAndNonUtf8BytesReplaced) {
  std::vector<TraceEvent> events = {RunInfo{"r", "cmd \"quoted\"", "{}", 1, 0, 0}};
  events.push_back(phase(0, "say \"hi\"\n\t\\ \x01 caf\xC3\xA9 bad\xFF end", 10, 5, -1));
  TraceFile trace = write_trace(events);
  auto [doc, counts] = export_json(trace);
  std::vector<json> slices = events_of(doc, "X");
  ASSERT_EQ(slices.size(), 1u);
  EXPECT_EQ(slices[0].at("name"), "say \"hi\"\n\t\\ \x01 caf\xC3\xA9 bad\xEF\xBF\xBD end");
  EXPECT_EQ(doc.at("otherData").at("command"), "cmd \"quoted\"");
  EXPECT_NE(text_.find("\\u0001"), std::string::npos);
}

TEST_F(ChromeExportTest, WriteFailureIsReported) {
  TraceFile trace = sample_trace();
  std::ostringstream out;
  out.setstate(std::ios::badbit);
  auto counts = export_chrome_trace(trace.db, {}, out);
  ASSERT_FALSE(counts.is_ok());
  EXPECT_EQ(counts.status().code(), StatusCode::kFailed);
}

// The golden file holds every event (flow ids dropped: their pairing is tested above) with
// sorted keys, sorted; PARTRAIN_UPDATE_GOLDEN=1 rewrites it after a deliberate change.
TEST_F(ChromeExportTest, MatchesGoldenFile) {
  auto [doc, counts] = export_json(sample_trace(), selection({0, 2}, StepRange{1, 2}));
  std::multiset<std::string> lines;
  for (json e : doc.at("traceEvents")) {
    e.erase("id");
    lines.insert(e.dump());
  }
  json top = doc;
  top.erase("traceEvents");
  top.at("otherData").erase("exporter");  // carries the version
  std::string actual = top.dump() + "\n";
  for (const std::string& line : lines) actual += line + "\n";

  const fs::path golden = fs::path(PARTRAIN_SOURCE_DIR) / "tests/data/export/chrome_sample.golden";
  if (std::getenv("PARTRAIN_UPDATE_GOLDEN") != nullptr) std::ofstream(golden) << actual;
  std::ifstream in(golden);
  ASSERT_TRUE(in) << "missing " << golden << " (PARTRAIN_UPDATE_GOLDEN=1 writes it)";
  std::stringstream expected;
  expected << in.rdbuf();
  EXPECT_EQ(actual, expected.str());
}

}  // namespace
}  // namespace partrain::profiler
