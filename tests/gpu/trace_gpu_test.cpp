// `partrain launch --device cuda` traces its ranks' GPU work in-process (label gpu): the trace of
// a real run holds every rank's kernels by demangled name with their launch shapes, inside the
// run's steps on the run's timeline, its copies, its GPU's NVML counters, and no CUPTI data loss.
// Skipped, never passed, without a GPU.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include <fmt/format.h>

#include "tests/gpu/visible_gpus.h"
#include "tests/integration/command_runner.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/trace_query.h"

namespace partrain::testing {
namespace {
namespace fs = std::filesystem;

constexpr const char* kModel =
    "--workload gpt --layers 2 --hidden 64 --heads 4 --seq 32 --vocab 128 --lr 3e-3";
constexpr int kSteps = 4;

// NVML's number of cuda:0: the first entry of CUDA_VISIBLE_DEVICES where that is an index.
int nvml_gpu0() {
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (visible == nullptr || *visible < '0' || *visible > '9') return 0;
  return std::atoi(visible);
}

class GpuTrace : public ::testing::Test {
 protected:
  void SetUp() override {
    if (visible_gpus() < 1) GTEST_SKIP() << "no GPU visible";
  }
  ScratchDir scratch_;
};

TEST_F(GpuTrace, EveryRanksKernelsAndCopiesAreInTheTrace) {
  // Two ranks sharing the GPU through Gloo: each rank's process collects its own.
  const fs::path db = scratch_.path() / "gpu.db";
  CommandResult r = run_partrain(fmt::format(
      "-q launch -n 2 --strategy ddp --micro-batch 1 --device cuda --comm gloo {} --steps {} "
      "--trace {}", kModel, kSteps, db.string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  TraceQuery q(db);
  EXPECT_EQ(q.rows("SELECT rank, device FROM ranks ORDER BY rank"), "0|cuda:0\n1|cuda:0\n");
  for (int rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE(fmt::format("rank {}", rank));
    // The workload's own kernels, demangled (no _Z), with their launch shapes. By name only:
    // templates demangle with their arguments ("adamw_kernel<unsigned short>(...)"), and the
    // softmax is one of two kernels by the sequence length.
    for (const char* kernel : {"layernorm_forward_kernel", "causal_softmax_forward", "adamw_kernel",
                               "embedding_backward_kernel"}) {
      EXPECT_GE(q.number(fmt::format("SELECT COUNT(*) FROM kernels WHERE rank = {} AND "
                                     "instr(name, '{}') > 0", rank, kernel)),
                kSteps)
          << kernel << "; top kernels:\n"
          << q.rows(fmt::format("SELECT name, COUNT(*) FROM kernels WHERE rank = {} GROUP BY "
                                "name ORDER BY 2 DESC LIMIT 10", rank));
    }
    EXPECT_EQ(q.number(fmt::format("SELECT COUNT(*) FROM kernels WHERE rank = {} AND "
                                   "name LIKE '\\_Z%' ESCAPE '\\'", rank)), 0);
    EXPECT_EQ(q.number(fmt::format("SELECT COUNT(*) FROM kernels WHERE rank = {} AND (grid_x < 1 "
                                   "OR block_x < 1 OR dur_ns <= 0 OR stream IS NULL)", rank)), 0);
    // cuBLAS's GEMMs are there too: the matmuls of every layer.
    EXPECT_GT(q.number(fmt::format("SELECT COUNT(*) FROM kernels WHERE rank = {} AND (name LIKE "
                                   "'%gemm%' OR name LIKE '%nvjet%' OR name LIKE '%cutlass%' "
                                   "OR name LIKE '%sm90%' OR name LIKE '%sm80%')", rank)), 0)
        << q.rows(fmt::format("SELECT name FROM kernels WHERE rank = {} GROUP BY name", rank));
    // Every training step has kernels of its own, inside the step on the timeline.
    EXPECT_EQ(q.number(fmt::format(
                  "SELECT COUNT(*) FROM steps s WHERE s.rank = {} AND EXISTS (SELECT 1 FROM "
                  "kernels k WHERE k.rank = s.rank AND k.ts_ns >= s.ts_ns AND k.ts_ns < s.ts_ns "
                  "+ s.dur_ns + 50000000)", rank)),
              kSteps);
    // NVML's counters of the GPU the rank ran on (both share cuda:0), sampled at once, every
    // 100 ms and at the end: at least the first and the last.
    EXPECT_GE(q.number(fmt::format("SELECT COUNT(*) FROM counters WHERE rank = {} AND name = "
                                   "'gpu{}.sm_clock_mhz' AND value > 0", rank, nvml_gpu0())),
              2)
        << q.rows(fmt::format("SELECT name, COUNT(*) FROM counters WHERE rank = {} GROUP BY name",
                              rank));
    // The batches' uploads.
    EXPECT_GT(q.number(fmt::format("SELECT COUNT(*) FROM transfers WHERE rank = {} AND name = "
                                   "'memcpy HtoD' AND bytes > 0", rank)), 0);
  }
  EXPECT_EQ(q.number("SELECT COUNT(*) FROM stats WHERE name IN ('cupti_dropped_records', "
                     "'cupti_buffers_refused')"), 0);
}

}  // namespace
}  // namespace partrain::testing
