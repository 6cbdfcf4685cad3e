#include "profiler/import/kineto_json.h"

#include <gtest/gtest.h>

#include "tests/support/kineto_fixture.h"
#include "tests/support/scratch_dir.h"

namespace partrain::profiler {
namespace {

using testing::ScratchDir;

StatusOr<KinetoHeader> read(const std::filesystem::path& path, std::vector<KinetoEvent>& events,
                            KinetoReadCallbacks callbacks = {}) {
  auto text = GzipText::open(path);
  if (!text.is_ok()) return text.status();
  if (!callbacks.on_event) {
    callbacks.on_event = [&](KinetoEvent& e) {
      events.push_back(e);
      return true;
    };
  }
  return read_kineto_trace(**text, callbacks);
}

TEST(MicrosecondsText, ExactNanosecondsBeyondDoublePrecision) {
  // 16 significant digits: a double would round the last one.
  EXPECT_EQ(microseconds_text_to_ns("4986611431654.615"), 4986611431654615);
  EXPECT_EQ(microseconds_text_to_ns("0.500"), 500);
  EXPECT_EQ(microseconds_text_to_ns("7"), 7000);
  EXPECT_EQ(microseconds_text_to_ns("-1.25"), -1250);
  EXPECT_EQ(microseconds_text_to_ns("1.0005"), 1001);  // rounded to the nearest ns
  EXPECT_EQ(microseconds_text_to_ns("1.5e3"), 1500000);
  EXPECT_EQ(microseconds_text_to_ns("abc"), std::nullopt);
  EXPECT_EQ(microseconds_text_to_ns(""), std::nullopt);
}

TEST(DistributedInfo, RanksAsArrayOrAsText) {
  auto info = parse_distributed_info(nlohmann::json::parse(
      R"({"backend": "nccl", "rank": 1, "world_size": 2,
          "pg_config": [{"pg_name": "0", "pg_desc": "default_pg", "ranks": "[0, 1]"},
                        {"pg_name": "1", "ranks": [1]}]})"));
  ASSERT_TRUE(info.is_ok()) << info.status().message();
  EXPECT_EQ(info->backend, "nccl");
  EXPECT_EQ(info->rank, 1);
  ASSERT_EQ(info->groups.size(), 2u);
  EXPECT_EQ(info->groups[0].ranks, (std::vector<int>{0, 1}));
  EXPECT_EQ(info->groups[0].description, "default_pg");
  EXPECT_EQ(info->groups[1].ranks, (std::vector<int>{1}));
}

TEST(DistributedInfo, BadFieldsAreNamed) {
  auto no_rank = parse_distributed_info(nlohmann::json::parse(R"({"rank": "x", "world_size": 2})"));
  ASSERT_FALSE(no_rank.is_ok());
  EXPECT_NE(no_rank.status().message().find("no rank"), std::string::npos);
  auto no_world = parse_distributed_info(nlohmann::json::parse(R"({"rank": 0, "world_size": 0})"));
  ASSERT_FALSE(no_world.is_ok());
  EXPECT_NE(no_world.status().message().find("no world_size"), std::string::npos);
  auto outside = parse_distributed_info(nlohmann::json::parse(R"({"rank": 4, "world_size": 4})"));
  ASSERT_FALSE(outside.is_ok());
  EXPECT_NE(outside.status().message().find("rank 4 of a world of 4"), std::string::npos);
}

// HTA's test traces: {"rank": 0} alone (single-GPU runs), {"backend": "nccl"} alone. They had
// been refused; what is missing is -1, for the importer to settle as HTA does.
TEST(DistributedInfo, AMissingRankOrWorldSizeIsLeftToTheImporter) {
  auto rank_only = parse_distributed_info(nlohmann::json::parse(R"({"rank": 0})"));
  ASSERT_TRUE(rank_only.is_ok()) << rank_only.status().message();
  EXPECT_EQ(rank_only->rank, 0);
  EXPECT_EQ(rank_only->world_size, -1);
  auto backend_only = parse_distributed_info(nlohmann::json::parse(R"({"backend": "nccl"})"));
  ASSERT_TRUE(backend_only.is_ok()) << backend_only.status().message();
  EXPECT_EQ(backend_only->rank, -1);
  EXPECT_EQ(backend_only->world_size, -1);
  EXPECT_EQ(backend_only->backend, "nccl");
}

TEST(KinetoJson, HeaderThenEventsWithExactTimes) {
  ScratchDir dir;
  testing::KinetoFixture fixture(2, 4);
  fixture.host("node7").step(5, 4986611431654.615, 100.5).thread_name(1002, "thread 1002 (python)");
  testing::write_gzip(dir.path() / "r2.json.gz", fixture.json());
  std::vector<KinetoEvent> events;
  auto header = read(dir.path() / "r2.json.gz", events);
  ASSERT_TRUE(header.is_ok()) << header.status().message();
  EXPECT_TRUE(header->has_trace_events);
  EXPECT_EQ(header->schema_version, 1);
  ASSERT_TRUE(header->distributed);
  EXPECT_EQ(header->distributed->rank, 2);
  EXPECT_EQ(header->distributed->world_size, 4);
  EXPECT_EQ(header->host_name, "node7");
  EXPECT_EQ(header->base_time_ns, 1790857026000000000);
  EXPECT_EQ(header->trace_name, "fixture");  // a key after traceEvents
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].phase, 'X');
  EXPECT_EQ(events[0].name, "ProfilerStep#5");
  EXPECT_EQ(events[0].ts_ns, 4986611431654615);
  EXPECT_EQ(events[0].dur_ns, 100500);
  EXPECT_EQ(events[0].pid.number, 1002);
  EXPECT_EQ(events[1].phase, 'M');
  EXPECT_EQ(events[1].args["name"], "thread 1002 (python)");
}

