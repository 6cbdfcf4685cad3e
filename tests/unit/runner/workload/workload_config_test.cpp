#include "runner/workload/workload_config.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

namespace partrain::runner {
namespace {

// Each refusal names its flag and the value given, before any rank starts.
TEST(WorkloadConfigTest, RefusesValuesTheRunCannotUseNamingTheFlag) {
  struct Case {
    const char* wanted;
    void (*set)(WorkloadConfig&);
  };
  const Case cases[] = {
      {"--layers must be at least 1, got 0", [](WorkloadConfig& c) { c.model.layers = 0; }},
      {"--seq must be at least 1, got -2", [](WorkloadConfig& c) { c.model.seq = -2; }},
      {"--steps must be at least 1, got 0", [](WorkloadConfig& c) { c.steps = 0; }},
      {"--lr must be a positive number", [](WorkloadConfig& c) { c.lr = INFINITY; }},
      // NaN reached the workers' JSON; 0 printed an MFU of inf%, -1 a negative one.
      {"--peak-flops must be a positive number of FLOP/s per rank",
       [](WorkloadConfig& c) { c.peak_flops = std::numeric_limits<double>::quiet_NaN(); }},
      {"--peak-flops must be a positive number", [](WorkloadConfig& c) { c.peak_flops = 0; }},
      {"--peak-flops must be a positive number", [](WorkloadConfig& c) { c.peak_flops = -1; }},
      {"--blas-threads must be 1 to 1024", [](WorkloadConfig& c) { c.blas_threads = 0; }},
      {"--blas-threads must be 1 to 1024", [](WorkloadConfig& c) { c.blas_threads = 100000; }},
  };
  for (const Case& c : cases) {
    WorkloadConfig config;
    c.set(config);
    const Status status = resolve_workload(config);
    EXPECT_EQ(status.exit_code(), 2) << c.wanted;
    EXPECT_NE(status.message().find(c.wanted), std::string::npos) << status.message();
  }
  WorkloadConfig config;
  config.peak_flops = 989e12;
  EXPECT_TRUE(resolve_workload(config).is_ok());
}

}  // namespace
}  // namespace partrain::runner
