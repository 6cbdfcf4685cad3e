// start_rank_gpu_counters over the stand-in libnvidia-ml.so.1 (tests/support/fake_nvml, loaded
// before the counter source asks for it by soname): the rank's GPU is sampled into the rank's
// trace on its timeline, PARTRAIN_NVML_INTERVAL sets the period (0: off, malformed: the default),
// and NVML failing starts nothing. The same start serves libpartrain_inject.so and a
// `partrain launch --device cuda` rank (runner/worker/rank_tracing.cpp).
#include "profiler/rank_gpu_counters.h"

#include <dlfcn.h>
#include <stdlib.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "tests/support/rank_tracer_fixture.h"
#include "tests/support/trace_query.h"

namespace partrain::profiler {
namespace {
namespace fs = std::filesystem;

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class RankGpuCountersTest : public testing::RankTracerFixture {
 protected:
  static void SetUpTestSuite() {
    // Loaded by path; the counter source's dlopen("libnvidia-ml.so.1") then finds it by soname.
    ASSERT_NE(dlopen(FAKE_NVML_DIR "/libnvidia-ml.so.1", RTLD_NOW | RTLD_GLOBAL), nullptr)
        << dlerror();
  }
  void SetUp() override {
    RankTracerFixture::SetUp();
    setenv("FAKE_NVML_LOG", log_path().c_str(), 1);
  }
  void TearDown() override {
    unsetenv("FAKE_NVML_LOG");
    unsetenv("FAKE_NVML_INIT_ERROR");
    unsetenv("PARTRAIN_NVML_INTERVAL");
    RankTracerFixture::TearDown();
  }
  fs::path log_path() const { return dir_ / "nvml.log"; }
  std::string finish() {
    EXPECT_TRUE(session_->finish(RunStatus::kCompleted).is_ok());
    return testing::TraceQuery(db()).rows(
        "SELECT rank, name, min(value), max(value) FROM counters GROUP BY rank, name "
        "ORDER BY name");
  }
};


TEST_F(RankGpuCountersTest, SampleTheRanksGpuIntoItsTrace) {
  setenv("PARTRAIN_NVML_INTERVAL", "10ms", 1);
  uint64_t readings = 0;
  {
    RankTracer tracer(tracer_options(5));
    std::unique_ptr<GpuCounterSampler> sampler = start_rank_gpu_counters(tracer, 3);
    ASSERT_NE(sampler, nullptr);
    std::this_thread::sleep_for(std::chrono::milliseconds(60));
    sampler->stop();
    readings = sampler->readings();
    EXPECT_TRUE(tracer.flush());
  }
  EXPECT_GE(readings, 3u) << "at once, on the 10 ms interval and when stopped";
  EXPECT_EQ(read_file(log_path()), "handle 3\n");
  EXPECT_EQ(finish(),
            "5|gpu3.power_w|412.345|412.345\n"
            "5|gpu3.sm_clock_mhz|1980.0|1980.0\n"
            "5|gpu3.throttle_reasons|4.0|4.0\n"
            "5|gpu3.utilization_pct|42.0|42.0\n");
}

TEST_F(RankGpuCountersTest, IntervalZeroTurnsThemOff) {
  setenv("PARTRAIN_NVML_INTERVAL", "0", 1);
  {
    RankTracer tracer(tracer_options(0));
    EXPECT_EQ(start_rank_gpu_counters(tracer, 0), nullptr);
  }
  EXPECT_FALSE(fs::exists(log_path())) << "NVML is not even opened";
  EXPECT_EQ(finish(), "");
}

TEST_F(RankGpuCountersTest, AMalformedIntervalSamplesEveryDefaultPeriod) {
  setenv("PARTRAIN_NVML_INTERVAL", "soon", 1);
  RankTracer tracer(tracer_options(0));
  std::unique_ptr<GpuCounterSampler> sampler = start_rank_gpu_counters(tracer, 1);
  ASSERT_NE(sampler, nullptr);
  sampler->stop();
  EXPECT_EQ(sampler->readings(), 2u) << "the first and the last: 100 ms had not passed";
}

TEST_F(RankGpuCountersTest, NvmlFailingStartsNothing) {
  setenv("FAKE_NVML_INIT_ERROR", "999", 1);
  RankTracer tracer(tracer_options(0));
  EXPECT_EQ(start_rank_gpu_counters(tracer, 0), nullptr);
  unsetenv("FAKE_NVML_INIT_ERROR");
  EXPECT_EQ(start_rank_gpu_counters(tracer, 9), nullptr) << "the stand-in has GPUs 0 to 7";
}

TEST(ParseNvmlInterval, TakesDurationsAndNamesTheFix) {
  EXPECT_EQ(*parse_nvml_interval("100ms"), std::chrono::milliseconds(100));
  EXPECT_EQ(*parse_nvml_interval("2s"), std::chrono::milliseconds(2000));
  EXPECT_EQ(*parse_nvml_interval("0"), std::chrono::milliseconds(0));
  EXPECT_EQ(*parse_nvml_interval("500us"), std::chrono::milliseconds(1))
      << "below a millisecond is as often as it goes, not off";
  for (const char* bad : {"soon", "-1s", ""}) {
    StatusOr<std::chrono::milliseconds> parsed = parse_nvml_interval(bad);
    ASSERT_FALSE(parsed.is_ok()) << bad;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(parsed.status().message().find("give one such as 100ms or 1s"), std::string::npos)
        << parsed.status().message();
  }
}

}  // namespace
}  // namespace partrain::profiler
