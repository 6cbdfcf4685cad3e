// tests/integration/scripts/torch_scenarios.py (examples/pytorch's scripts in one set of real
// PyTorch processes) for the torch tests: how to run it, its output without partrain, and what
// its trace must show, read through the documented views only:
//   - every collective matched across its group: one row per member rank at each (comm_id, seq),
//     all with the same op, dtype, count and bytes, completed; every send paired with its recv;
//   - the collectives each scenario's tensors imply (the scripts' --expect files), in each of its
//     steps, by group (PyTorch's name: default_pg, mesh_dp, ...), op and bytes;
//   - the steps: 0 .. N-1 on every rank, N the scenarios' steps together.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <tuple>

#include "tests/integration/command_runner.h"
#include "tests/support/torch_python.h"
#include "tests/support/trace_query.h"

namespace partrain::testing {

inline constexpr int kScenarioRanks = 4;
inline const std::filesystem::path kScenarioScripts = std::filesystem::path(PARTRAIN_SOURCE_DIR) /
                                                      "tests" / "integration" / "scripts";
inline const std::filesystem::path kScenarios = kScenarioScripts / "torch_scenarios.py";
inline const std::filesystem::path kPytorchExamples =
    std::filesystem::path(PARTRAIN_SOURCE_DIR) / "examples" / "pytorch";

inline std::string shell_quoted(const std::filesystem::path& path) {
  return "'" + path.string() + "'";
}

// torchrun for the torch tests' interpreter: the script beside it, else `python -m
// torch.distributed.run`.
inline std::string torchrun() {
  const std::filesystem::path python = torch_python();
  const std::filesystem::path script = python.parent_path() / "torchrun";
  std::error_code error;
  if (std::filesystem::exists(script, error)) return shell_quoted(script);
  return shell_quoted(python) + " -m torch.distributed.run";
}

// `partrain launch -n RANKS [OPTIONS] --trace TRACE -- python SCRIPT CASE` for one of the small
// gloo programs under scripts/ (torch_dist_features.py, torch_gloo_ops.py), bounded.
inline CommandResult launch_script_case(const std::filesystem::path& script,
                                        const std::string& trace, int ranks,
                                        const std::string& options, const std::string& scenario) {
  return run_shell("timeout -k 10 300 " + partrain_binary() + " launch -n " +
                   std::to_string(ranks) + " " + options + " --trace " + shell_quoted(trace) +
                   " -- " + shell_quoted(torch_python()) + " " + shell_quoted(script) + " " +
                   scenario);
}

// torchrun's command for the scenarios; a stuck job ends in a timeout instead of a hung suite.
inline std::string torchrun_scenarios(const std::string& arguments) {
  return "timeout -k 10 600 " + torchrun() + " --standalone --nproc-per-node " +
         std::to_string(kScenarioRanks) + " " + shell_quoted(kScenarios) + " " + arguments;
}

// The scenarios' output under torchrun without partrain, which the tests compare a traced run's
// with. Made once per build and version of the scripts (the torch tests would otherwise each
// pay a 4-rank run for it), under a lock so tests run in parallel share it:
// <build>/torch_scenarios/untraced-<hash of the scripts>.out.
inline std::string untraced_scenario_output() {
  namespace fs = std::filesystem;
  std::string scripts;
  for (const fs::path& dir : {kScenarioScripts, kPytorchExamples}) {
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (entry.path().extension() == ".py") scripts += read_file(entry.path().string());
    }
  }
  const fs::path dir = fs::path(PARTRAIN_BINARY).parent_path().parent_path() / "torch_scenarios";
  fs::create_directories(dir);
  const fs::path out = dir / ("untraced-" + std::to_string(std::hash<std::string>{}(scripts)) +
                              "-" + std::to_string(std::hash<std::string>{}(torch_python())) +
                              ".out");
  CommandResult made = run_shell(
      "flock " + shell_quoted(dir / "lock") + " sh -c \"test -s " + shell_quoted(out) + " || { " +
      torchrun_scenarios("") + " >" + shell_quoted(out.string() + ".tmp") + " && mv " +
      shell_quoted(out.string() + ".tmp") + " " + shell_quoted(out) + "; }\"");
  EXPECT_EQ(made.exit_code, 0) << "the scenarios failed without partrain:\n" << made.err;
  return read_file(out.string());
}

// Rows of `sql` that should not exist, one per line (empty when all holds).
inline void expect_no_rows(const TraceQuery& trace, const std::string& what,
                           const std::string& sql) {
  const std::string rows = trace.rows(sql);
  EXPECT_EQ(rows, "") << what << ":\n" << rows;
}

