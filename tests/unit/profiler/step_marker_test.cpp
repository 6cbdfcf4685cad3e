#include "profiler/step_marker.h"

#include <gtest/gtest.h>

namespace partrain::profiler {
namespace {

TEST(StepMarker, DefaultMatchesPyTorchProfilerSteps) {
  auto marker = StepMarker::compile(kDefaultStepMarker);
  ASSERT_TRUE(marker.is_ok());
  EXPECT_EQ(marker->step_of("ProfilerStep#7"), 7);
  EXPECT_EQ(marker->step_of("ProfilerStep#12"), 12);
  EXPECT_EQ(marker->step_of("forward"), std::nullopt);
  EXPECT_EQ(marker->step_of("ProfilerStep#"), std::nullopt);
}

TEST(StepMarker, WithoutANumberStepsAreCounted) {
  auto marker = StepMarker::compile("^train_step$");
  ASSERT_TRUE(marker.is_ok());
  EXPECT_EQ(marker->step_of("train_step"), 0);
  EXPECT_EQ(marker->step_of("eval_step"), std::nullopt);
  EXPECT_EQ(marker->step_of("train_step"), 1);
  auto capture = StepMarker::compile(R"(iter-(\w+))");
  ASSERT_TRUE(capture.is_ok());
  EXPECT_EQ(capture->step_of("iter-abc"), 0);  // a capture that is no number: counted
  EXPECT_EQ(capture->step_of("iter-40"), 40);
}

TEST(StepMarker, NamesRememberedAsNoMarkerStayNoMarker) {
  auto marker = StepMarker::compile("^step$");
  ASSERT_TRUE(marker.is_ok());
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(marker->step_of("forward"), std::nullopt);
    EXPECT_EQ(marker->step_of("step"), i);  // counted each time: markers are never remembered
  }
}

TEST(StepMarker, ABadExpressionNamesItselfAndTheDefault) {
  auto marker = StepMarker::compile("ProfilerStep#(");
  ASSERT_FALSE(marker.is_ok());
  EXPECT_EQ(marker.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(marker.status().message().find("'ProfilerStep#('"), std::string::npos);
  EXPECT_NE(marker.status().message().find("ProfilerStep#(\\d+)"), std::string::npos);
}

}  // namespace
}  // namespace partrain::profiler
