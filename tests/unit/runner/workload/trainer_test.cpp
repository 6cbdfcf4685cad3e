#include "runner/workload/trainer.h"

#include <gtest/gtest.h>

#include "memory/flops.h"

namespace partrain::runner {
namespace {

// The summary's model FLOPs are memory's count (one formula for the runner, the estimator and
// the analyzers), which for the built-in GPT is Narayanan 2021's eq. 3 when the MLP is 4h wide,
// and for the MLP 6 FLOPs per weight and sample: the figures the trainer reported before.
TEST(TrainerTest, TheModelFlopsOfAStepAreMemorysCount) {
  WorkloadConfig gpt;
  gpt.world = {4, false};
  gpt.layout.tp = 2;
  gpt.layout.micro_batch = 3;
  gpt.layout.global_batch = 12;  // 2 micro-batches on each of dp = 2
  gpt.layout.recompute = Recompute::kFull;  // recomputation is not model FLOPs
  ASSERT_TRUE(resolve_workload(gpt).is_ok());
  const WorkloadModel& m = gpt.model;
  ASSERT_EQ(m.ffn, 4 * m.hidden);
  ASSERT_EQ(gpt.resolved.global_batch, 12);
  const double narayanan = memory::narayanan_flops(12, m.seq, m.layers, m.hidden, m.vocab, false);
  EXPECT_NEAR(model_flops_per_step(gpt), narayanan, narayanan * 1e-12);

  WorkloadConfig mlp;
  mlp.kind = WorkloadKind::kMlp;
  mlp.world = {2, false};
  mlp.layout.micro_batch = 5;
  ASSERT_TRUE(resolve_workload(mlp).is_ok());
  const double hidden = mlp.model.hidden;
  const double weights = hidden * hidden * mlp.model.layers;
  EXPECT_DOUBLE_EQ(model_flops_per_step(mlp),
                   6.0 * static_cast<double>(mlp.resolved.global_batch) * weights);
}

}  // namespace
}  // namespace partrain::runner
