#include "analyzers/workload_run_config.h"

#include <gtest/gtest.h>

#include <string>

namespace partrain::analyzers {
namespace {

std::string config(const std::string& model, const std::string& layout) {
  return R"({"workload":"gpt","model":{)" + model + R"(},"layout":{)" + layout + "}}";
}

const std::string kModel = R"("layers":2,"hidden":64,"heads":4,"seq":32,"vocab":128)";

TEST(WorkloadRunConfig, ReadsTheLayoutAndDerivesDataParallelism) {
  auto c = parse_workload_run_config(config(kModel, R"("world":8,"tp":2,"pp":2,"micro_batch":2)"));
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->model.hidden, 64);
  EXPECT_EQ(c->resolved.layout.dp, 2);
  EXPECT_EQ(c->resolved.global_batch, 4);
  EXPECT_EQ(c->resolved.micro_batches, 1);
}

// A trace's config is input: a degree of 0 was divided by (SIGFPE in analyze, top and recommend
// --calibrate), a float past int64 became INT64_MIN. Each is "not a built-in workload's config".
TEST(WorkloadRunConfig, AFieldThatIsNotAPositiveWholeNumberIsAnotherShape) {
  for (const std::string layout :
       {R"("world":2,"tp":0)", R"("world":2,"pp":0)", R"("world":2,"vpp":0)",
        R"("world":2,"micro_batch":0)", R"("world":-1)", R"("world":2,"dp":0)",
        R"("world":2,"zero":4)", R"("world":2,"zero":-1)", R"("world":2,"tp":3e9)",
        R"("world":2,"global_batch":"8")", R"("world":1,"tp":2)"}) {
    EXPECT_FALSE(parse_workload_run_config(config(kModel, layout)).has_value()) << layout;
  }
  for (const std::string model :
       {R"("layers":2,"hidden":1e300)", R"("layers":0,"hidden":64)", R"("layers":2,"hidden":-64)",
        R"("layers":2,"hidden":64,"heads":0)", R"("layers":2,"hidden":64.5)"}) {
    EXPECT_FALSE(parse_workload_run_config(config(model, R"("world":2)")).has_value()) << model;
  }
}

}  // namespace
}  // namespace partrain::analyzers
