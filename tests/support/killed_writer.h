// A trace writer process killed (SIGKILL) mid-run, as a killed launch leaves its trace: in WAL
// mode, its run `running`, the committed rows in its -wal, the `-writer` lock file beside it.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <vector>

#include "profiler/trace_writer.h"

namespace partrain::testing {

// Killed after committing `batches` of `per_batch` slices (rank 0), with `uncommitted` appended
// after the last commit.
inline void kill_writer_after_commits(const std::filesystem::path& path, int batches, int per_batch,
                                      const std::vector<profiler::TraceEvent>& uncommitted) {
  using namespace profiler;
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto writer = TraceWriter::create(path);
    if (!writer.is_ok()) _exit(2);
    int64_t ts = 0;
    for (int b = 0; b < batches; ++b) {
      std::vector<TraceEvent> batch;
      for (int i = 0; i < per_batch; ++i) {
        batch.push_back(SliceEvent{0, TrackKind::kCpuThread, "main", "op", SliceCategory::kCompute,
                                   ts++, 1, b, -1, -1});
      }
      (*writer)->append(batch);
      if (!(*writer)->commit().is_ok()) _exit(3);
    }
    (*writer)->append(uncommitted);
    raise(SIGKILL);
    _exit(4);
  }
  int wstatus = 0;
  ASSERT_EQ(waitpid(child, &wstatus, 0), child);
  ASSERT_TRUE(WIFSIGNALED(wstatus)) << "child exit " << WEXITSTATUS(wstatus);
}

}  // namespace partrain::testing
