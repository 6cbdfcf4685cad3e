// What a trace of tests/integration/scripts/torch_scenarios.py (examples/pytorch's scripts run by
// real PyTorch processes) must show, read through the documented views only:
//   - every collective matched across its group: one row per member rank at each (comm_id, seq),
//     all with the same op, dtype, count and bytes, completed; every send paired with its recv;
//   - the collectives each scenario's tensors imply (the scripts' --expect files), in each of its
//     steps, by group (PyTorch's name: default_pg, mesh_dp, ...), op and bytes;
//   - the steps: 0 .. N-1 on every rank, N the scenarios' steps together.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>

#include "tests/support/trace_query.h"

namespace partrain::testing {

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