TEST(KinetoJson, ArgsOnlyWhenAskedAndTextIds) {
  ScratchDir dir;
  testing::KinetoFixture fixture(0, 1);
  fixture.event("cpu_op", "aten::mm", 1000, 10, 5, R"({"Input Dims": [[2, 3], [3, 4]]})")
      .raw_event(R"j({"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans",
                     "tid": "PyTorch Profiler", "ts": 1.0, "dur": 2.0, "args": {"Op count": 0}})j");
  testing::write_text(dir.path() / "r.json", fixture.json());
  std::vector<KinetoEvent> events;
  KinetoReadCallbacks callbacks;
  callbacks.wants_args = [](const KinetoEvent& e) { return e.category == "Trace"; };
  ASSERT_TRUE(read(dir.path() / "r.json", events, callbacks).is_ok());
  ASSERT_EQ(events.size(), 2u);
  EXPECT_TRUE(events[0].args.is_null());
  EXPECT_EQ(events[1].args["Op count"], 0);
  EXPECT_TRUE(events[1].pid.is_text);
  EXPECT_EQ(events[1].pid.text, "Spans");
}

TEST(KinetoJson, HeaderOnlyReadStopsAtTheEvents) {
  ScratchDir dir;
  testing::KinetoFixture fixture(0, 1);
  fixture.step(1, 1, 1);
  testing::write_text(dir.path() / "r.json", fixture.json());
  std::vector<KinetoEvent> events;
  KinetoReadCallbacks callbacks;
  callbacks.on_events_begin = [](const KinetoHeader&) { return false; };
  callbacks.on_event = [&](KinetoEvent& e) {
    events.push_back(e);
    return true;
  };
  auto header = read(dir.path() / "r.json", events, callbacks);
  ASSERT_TRUE(header.is_ok());
  EXPECT_TRUE(header->distributed);
  EXPECT_TRUE(events.empty());
}

TEST(KinetoJson, MalformedJsonNamesTheFileAndTheByte) {
  ScratchDir dir;
  testing::write_text(dir.path() / "bad.json", R"({"traceEvents": [{"ph": "X",, }]})");
  std::vector<KinetoEvent> events;
  auto header = read(dir.path() / "bad.json", events);
  ASSERT_FALSE(header.is_ok());
  EXPECT_EQ(header.status().exit_code(), 3);
  EXPECT_NE(header.status().message().find("bad.json: malformed JSON at byte"), std::string::npos)
      << header.status().message();
}

TEST(KinetoJson, CutShortJsonSaysTruncated) {
  ScratchDir dir;
  testing::KinetoFixture fixture(0, 1);
  fixture.step(1, 1, 1).step(2, 3, 1);
  const std::string json = fixture.json();
  testing::write_text(dir.path() / "cut.json", json.substr(0, json.size() / 2));
  std::vector<KinetoEvent> events;
  auto header = read(dir.path() / "cut.json", events);
  ASSERT_FALSE(header.is_ok());
  EXPECT_NE(header.status().message().find("truncated?"), std::string::npos)
      << header.status().message();
}

TEST(KinetoJson, ArrayFormatIsNotKineto) {
  ScratchDir dir;
  testing::write_text(dir.path() / "array.json", R"([{"ph": "X", "name": "a", "ts": 1}])");
  std::vector<KinetoEvent> events;
  auto header = read(dir.path() / "array.json", events);
  ASSERT_FALSE(header.is_ok());
  EXPECT_NE(header.status().message().find("not a Kineto trace"), std::string::npos);
}

TEST(KinetoJson, ObjectWithoutTraceEventsReadsAsSuch) {
  ScratchDir dir;
  testing::write_text(dir.path() / "config.json", R"({"model": "gpt", "layers": [1, 2]})");
  std::vector<KinetoEvent> events;
  auto header = read(dir.path() / "config.json", events);
  ASSERT_TRUE(header.is_ok());
  EXPECT_TRUE(header->top_level_object);
  EXPECT_FALSE(header->has_trace_events);
}

}  // namespace
}  // namespace partrain::profiler
