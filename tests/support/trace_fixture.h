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

inline profiler::TraceFile write_completed_trace(const std::filesystem::path& path,
                                                 const std::string& config_json, int world_size,
                                                 std::vector<profiler::TraceEvent> events) {
  events.insert(events.begin(), profiler::RunInfo{"run-1", "partrain launch", config_json,
                                                   world_size, 1'700'000'000'000'000'000, 0});
  {
    auto writer = profiler::TraceWriter::create(path);
    EXPECT_TRUE(writer.is_ok()) << writer.status().message();
    (*writer)->append(events);
    EXPECT_TRUE((*writer)->set_run_status(profiler::RunStatus::kCompleted).is_ok());
  }
  auto trace = profiler::open_trace(path);
  EXPECT_TRUE(trace.is_ok()) << trace.status().message();
  return std::move(trace).value();
}

}  // namespace partrain::testing
