#include "runner/workload/workload_config.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
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

// The launcher's config reads back as it was resolved, the layout carried typed: the worker
// trains what the launcher checked.
TEST(WorkloadConfigTest, TheWorkersConfigIsTheLaunchersResolvedOne) {
  WorkloadConfig config;
  config.kind = WorkloadKind::kMlp;
  config.world = {4, false};
  config.layout.tp = 2;
  config.layout.zero = 2;
  config.layout.recompute = Recompute::kFull;
  config.layout.micro_batch = 2;
  config.precision = Precision::kBf16Fp32Grad;
  config.bucket_bytes = 1000;
  ASSERT_TRUE(resolve_workload(config).is_ok());
  auto back = workload_from_json(workload_to_json(config));
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(back->kind, WorkloadKind::kMlp);
  EXPECT_EQ(back->resolved.layout.dp, 2);
  EXPECT_EQ(back->resolved.layout.tp, 2);
  EXPECT_EQ(back->resolved.layout.zero, 2);
  EXPECT_EQ(back->resolved.layout.recompute, Recompute::kFull);
  EXPECT_EQ(back->resolved.global_batch, 4);
  EXPECT_EQ(back->resolved.chunk_layers, config.resolved.chunk_layers);
  EXPECT_EQ(back->precision, Precision::kBf16Fp32Grad);
  EXPECT_EQ(back->bucket_bytes, 1000);
  EXPECT_EQ(back->model.heads, 0);  // the MLP has none
}

// A config that is not the launcher's exactly is refused naming the field (exit 2), never read
// as a default: a misspelled precision trained in fp32, a misspelled schedule in 1F1B.
TEST(WorkloadConfigTest, AWorkerRefusesAFieldThatIsNotTheLaunchers) {
  WorkloadConfig config;
  config.world = {2, false};
  config.layout.pp = 2;
  ASSERT_TRUE(resolve_workload(config).is_ok());
  const nlohmann::json good = nlohmann::json::parse(workload_to_json(config));
  const std::pair<const char*, const char*> cases[] = {
      {"/precision", "field 'precision' must be one of fp32, bf16-mixed, bf16-fp32grad (got \"fp23\")"},
      {"/layout/schedule", "field 'layout.schedule' must be one of gpipe, 1f1b, interleaved"},
      {"/layout/zero", "layout.zero=7 is not 0, 1, 2 or 3"},
      {"/layout/dp", "layout.dp x layout.tp x layout.pp x layout.cp = 3 x 1 x 2 x 1 = 6 is not "
                     "layout.world 2"},
      {"/steps", "field 'steps' must be an integer"},
      {"/faults", "field 'faults' must be a list of strings"},
  };
  const std::map<std::string, nlohmann::json> values = {
      {"/precision", "fp23"}, {"/layout/schedule", "1fb1"}, {"/layout/zero", 7},
      {"/layout/dp", 3},      {"/steps", "10"},             {"/faults", "slow:rank=0"}};
  for (const auto& [pointer, message] : cases) {
    nlohmann::json bad = good;
    bad[nlohmann::json::json_pointer(pointer)] = values.at(pointer);
    auto decoded = workload_from_json(bad.dump());
    ASSERT_FALSE(decoded.is_ok()) << pointer;
    EXPECT_EQ(decoded.status().exit_code(), 2);
    EXPECT_EQ(decoded.status().message().rfind("PARTRAIN_WORKLOAD_CONFIG: ", 0), 0u)
        << decoded.status().message();
    EXPECT_NE(decoded.status().message().find(message), std::string::npos)
        << decoded.status().message();
  }
  EXPECT_TRUE(workload_from_json(good.dump()).is_ok());
  EXPECT_FALSE(workload_from_json("[1, 2]").is_ok());
}

}  // namespace
}  // namespace partrain::runner
