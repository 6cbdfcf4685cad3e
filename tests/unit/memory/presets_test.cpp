#include "memory/presets.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "memory/machine_bounds.h"
#include "memory/parameter_count.h"

namespace partrain::memory {
namespace {

const std::filesystem::path kShare = std::filesystem::path(PARTRAIN_SOURCE_DIR) / "share";

// Every shipped model preset loads, validates, and its count is its published one (within 1%).
TEST(Presets, ModelsMatchTheirPublishedParameterCounts) {
  const auto names = model_preset_names(kShare);
  for (const char* expected : {"gpt3-175b", "llama-2-7b", "llama-2-13b", "llama-2-70b", "llama-3-8b",
                               "llama-3-70b", "llama-3-405b", "bloom-176b", "opt-175b",
                               "gpt-neox-20b", "builtin-gpt", "builtin-mlp"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), expected), names.end()) << expected;
  }
  for (const auto& name : names) {
    auto model = load_model_preset(kShare, name);
    ASSERT_TRUE(model.is_ok()) << model.status().message();
    EXPECT_EQ(model->name, name);
    std::ifstream in(kShare / "models" / (name + ".json"));
    auto published = nlohmann::json::parse(in).value("published_params", 0.0);
    if (published > 0) {
      EXPECT_NEAR(total_params(*model) / published, 1.0, 0.01) << name;
    }
  }
}

TEST(Presets, GpusLoad) {
  for (const char* name : {"a100-40g", "a100-80g", "h100-80g", "h200-141g", "b200", "cpu"}) {
    auto gpu = load_gpu_preset(kShare, name);
    ASSERT_TRUE(gpu.is_ok()) << gpu.status().message();
    EXPECT_GT(gpu->memory_bytes, 1e9);
    EXPECT_GE(gpu->bf16_flops, gpu->fp32_flops) << name;
  }
  EXPECT_DOUBLE_EQ(load_gpu_preset(kShare, "h100-80g")->bf16_flops, 989e12);
}

TEST(Presets, UnknownNameListsThePresets) {
  auto model = load_model_preset(kShare, "llama-9");
  EXPECT_EQ(model.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(model.status().message().find("llama-2-7b"), std::string::npos);
  EXPECT_NE(load_gpu_preset(kShare, "v100").status().message().find("h100-80g"), std::string::npos);
}

// A malformed file is unreadable input (exit 3), naming the file and the field.
TEST(Presets, MalformedFilesNameTheField) {
  auto bad_type = parse_model_json(R"({"name": "x", "layers": "many", "hidden": 8, "heads": 2,
                                      "vocab": 10, "seq": 4})", "x.json");
  EXPECT_EQ(bad_type.status().code(), StatusCode::kUnreadable);
  EXPECT_NE(bad_type.status().message().find("x.json: field 'layers'"), std::string::npos);
  auto missing = parse_model_json(R"({"name": "x", "layers": 2, "heads": 2, "vocab": 10, "seq": 4})", "x.json");
  EXPECT_NE(missing.status().message().find("missing field 'hidden'"), std::string::npos);
  auto unknown = parse_model_json(R"({"name": "x", "layers": 2, "hiden": 8})", "x.json");
  EXPECT_NE(unknown.status().message().find("'hidden'"), std::string::npos);  // hidden is missing
  auto typo = parse_model_json(R"({"name": "x", "layers": 2, "hidden": 8, "heads": 2, "vocab": 10,
                                  "seq": 4, "mlp": "relu2"})", "x.json");
  EXPECT_NE(typo.status().message().find("field 'mlp' must be one of"), std::string::npos);
  auto heads = parse_model_json(R"({"name": "x", "layers": 2, "hidden": 10, "heads": 3, "vocab": 10,
                                   "seq": 4})", "x.json");
  EXPECT_NE(heads.status().message().find("field 'heads'"), std::string::npos);
  EXPECT_EQ(parse_model_json("{", "x.json").status().code(), StatusCode::kUnreadable);
  // Broken JSON: where, as an editor counts (line, column), and what was expected there.
  auto comma = parse_model_json("{\n  \"name\": \"x\",\n  \"layers\": 2,\n}\n", "x.json");
  EXPECT_EQ(comma.status().code(), StatusCode::kUnreadable);
  EXPECT_NE(comma.status().message().find("x.json: not valid JSON at line 4, column 1: "),
            std::string::npos)
      << comma.status().message();
  EXPECT_NE(comma.status().message().find("expected string literal"), std::string::npos)
      << comma.status().message();
  // Well-formed but past a double: refused as input, not thrown (the fuzzer's find).
  auto overflow = parse_model_json(R"({"name": "x", "layers": 4.1e711})", "x.json");
  EXPECT_EQ(overflow.status().code(), StatusCode::kUnreadable);
  EXPECT_NE(overflow.status().message().find("x.json: not valid JSON: number overflow parsing "
                                             "'4.1e711'"),
            std::string::npos)
      << overflow.status().message();
  auto quote = parse_model_json(R"({"name": "x, "layers": 2})", "x.json");
  EXPECT_NE(quote.status().message().find("not valid JSON at line 1, column 15"), std::string::npos)
      << quote.status().message();
  auto dropout = parse_model_json(R"({"name": "x", "layers": 2, "hidden": 8, "heads": 2,
                                     "vocab": 10, "seq": 4, "dropout": 1})",
                                  "x.json");
  EXPECT_NE(dropout.status().message().find("field 'dropout' must be a number in [0, 1)"),
            std::string::npos)
      << dropout.status().message();
  auto gpu = parse_gpu_json(R"({"name": "g", "memory_bytes": -1})", "g.json");
  EXPECT_NE(gpu.status().message().find("field 'memory_bytes'"), std::string::npos);
  auto extra = parse_gpu_json(R"({"name": "g", "memory_bytes": 1, "bf16_flops": 1, "fp32_flops": 1,
      "hbm_bandwidth": 1, "intra_node_bandwidth": 1, "network_bandwidth": 1, "tdp": 700})", "g.json");
  EXPECT_NE(extra.status().message().find("unknown field 'tdp'"), std::string::npos);
}

