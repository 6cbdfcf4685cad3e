// The --inject grammar: what parses, what is refused and how the refusal names the bad part,
// the canonical text round trip, which steps a slow fault delays and where the others fire.
#include "runner/fault/fault_spec.h"

#include <gtest/gtest.h>

#include "runner/workload/workload_config.h"

namespace partrain::runner::fault {
namespace {

TEST(FaultSpecTest, ParsesSlowWithAndWithoutStep) {
  auto every = parse_fault_spec("slow:rank=2,ms=30");
  ASSERT_TRUE(every.is_ok()) << every.status().message();
  EXPECT_EQ(every->kind, FaultKind::kSlow);
  EXPECT_EQ(every->rank, 2);
  EXPECT_EQ(every->ms, 30);
  EXPECT_FALSE(every->step.has_value());
  auto one = parse_fault_spec("slow:ms=5,step=3,rank=0");
  ASSERT_TRUE(one.is_ok()) << one.status().message();
  EXPECT_EQ(one->step, 3);
  EXPECT_EQ(fault_spec_text(*one), "slow:rank=0,step=3,ms=5");
  auto again = parse_fault_spec(fault_spec_text(*one));
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(fault_spec_text(*again), "slow:rank=0,step=3,ms=5");
}

void expect_refused(std::string_view text, std::string_view message) {
  auto spec = parse_fault_spec(text);
  ASSERT_FALSE(spec.is_ok()) << text;
  EXPECT_EQ(spec.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(spec.status().message(), message) << text;
}

TEST(FaultSpecTest, RefusalsNameTheBadPart) {
  expect_refused("explode:rank=1", "unknown fault kind 'explode': known kinds: slow, crash, exit, "
                                   "hang, stop, desync, oom");
  expect_refused("x",
                 "unknown fault kind 'x': known kinds: slow, crash, exit, hang, stop, desync, oom");
  expect_refused("slow", "slow needs parameters: slow:rank=R,ms=M[,step=S]");
  expect_refused("slow:rank=1", "slow needs ms= (slow:rank=R,ms=M[,step=S])");
  expect_refused("slow:ms=1", "slow needs rank= (slow:rank=R,ms=M[,step=S])");
  expect_refused("slow:rank=1,ms=abc", "key 'ms' of slow needs a non-negative integer, got 'abc'");
  expect_refused("slow:rank=-1,ms=3", "key 'rank' of slow needs a non-negative integer, got '-1'");
  expect_refused("slow:rank=1,ms=3,color=red",
                 "unknown key 'color' in a slow fault: known keys: rank, step, ms, code");
  expect_refused("slow:rank=1,rank=2,ms=3", "key 'rank' given twice");
  expect_refused("slow:rank=1,ms", "'ms' is not key=value (keys: rank, step, ms, code)");
  expect_refused("slow:rank=1,ms=3,code=4",
                 "key 'code' does not apply to slow (slow:rank=R,ms=M[,step=S])");
  expect_refused("crash", "crash needs parameters: crash:rank=R[,step=S]");
  expect_refused("crash:step=1", "crash needs rank= (crash:rank=R[,step=S])");
  expect_refused("hang:rank=1,ms=5", "key 'ms' does not apply to hang (hang:rank=R[,step=S])");
  expect_refused("oom:rank=1,code=3", "key 'code' does not apply to oom (oom:rank=R[,step=S])");
  expect_refused("exit:rank=1,code=0", "key 'code' of exit needs an exit code in 1-255, got 0");
  expect_refused("exit:rank=1,code=256",
                 "key 'code' of exit needs an exit code in 1-255, got 256");
}

TEST(FaultSpecTest, ParsesEveryKindAndRoundTrips) {
  for (std::string_view text : {"crash:rank=1,step=2", "exit:rank=3,code=7", "exit:rank=0",
                                "hang:rank=2,step=1", "stop:rank=3,step=2", "desync:rank=1",
                                "oom:rank=0,step=4"}) {
    auto spec = parse_fault_spec(text);
    ASSERT_TRUE(spec.is_ok()) << text << ": " << spec.status().message();
    EXPECT_EQ(fault_spec_text(*spec), text);
  }
  auto exit = parse_fault_spec("exit:rank=3,code=7");
  EXPECT_EQ(exit->kind, FaultKind::kExit);
  EXPECT_EQ(exit_fault_code(*exit), 7);
  EXPECT_EQ(exit_fault_code(*parse_fault_spec("exit:rank=0")), 1);
  EXPECT_EQ(parse_fault_spec("stop:rank=1")->kind, FaultKind::kStop);
}

TEST(FaultSpecTest, FaultAtMatchesKindRankAndStep) {
  std::vector<FaultSpec> faults = {*parse_fault_spec("slow:rank=1,ms=10"),
                                   *parse_fault_spec("hang:rank=1,step=2"),
                                   *parse_fault_spec("crash:rank=0")};
  EXPECT_EQ(fault_at(faults, FaultKind::kHang, 1, 1), nullptr);
  ASSERT_NE(fault_at(faults, FaultKind::kHang, 1, 2), nullptr);
  EXPECT_EQ(fault_at(faults, FaultKind::kHang, 1, 2)->step, 2);
  EXPECT_EQ(fault_at(faults, FaultKind::kHang, 0, 2), nullptr);
  // Without step= a fault fires in every step: the first one, for a fault that ends the rank.
  EXPECT_NE(fault_at(faults, FaultKind::kCrash, 0, 0), nullptr);
  EXPECT_NE(fault_at(faults, FaultKind::kCrash, 0, 7), nullptr);
  EXPECT_EQ(fault_at(faults, FaultKind::kSlow, 0, 0), nullptr);
}

TEST(FaultSpecTest, ValidationChecksRankAndStep) {
  auto spec = parse_fault_spec("slow:rank=4,step=2,ms=1");
  ASSERT_TRUE(spec.is_ok());
  Status status = validate_fault_spec(*spec, 4, 10);
  EXPECT_EQ(status.message(), "rank 4 is outside the world of 4 ranks (0-3)");
  spec->rank = 3;
  EXPECT_TRUE(validate_fault_spec(*spec, 4, 10).is_ok());
  EXPECT_EQ(validate_fault_spec(*spec, 4, 2).message(),
            "step 2 is outside the run's 2 steps (0-1)");
}

TEST(FaultSpecTest, SlowDelayAddsMatchingFaults) {
  std::vector<FaultSpec> faults = {*parse_fault_spec("slow:rank=1,ms=10"),
                                   *parse_fault_spec("slow:rank=1,step=2,ms=5"),
                                   *parse_fault_spec("slow:rank=0,step=2,ms=7")};
  EXPECT_EQ(slow_delay_ms(faults, 1, 0), 10);
  EXPECT_EQ(slow_delay_ms(faults, 1, 2), 15);
  EXPECT_EQ(slow_delay_ms(faults, 0, 2), 7);
  EXPECT_EQ(slow_delay_ms(faults, 0, 1), 0);
  EXPECT_EQ(slow_delay_ms(faults, 3, 2), 0);
}

// The launcher hands the faults to the workers in the workload JSON; they come back as given.
TEST(FaultSpecTest, WorkloadConfigCarriesFaults) {
  WorkloadConfig config;
  config.world.ranks = 4;
  config.steps = 5;
  config.faults = {*parse_fault_spec("slow:rank=2,ms=30"),
                   *parse_fault_spec("slow:rank=1,step=3,ms=7")};
  ASSERT_TRUE(resolve_workload(config).is_ok());
  auto back = workload_from_json(workload_to_json(config));
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  ASSERT_EQ(back->faults.size(), 2u);
  EXPECT_EQ(fault_spec_text(back->faults[0]), "slow:rank=2,ms=30");
  EXPECT_EQ(fault_spec_text(back->faults[1]), "slow:rank=1,step=3,ms=7");
  config.faults.push_back(*parse_fault_spec("slow:rank=1,step=5,ms=1"));
  EXPECT_EQ(resolve_workload(config).message(),
            "--inject slow:rank=1,step=5,ms=1: step 5 is outside the run's 5 steps (0-4)");
}

}  // namespace
}  // namespace partrain::runner::fault
