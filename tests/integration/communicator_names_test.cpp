// Communicators by the names users know them by, on a real run: every communicator a tp 2 x pp 2
// GPT run records is named after the mesh group whose ranks it holds (so the naming follows the
// runner's split order, runner/workload/mesh.cpp), and analyze, export and top all show those
// names instead of the runner's ids ("world/split0/color1").
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "memory/mesh_order.h"
#include "profiler/trace_reader/communicator_name.h"
#include "tests/integration/command_runner.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/trace_query.h"

namespace partrain::testing {
namespace {

namespace fs = std::filesystem;

// The world ranks of the group `name` names in `layout` ("tp 1", "pp 0 gradients", "embedding
// 1": the first and last stage of pipeline 1), or nothing for a name that is not a mesh group's.
std::set<int> ranks_of(const std::string& name, const memory::TrainingLayout& layout, int world) {
  std::istringstream words(name);
  std::string axis_name;
  int index = -1;
  words >> axis_name >> index;
  std::set<int> ranks;
  if (name == "world") {
    for (int r = 0; r < world; ++r) ranks.insert(r);
    return ranks;
  }
  const bool embedding = axis_name == "embedding";
  const memory::MeshAxis axis = axis_name == "tp"   ? memory::MeshAxis::kTp
                                : axis_name == "dp" ? memory::MeshAxis::kDp
                                                    : memory::MeshAxis::kPp;
  if (!embedding && axis_name != "tp" && axis_name != "dp" && axis_name != "pp") return ranks;
  for (int r = 0; r < world; ++r) {
    if (memory::mesh_group(r, axis, layout) != index) continue;
    const int stage = memory::mesh_coords(r, layout).pp;
    if (embedding && stage != 0 && stage != layout.pp - 1) continue;
    ranks.insert(r);
  }
  return ranks;
}

std::set<int> parse_ranks(const std::string& text) {
  std::set<int> ranks;
  std::istringstream in(text);
  for (std::string part; std::getline(in, part, ',');) ranks.insert(std::stoi(part));
  return ranks;
}

// A 4-rank GPT run of `layout` for 2 steps, traced into `trace`.
bool traced_launch(const std::string& layout, const fs::path& trace) {
  const CommandResult launch = run_partrain(fmt::format(
      "-q launch -n 4 --workload gpt --layers 2 --hidden 64 --heads 4 --seq 32 --vocab 128 {} "
      "--steps 2 --trace {}",
      layout, trace.string()));
  EXPECT_EQ(launch.exit_code, 0) << launch.err;
  return launch.exit_code == 0;
}

// A hybrid ZeRO-3 (HSDP) over 4 ranks in shards of 2: its gathers and reduce-scatters run in the
// shard groups (ranks 0-1, 2-3), the all-reduces of each shard between its replicas (0 and 2, 1
// and 3), each named after the dp group they split.
TEST(CommunicatorNames, AHybridsShardAndReplicaGroupsAreNamedAfterTheDpGroup) {
  ScratchDir dir;
  const fs::path trace = dir.path() / "run.db";
  ASSERT_TRUE(traced_launch("--zero 3 --shard 2", trace));
  TraceQuery query(trace);
  const std::string rows = query.rows(
      "SELECT comm_id, group_concat(DISTINCT group_ranks), group_concat(DISTINCT op) FROM "
      "collectives GROUP BY comm_id");
  std::map<std::string, std::pair<std::set<int>, std::string>> groups;
  std::istringstream lines(rows);
  for (std::string line; std::getline(lines, line);) {
    const size_t first = line.find('|'), second = line.rfind('|');
    groups[profiler::communicator_name(line.substr(0, first))] = {
        parse_ranks(line.substr(first + 1, second - first - 1)), line.substr(second + 1)};
  }
  const std::pair<const char*, std::set<int>> expected[] = {{"dp 0 shard 0", {0, 1}},
                                                            {"dp 0 shard 1", {2, 3}},
                                                            {"dp 0 replicas 0", {0, 2}},
                                                            {"dp 0 replicas 1", {1, 3}}};
  for (const auto& [name, ranks] : expected) {
    ASSERT_TRUE(groups.count(name)) << name << " in\n" << rows;
    EXPECT_EQ(groups.at(name).first, ranks) << name;
    const std::string& ops = groups.at(name).second;
    const bool shard = std::string(name).find("shard") != std::string::npos;
    EXPECT_EQ(ops.find(shard ? "reduce_scatter" : "all_reduce") != std::string::npos, true)
        << name << ": " << ops;
    EXPECT_EQ(ops.find("all_gather") != std::string::npos, shard) << name << ": " << ops;
  }
  const CommandResult analyze = run_partrain("analyze " + trace.string());
  ASSERT_EQ(analyze.exit_code, 0) << analyze.err;
  EXPECT_NE(analyze.out.find("dp 0 replicas 1"), std::string::npos) << analyze.out;
  EXPECT_EQ(analyze.out.find("ep 0"), std::string::npos) << analyze.out;
  EXPECT_NE(analyze.out.find("zero 3 shard 2"), std::string::npos) << analyze.out;
}

TEST(CommunicatorNames, NameTheMeshGroupsInAnalyzeExportAndTop) {
  ScratchDir dir;
  const fs::path trace = dir.path() / "run.db";
  ASSERT_TRUE(traced_launch("--tp 2 --pp 2", trace));

  memory::TrainingLayout layout;
  layout.tp = 2;
  layout.pp = 2;
  std::set<std::string> names;
  {
    TraceQuery query(trace);
    const std::string rows = query.rows(
        "SELECT comm_id, group_concat(DISTINCT group_ranks) FROM collectives GROUP BY comm_id");
    std::istringstream lines(rows);
    for (std::string line; std::getline(lines, line);) {
      const std::string comm_id = line.substr(0, line.find('|'));
      const std::string name = profiler::communicator_name(comm_id);
      names.insert(name);
      EXPECT_EQ(ranks_of(name, layout, 4), parse_ranks(line.substr(line.find('|') + 1)))
          << comm_id << " named " << name;
    }
  }
  EXPECT_EQ(names, (std::set<std::string>{"world", "tp 0", "tp 1", "pp 0 activations",
                                          "pp 0 gradients", "pp 1 activations", "pp 1 gradients",
                                          "embedding 0", "embedding 1"}));

  const CommandResult analyze = run_partrain("analyze " + trace.string());
  ASSERT_EQ(analyze.exit_code, 0) << analyze.err;
  EXPECT_NE(analyze.out.find("  tp 1 "), std::string::npos) << analyze.out;
  EXPECT_EQ(analyze.out.find("/split"), std::string::npos) << analyze.out;
  const CommandResult json = run_partrain("analyze " + trace.string() + " --json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  for (const auto& row : parse_json_output(json.out)["collectives"]) {
    EXPECT_EQ(row["group"], profiler::communicator_name(row["comm_id"].get<std::string>()));
  }

  const fs::path exported = dir.path() / "run.json";
  const CommandResult exporting =
      run_partrain("export " + trace.string() + " -o " + exported.string());
  ASSERT_EQ(exporting.exit_code, 0) << exporting.err;
  std::set<std::string> threads;
  const nlohmann::json events = parse_json_output(read_file(exported.string()));
  for (const auto& event : events.at("traceEvents")) {
    if (event.value("name", "") == "thread_name") {
      threads.insert(event.at("args").at("name").get<std::string>());
    }
  }
  EXPECT_TRUE(threads.count("tp 1 (comm)")) << fmt::format("{}", fmt::join(threads, ", "));
  EXPECT_TRUE(threads.count("embedding 0 (comm)"));
  for (const std::string& thread : threads) EXPECT_EQ(thread.find("/split"), std::string::npos);

  const CommandResult top = run_partrain("top " + trace.string() + " --json");
  ASSERT_EQ(top.exit_code, 0) << top.err;
  const auto model = parse_json_output(top.out);
  ASSERT_FALSE(model["recent_collectives"].empty());
  for (const auto& c : model["recent_collectives"]) {
    EXPECT_TRUE(names.count(c["group"].get<std::string>())) << c.dump();
  }
}

}  // namespace
}  // namespace partrain::testing
