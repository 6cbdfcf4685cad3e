// Writing small traces for tests: a run row, the given events, status completed, then the file
// opened as partrain opens inputs (open_trace). Fixtures with hand-computed answers build on it.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "profiler/trace_event.h"
#include "profiler/trace_open.h"
#include "profiler/trace_writer.h"

namespace partrain::testing {

// A completed float sum all-reduce of `rank` in a group of world ranks, as the recording
// communicator reports it (the rank's place in the group is its comm rank).
inline profiler::CollectiveRecord completed_all_reduce(const std::string& comm_id, int rank,
                                                       std::vector<int> group, uint64_t seq,
                                                       uint64_t bytes, int64_t start_ns,
                                                       int64_t dur_ns) {
  profiler::CollectiveRecord r;
  r.world_rank = rank;
  r.step = 1;
  r.event.comm_id = comm_id;
  r.event.seq = seq;
  r.event.op = "all_reduce";
  r.event.dtype = "float";
  r.event.reduce_op = "sum";
  r.event.count = bytes / 4;
  r.event.bytes = bytes;
  for (size_t i = 0; i < group.size(); ++i) {
    if (group[i] == rank) r.event.rank = static_cast<int>(i);
  }
  r.event.group_ranks = std::move(group);
  r.event.enqueue_ns = start_ns - 5;
  r.event.start_ns = start_ns;
  r.event.end_ns = start_ns + dur_ns;
  r.event.state = profiler::CollectiveState::kCompleted;
  return r;
}

// A trace of `events` whose run ended with `status`.
inline profiler::TraceFile write_ended_trace(const std::filesystem::path& path,
                                             const std::string& config_json, int world_size,
                                             std::vector<profiler::TraceEvent> events,
                                             profiler::RunStatus status) {
  events.insert(events.begin(), profiler::RunInfo{"run-1", "partrain launch", config_json,
                                                   world_size, 1'700'000'000'000'000'000, 0});
  {
    auto writer = profiler::TraceWriter::create(path);
    EXPECT_TRUE(writer.is_ok()) << writer.status().message();
    (*writer)->append(events);
    EXPECT_TRUE((*writer)->set_run_status(status).is_ok());
  }
  auto trace = profiler::open_trace(path);
  EXPECT_TRUE(trace.is_ok()) << trace.status().message();
  return std::move(trace).value();
}

inline profiler::TraceFile write_completed_trace(const std::filesystem::path& path,
                                                 const std::string& config_json, int world_size,
                                                 std::vector<profiler::TraceEvent> events) {
  return write_ended_trace(path, config_json, world_size, std::move(events),
                           profiler::RunStatus::kCompleted);
}

}  // namespace partrain::testing