inline void expect_collectives_matched(const TraceQuery& trace) {
  EXPECT_GT(trace.number("SELECT count(*) FROM collectives"), 0) << "no collective recorded";
  expect_no_rows(trace, "collectives not on every member rank, or differing between ranks",
                 "SELECT comm_id, seq, op, count(*), count(DISTINCT rank), max(group_size), "
                 "count(DISTINCT op || dtype || count || '/' || bytes) "
                 "FROM collectives WHERE op NOT IN ('send', 'recv') GROUP BY comm_id, seq "
                 "HAVING count(*) != max(group_size) OR count(DISTINCT rank) != count(*) "
                 "OR min(group_size) != max(group_size) "
                 "OR count(DISTINCT op || dtype || count || '/' || bytes) != 1");
  expect_no_rows(trace, "collectives recorded on a rank outside their group",
                 "SELECT rank, comm_id, seq, group_ranks FROM collectives "
                 "WHERE instr(',' || group_ranks || ',', ',' || rank || ',') = 0");
  expect_no_rows(trace, "collectives that did not complete, or end before they start",
                 "SELECT rank, comm_id, seq, op, state, dur_ns FROM collectives "
                 "WHERE state != 'completed' OR dur_ns < 0 OR enqueue_ns > ts_ns");
  expect_no_rows(trace, "sends without their recv (or with other bytes)",
                 "SELECT s.rank, s.comm_id, s.seq, s.peer, s.bytes FROM collectives s "
                 "WHERE s.op = 'send' AND NOT EXISTS (SELECT 1 FROM collectives r WHERE "
                 "r.op = 'recv' AND r.comm_id = s.comm_id AND r.seq = s.seq AND "
                 "r.rank = s.peer AND r.peer = s.rank AND r.bytes = s.bytes)");
  expect_no_rows(trace, "recvs without their send",
                 "SELECT r.rank, r.comm_id, r.seq, r.peer FROM collectives r WHERE r.op = 'recv' "
                 "AND NOT EXISTS (SELECT 1 FROM collectives s WHERE s.op = 'send' AND "
                 "s.comm_id = r.comm_id AND s.seq = r.seq AND s.rank = r.peer AND "
                 "s.peer = r.rank)");
}

// (group description, op, bytes) -> times per step.
using ExpectedOps = std::map<std::tuple<std::string, std::string, int64_t>, int64_t>;

inline void add_expected(const nlohmann::json& items, ExpectedOps& ops) {
  for (const auto& item : items) {
    ops[{item.at("group").get<std::string>(), item.at("op").get<std::string>(),
         item.at("bytes").get<int64_t>()}] += item.at("times").get<int64_t>();
  }
}

// Each rank's expectations (<prefix>.<rank>.json) against its rows, step by step; the steps.
inline void expect_scenarios_recorded(const TraceQuery& trace, const std::string& expect_prefix,
                                      int world_size) {
  int64_t total_steps = -1;
  for (int rank = 0; rank < world_size; ++rank) {
    std::ifstream file(expect_prefix + "." + std::to_string(rank) + ".json");
    ASSERT_TRUE(file) << "rank " << rank << " wrote no expectations (" << expect_prefix << ")";
    const nlohmann::json expected = nlohmann::json::parse(file);
    int64_t steps = 0;
    for (const auto& scenario : expected.at("scenarios")) {
      const std::string name = scenario.at("name");
      const int64_t first = scenario.at("first_step");
      const int64_t count = scenario.at("steps");
      steps += count;
      for (int64_t step = first; step < first + count; ++step) {
        ExpectedOps ops;
        add_expected(scenario.at("per_step"), ops);
        if (scenario.contains("from_step")) {
          for (const auto& [from, items] : scenario.at("from_step").items()) {
            if (step - first >= std::stoll(from)) add_expected(items, ops);
          }
        }
        for (const auto& [key, times] : ops) {
          const auto& [group, op, bytes] = key;
          const int64_t found = trace.number(
              "SELECT count(*) FROM collectives WHERE rank = " + std::to_string(rank) +
              " AND step = " + std::to_string(step) + " AND op = '" + op + "' AND bytes = " +
              std::to_string(bytes) + " AND comm_id LIKE '" + group + ":%'");
          EXPECT_EQ(found, times) << name << ", rank " << rank << ", step " << step << " ("
                                  << step - first << " of the scenario): " << op << " of "
                                  << bytes << " bytes on a " << group << " group";
        }
      }
    }
    const std::string steps_seen = trace.rows(
        "SELECT count(*), min(step), max(step) FROM steps WHERE rank = " + std::to_string(rank));
    EXPECT_EQ(steps_seen, std::to_string(steps) + "|0|" + std::to_string(steps - 1) + "\n")
        << "rank " << rank << "'s steps (count|first|last)";
    if (total_steps >= 0) {
      EXPECT_EQ(steps, total_steps) << "ranks ran different scenarios";
    }
    total_steps = steps;
  }
}

}  // namespace partrain::testing
