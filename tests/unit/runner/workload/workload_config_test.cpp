#include "runner/workload/workload_config.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

namespace partrain::runner {
namespace {

// A change to the default config that resolve_workload refuses (exit 2), naming `wanted`.
struct Case {
  const char* wanted;
  void (*set)(WorkloadConfig&);
};

template <size_t N>
void expect_refused(const Case (&cases)[N]) {
  for (const Case& c : cases) {
    WorkloadConfig config;
    c.set(config);
    const Status status = resolve_workload(config);
    EXPECT_EQ(status.exit_code(), 2) << c.wanted;
    EXPECT_NE(status.message().find(c.wanted), std::string::npos) << status.message();
  }
}

// Each refusal names its flag and the value given, before any rank starts.
TEST(WorkloadConfigTest, RefusesValuesTheRunCannotUseNamingTheFlag) {
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
      {"--cpu-bind must be none or core, got 'socket'",
       [](WorkloadConfig& c) { c.cpu_bind = "socket"; }},
      {"--cpu-bind core binds the ranks of a CPU workload, and this one runs on CUDA",
       [](WorkloadConfig& c) {
         c.cpu_bind = "core";
         c.device = "cuda";
       }},
  };
  expect_refused(cases);
  WorkloadConfig config;
  config.peak_flops = 989e12;
  EXPECT_TRUE(resolve_workload(config).is_ok());
}

// A mixture of experts the run cannot use is refused before any rank starts, naming the rule:
// memory's (top-k, the flags of a dense model, ep and the experts) and the runner's own (the
// experts split over tp, the CPU in fp32 only).
TEST(WorkloadConfigTest, RefusesMixturesTheRunCannotUse) {
  auto moe = [](WorkloadConfig& c) {
    c.model.moe = {.experts = 4, .top_k = 2, .expert_ffn = 64};
    c.world = {4, false};
  };
  const Case cases[] = {
      {"top_k (5) must be between 1 and experts (4)",
       [](WorkloadConfig& c) { c.model.moe = {.experts = 4, .top_k = 5, .expert_ffn = 64}; }},
      {"top_k is for a mixture of experts: give experts too",
       [](WorkloadConfig& c) { c.model.moe.top_k = 2; }},
      {"dense_layers (4) must be fewer than the 4 layers",
       [](WorkloadConfig& c) {
         c.model.moe = {.experts = 4, .top_k = 1, .expert_ffn = 64, .dense_layers = 4};
       }},
      {"--ep 3 must divide the 4 routed experts",
       [](WorkloadConfig& c) {
         c.model.moe = {.experts = 4, .top_k = 1, .expert_ffn = 64};
         c.world = {3, false};
         c.layout.ep = 3;
       }},
      {"--ep 4 must divide --dp 2: expert-parallel ranks are drawn from the data-parallel ones",
       [](WorkloadConfig& c) {
         c.model.moe = {.experts = 4, .top_k = 1, .expert_ffn = 64};
         c.world = {4, false};
         c.layout.tp = 2;
         c.layout.ep = 4;
       }},
      {"--ep 2 shards a mixture of experts' experts: model 'builtin-gpt' has none",
       [](WorkloadConfig& c) {
         c.world = {2, false};
         c.layout.ep = 2;
       }},
      {"--moe-ffn 66 is not divisible by --tp 4",
       [](WorkloadConfig& c) {
         c.model.moe = {.experts = 4, .top_k = 1, .expert_ffn = 66};
         c.world = {4, false};
         c.layout.tp = 4;
       }},
      {"the mixture of experts runs on the CPU only",
       [](WorkloadConfig& c) {
         c.model.moe = {.experts = 4, .top_k = 1, .expert_ffn = 64};
         c.device = "cuda";
       }},
      {"the mixture of experts trains in fp32 only",
       [](WorkloadConfig& c) {
         c.model.moe = {.experts = 4, .top_k = 1, .expert_ffn = 64};
         c.precision = Precision::kBf16Mixed;
       }},
      {"--experts applies to --workload gpt only",
       [](WorkloadConfig& c) {
         c.kind = WorkloadKind::kMlp;
         c.model.moe = {.experts = 4, .top_k = 1, .expert_ffn = 64};
       }},
  };
  expect_refused(cases);
  WorkloadConfig config;
  moe(config);
  config.layout.ep = 2;
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
  config.cpu_bind = "core";
  ASSERT_TRUE(resolve_workload(config).is_ok());
  auto back = workload_from_json(workload_to_json(config));
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(back->kind, WorkloadKind::kMlp);
  EXPECT_EQ(back->cpu_bind, "core");
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
