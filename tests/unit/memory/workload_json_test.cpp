#include "memory/workload_json.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace partrain::memory {
namespace {

// A dp 2 x tp 2 x pp 2 gpt with an uneven split, resolved, as the launcher writes it.
nlohmann::json written() {
  TrainingLayout l;
  l.tp = 2;
  l.pp = 2;
  l.zero = 1;
  l.micro_batch = 2;
  l.pp_split = {3, 1};
  l.recompute = Recompute::kSelective;
  const WorkloadModel model{4, 64, 4, 16, 128, 256};
  auto r = resolve_layout(l, workload_model_config(WorkloadKind::kGpt, model), {},
                          LayoutWorld{8, false});
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  nlohmann::json config = {{"steps", 3}};
  write_workload_setup(WorkloadKind::kGpt, model, *r, config);
  return config;
}

StatusOr<WorkloadSetup> read(const nlohmann::json& config, ConfigReading reading) {
  JsonFields fields(config, "PARTRAIN_WORKLOAD_CONFIG", StatusCode::kInvalidArgument);
  auto setup = read_workload_setup(fields, reading);
  if (setup.is_ok() && reading == ConfigReading::kStrict) {
    int steps = 0;
    RETURN_IF_ERROR(fields.integer("steps", steps));  // the caller's own field
    RETURN_IF_ERROR(fields.no_unknown_fields());
  }
  return setup;
}

TEST(WorkloadJson, WhatIsWrittenReadsBackStrictly) {
  const nlohmann::json config = written();
  EXPECT_EQ(config["layout"]["dp"], 2);  // resolved: dp and the global batch are written
  EXPECT_EQ(config["layout"]["global_batch"], 4);
  EXPECT_EQ(config["recompute"], "selective");
  auto setup = read(config, ConfigReading::kStrict);
  ASSERT_TRUE(setup.is_ok()) << setup.status().message();
  EXPECT_EQ(setup->kind, WorkloadKind::kGpt);
  EXPECT_EQ(setup->model.ffn, 256);
  EXPECT_EQ(setup->world.ranks, 8);
  EXPECT_TRUE(setup->world.dp_given);
  EXPECT_EQ(setup->layout.dp, 2);
  EXPECT_EQ(setup->layout.tp, 2);
  EXPECT_EQ(setup->layout.zero, 1);
  EXPECT_EQ(setup->layout.global_batch, 4);
  EXPECT_EQ(setup->layout.pp_split, (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(setup->layout.recompute, Recompute::kSelective);
}

// A mixture of experts' fields go with the model, under the presets' names; a dense model's
// config has none of them (older traces read as before).
TEST(WorkloadJson, TheExpertsReadBackWithTheModel) {
  EXPECT_FALSE(written()["model"].contains("experts"));
  TrainingLayout l;
  l.ep = 2;
  WorkloadModel model{4, 64, 4, 16, 128, 256};
  model.moe = {.experts = 4, .top_k = 2, .expert_ffn = 96, .shared_experts = 1,
               .dense_layers = 1, .capacity_factor = 1.25};
  auto r = resolve_layout(l, workload_model_config(WorkloadKind::kGpt, model), {},
                          LayoutWorld{2, false});
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  nlohmann::json config = {{"steps", 3}};
  write_workload_setup(WorkloadKind::kGpt, model, *r, config);
  EXPECT_EQ(config["model"]["top_k"], 2);
  EXPECT_EQ(config["model"]["moe_ffn"], 96);
  EXPECT_EQ(config["layout"]["ep"], 2);
  auto setup = read(config, ConfigReading::kStrict);
  ASSERT_TRUE(setup.is_ok()) << setup.status().message();
  EXPECT_EQ(setup->model.moe.experts, 4);
  EXPECT_EQ(setup->model.moe.top_k, 2);
  EXPECT_EQ(setup->model.moe.expert_ffn, 96);
  EXPECT_EQ(setup->model.moe.shared_experts, 1);
  EXPECT_EQ(setup->model.moe.dense_layers, 1);
  EXPECT_EQ(setup->model.moe.capacity_factor, 1.25);
  EXPECT_EQ(setup->layout.ep, 2);
  config["model"]["top_k"] = "2";
  EXPECT_NE(read(config, ConfigReading::kStrict).status().message().find("model.top_k"),
            std::string::npos);
}

// A worker never falls back to a default: each field that is not the launcher's is named.
TEST(WorkloadJson, StrictReadingNamesTheField) {
  struct Case {
    void (*edit)(nlohmann::json&);
    const char* message;
  };
  const Case cases[] = {
      {[](nlohmann::json& j) { j["layout"]["schedule"] = "1fb1"; },
       "PARTRAIN_WORKLOAD_CONFIG: field 'layout.schedule' must be one of gpipe, 1f1b, interleaved "
       "(got \"1fb1\")"},
      {[](nlohmann::json& j) { j["recompute"] = "ful"; },
       "PARTRAIN_WORKLOAD_CONFIG: field 'recompute' must be one of none, selective, full (got "
       "\"ful\")"},
      {[](nlohmann::json& j) { j["workload"] = "gtp"; },
       "field 'workload' must be one of gpt, mlp"},
      {[](nlohmann::json& j) { j["layout"]["tp"] = "2"; },
       "field 'layout.tp' must be an integer (got \"2\")"},
      {[](nlohmann::json& j) { j["layout"]["tp"] = 2.5; }, "field 'layout.tp' must be an integer"},
      {[](nlohmann::json& j) { j["layout"]["sp"] = 1; }, "field 'layout.sp' must be true or false"},
      {[](nlohmann::json& j) { j["model"]["hidden"] = 1e300; },
       "field 'model.hidden' must be an integer"},
      {[](nlohmann::json& j) { j["layout"].erase("zero"); }, "missing field 'layout.zero'"},
      {[](nlohmann::json& j) { j.erase("recompute"); }, "missing field 'recompute'"},
      {[](nlohmann::json& j) { j["layout"]["etp"] = 2; }, "unknown field 'layout.etp'"},
      {[](nlohmann::json& j) { j["model"]["kv_heads"] = 2; }, "unknown field 'model.kv_heads'"},
      {[](nlohmann::json& j) { j["precison"] = "fp32"; }, "unknown field 'precison'"},
  };
  for (const Case& c : cases) {
    nlohmann::json config = written();
    c.edit(config);
    auto setup = read(config, ConfigReading::kStrict);
    ASSERT_FALSE(setup.is_ok()) << c.message;
    EXPECT_EQ(setup.status().exit_code(), 2);
    EXPECT_NE(setup.status().message().find(c.message), std::string::npos)
        << setup.status().message();
  }
}

// The runs.config of a trace before this codec: no dp, cp or global batch (what the world
// leaves), recompute at the top, the launcher's extra fields. Read as written then.
TEST(WorkloadJson, LenientReadingTakesOlderConfigs) {
  const nlohmann::json old = nlohmann::json::parse(
      R"({"backend":"gloo","blas_threads":1,"comm":"gloo","data":"","device":"cpu","json":false,)"
      R"("layout":{"bucket_bytes":25000000,"micro_batch":2,"pp":1,"pp_split":[],"schedule":"1f1b",)"
      R"("sp":false,"tp":2,"vpp":1,"world":4,"zero":0},"lr":0.001,"model":{"ffn":1024,"heads":8,)"
      R"("hidden":256,"layers":4,"seq":128,"vocab":512},"nproc_per_node":4,"precision":"fp32",)"
      R"("recompute":"none","seed":1234,"steps":12,"workload":"gpt"})");
  EXPECT_FALSE(read(old, ConfigReading::kStrict).is_ok());
  auto setup = read(old, ConfigReading::kLenient);
  ASSERT_TRUE(setup.is_ok()) << setup.status().message();
  EXPECT_FALSE(setup->world.dp_given);
  EXPECT_EQ(setup->world.ranks, 4);
  EXPECT_FALSE(setup->layout.global_batch.has_value());
  auto r = resolve_layout(setup->layout,
                          workload_model_config(setup->kind, setup->model), {}, setup->world);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->layout.dp, 2);
  EXPECT_EQ(r->global_batch, 4);
  // Absent fields are their defaults; a present one of the wrong type is still an error.
  auto minimal = read(nlohmann::json::parse(
                          R"({"workload":"mlp","model":{"layers":2,"hidden":8},"layout":{"world":1}})"),
                      ConfigReading::kLenient);
  ASSERT_TRUE(minimal.is_ok()) << minimal.status().message();
  EXPECT_EQ(minimal->model.ffn, 32);  // the GPT's 4 x hidden
  EXPECT_EQ(minimal->layout.schedule, PipelineSchedule::kOneFOneB);
  EXPECT_FALSE(read(nlohmann::json::parse(
                        R"({"workload":"gpt","model":{"layers":2,"hidden":8},"layout":{"world":"1"}})"),
                    ConfigReading::kLenient)
                   .is_ok());
  EXPECT_FALSE(read(nlohmann::json::parse(R"({"workload":"gpt","model":{"layers":2}})"),
                    ConfigReading::kLenient)
                   .is_ok());
}

}  // namespace
}  // namespace partrain::memory