TEST(Presets, DefaultsForOptionalFields) {
  auto m = parse_model_json(R"({"name": "x", "layers": 2, "hidden": 64, "heads": 4, "vocab": 10,
                               "seq": 4})", "x.json");
  ASSERT_TRUE(m.is_ok());
  EXPECT_EQ(m->kv_heads, 4);
  EXPECT_EQ(m->ffn, 256);
  EXPECT_TRUE(m->tied_embeddings);
  EXPECT_FALSE(m->dropout.has_value());  // unpublished: recommend takes Megatron-LM's default
  EXPECT_EQ(load_model_preset(kShare, "llama-3-8b")->dropout, 0.0);
  EXPECT_EQ(load_model_preset(kShare, "opt-175b")->dropout, 0.1);
  auto g = parse_gpu_json(R"({"name": "g", "memory_bytes": 1, "bf16_flops": 1, "fp32_flops": 1,
      "hbm_bandwidth": 1, "intra_node_bandwidth": 1, "network_bandwidth": 1})", "g.json");
  ASSERT_TRUE(g.is_ok());
  EXPECT_EQ(g->gemm_efficiency, 0.75);
  EXPECT_TRUE(g->overlaps_communication);
}

// A head of its own width ("head_dim"): heads then need not divide hidden; without it they must.
TEST(Presets, HeadDimFreesHeadsFromDividingHidden) {
  auto m = parse_model_json(R"({"name": "x", "layers": 2, "hidden": 96, "heads": 4,
                               "head_dim": 32, "vocab": 10, "seq": 4})",
                            "x.json");
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  EXPECT_EQ(m->head_dim(), 32);
  EXPECT_EQ(m->q_dim(), 128);
  auto refused = parse_model_json(R"({"name": "x", "layers": 2, "hidden": 96, "heads": 5,
                                     "vocab": 10, "seq": 4})",
                                  "x.json");
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("field 'heads' (5) must divide 'hidden' (96), or "
                                            "give 'head_dim'"),
            std::string::npos)
      << refused.status().message();
}

