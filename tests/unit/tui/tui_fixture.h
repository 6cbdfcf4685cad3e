// A small two-rank trace with hand-computed answers for the dashboard's tests: one 100 ms step
// per rank, compute then a 1 MiB all-reduce on "dp" that rank 0 enters 20 ms before rank 1, and
// memory samples. Kept open (live) or completed, as a test needs.
#pragma once

#include <filesystem>
#include <memory>
#include <vector>

#include "profiler/trace_event.h"
#include "profiler/trace_writer.h"
#include "tests/support/trace_fixture.h"

namespace partrain::testing {

inline constexpr int64_t kMs = 1'000'000;
inline constexpr int64_t kMiB = 1 << 20;

inline profiler::SliceEvent compute_slice(int rank, int64_t start, int64_t dur, int64_t step = 1) {
  profiler::SliceEvent s;
  s.rank = rank;
  s.track = "main";
  s.name = "forward";
  s.category = profiler::SliceCategory::kCompute;
  s.ts_ns = start;
  s.dur_ns = dur;
  s.step = step;
  return s;
}

inline profiler::RankInfo rank_info(int rank) {
  profiler::RankInfo r;
  r.rank = rank;
  r.local_rank = rank;
  r.host = "node7";
  r.pid = 100 + rank;
  r.device = "cpu";
  return r;
}

// Step `step` (0-based offset `base`) of both ranks: rank 0 computes 60 ms then waits in the
// all-reduce from 60 to 90 ms; rank 1 computes 80 ms and all-reduces from 80 to 90 ms.
inline std::vector<profiler::TraceEvent> two_rank_step(int64_t step, int64_t base) {
  std::vector<profiler::TraceEvent> events;
  events.push_back(compute_slice(0, base, 60 * kMs, step));
  events.push_back(compute_slice(1, base, 80 * kMs, step));
  auto r0 = completed_all_reduce("dp", 0, {0, 1}, static_cast<uint64_t>(step), kMiB, base + 60 * kMs, 30 * kMs);
  auto r1 = completed_all_reduce("dp", 1, {0, 1}, static_cast<uint64_t>(step), kMiB, base + 80 * kMs, 10 * kMs);
  r0.step = r1.step = step;
  events.push_back(r0);
  events.push_back(r1);
  events.push_back(profiler::StepEvent{0, step, base, 100 * kMs, 2.5, 1000});
  events.push_back(profiler::StepEvent{1, step, base, 100 * kMs, 2.5, 1000});
  return events;
}

inline std::vector<profiler::TraceEvent> two_rank_run_start() {
  std::vector<profiler::TraceEvent> events;
  events.push_back(profiler::RunInfo{"run-tui", "partrain launch -n 2", "{}", 2,
                                     1'700'000'000'000'000'000, 0});
  events.push_back(rank_info(0));
  events.push_back(rank_info(1));
  // Rank 0: 4 MiB of params, then 2 MiB of activations; rank 1: 4 MiB of params.
  events.push_back(profiler::MemorySample{0, 0, 1000, 4 * kMiB});
  events.push_back(profiler::MemorySample{0, 3, 50'000, 2 * kMiB});
  events.push_back(profiler::MemorySample{1, 0, 1000, 4 * kMiB});
  return events;
}

}  // namespace partrain::testing