TEST(Presets, RecommenderFieldsOfGpusAndClusterFiles) {
  const std::string base = R"({"name": "g", "memory_bytes": 1, "bf16_flops": 1, "fp32_flops": 1,
      "hbm_bandwidth": 1, "intra_node_bandwidth": 1, "network_bandwidth": 1, )";
  auto g = parse_gpu_json(base + R"("gemm_efficiency": 0.6, "overlaps_communication": false})", "g.json");
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  EXPECT_EQ(g->gemm_efficiency, 0.6);
  EXPECT_FALSE(g->overlaps_communication);
  auto over = parse_gpu_json(base + R"("gemm_efficiency": 1.2})", "g.json");
  EXPECT_EQ(over.status().code(), StatusCode::kUnreadable);
  EXPECT_NE(over.status().message().find("'gemm_efficiency' is a fraction of peak"), std::string::npos);
  auto special = parse_gpu_json(base + R"("special_function_rate": 6.5e7})", "g.json");
  ASSERT_TRUE(special.is_ok()) << special.status().message();
  EXPECT_EQ(special->special_function_rate, 6.5e7);
  EXPECT_EQ(g->special_function_rate, 0);  // unset: memory paces every elementwise kernel
  auto negative = parse_gpu_json(base + R"("special_function_rate": -1})", "g.json");
  EXPECT_EQ(negative.status().code(), StatusCode::kUnreadable);
  EXPECT_NE(negative.status().message().find("special_function_rate"), std::string::npos);
  auto sms = parse_gpu_json(base + R"("sm_count": 108, "collective_sms": 24})", "g.json");
  ASSERT_TRUE(sms.is_ok()) << sms.status().message();
  EXPECT_EQ(sms->collective_sms, 24);
  auto all_sms = parse_gpu_json(base + R"("sm_count": 24, "collective_sms": 24})", "g.json");
  EXPECT_EQ(all_sms.status().code(), StatusCode::kUnreadable);
  EXPECT_NE(all_sms.status().message().find("'collective_sms' (24) must be fewer than 'sm_count'"),
            std::string::npos);

  auto c = parse_cluster_json(R"({"name": "lab", "gpus_per_node": 4, "inter_node_bandwidth": 12.5e9,
                                  "inter_node_latency_us": 15})", "c.json");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->gpus_per_node, 4);
  EXPECT_EQ(c->inter_node_bandwidth, 12.5e9);
  EXPECT_NEAR(c->inter_node_latency_s, 15e-6, 1e-15);
  EXPECT_EQ(c->intra_node_bandwidth, 0);  // unset: the GPU preset's
  auto typo = parse_cluster_json(R"({"name": "lab", "gpu_per_node": 4})", "c.json");
  EXPECT_EQ(typo.status().code(), StatusCode::kUnreadable);
  EXPECT_NE(typo.status().message().find("c.json: unknown field 'gpu_per_node'"), std::string::npos);
  auto nameless = parse_cluster_json(R"({"gpus_per_node": 4})", "c.json");
  EXPECT_NE(nameless.status().message().find("missing field 'name'"), std::string::npos);
}

// gpus_per_node is an int once in the recommender: 2^32 became 0 (a division by zero in the
// report's header, SIGFPE) and 2^31 INT_MIN ("-2147483648 per node"). The file's bound is the
// --gpus-per-node flag's.
TEST(Presets, ClusterGpusPerNodeIsBoundedAsTheFlag) {
  for (const char* value : {"4294967296", "2147483648", "100000", "65537"}) {
    auto c = parse_cluster_json(fmt::format(R"({{"name": "lab", "gpus_per_node": {}}})", value),
                                "c.json");
    EXPECT_EQ(c.status().code(), StatusCode::kUnreadable) << value;
    EXPECT_NE(c.status().message().find("c.json: field 'gpus_per_node' must be at most 65536"),
              std::string::npos)
        << c.status().message();
  }
  auto most = parse_cluster_json(R"({"name": "lab", "gpus_per_node": 65536})", "c.json");
  ASSERT_TRUE(most.is_ok()) << most.status().message();
  EXPECT_EQ(most->gpus_per_node, kMostGpusPerNode);
}

// sm_count is an int in the compute model: 2^32 became 0, "(unmodelled)".
TEST(Presets, GpuSmCountIsBounded) {
  const std::string gpu = R"({"name": "g", "memory_bytes": 1e9, "bf16_flops": 1e12,
      "fp32_flops": 1e11, "hbm_bandwidth": 1e11, "intra_node_bandwidth": 1e10,
      "network_bandwidth": 1e9, "sm_count": 4294967296})";
  auto g = parse_gpu_json(gpu, "g.json");
  EXPECT_EQ(g.status().code(), StatusCode::kUnreadable);
  EXPECT_NE(g.status().message().find("g.json: field 'sm_count' must be at most 65536"),
            std::string::npos)
      << g.status().message();
}

}  // namespace
}  // namespace partrain::memory
