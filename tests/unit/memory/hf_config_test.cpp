// Hugging Face config.json files as models (memory/hf_config.h): the published configs of models
// partrain has presets for read as those presets, field by field and in their parameter counts;
// what ModelConfig cannot express is refused naming the field. The configs below are the
// models' config.json files on the Hugging Face hub, as published (fields that do not bear on
// the model's size left in, as a user's file has them).
#include "memory/hf_config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <tuple>

#include "memory/parameter_count.h"
#include "memory/presets.h"
#include "tests/support/scratch_dir.h"

namespace partrain::memory {
namespace {

const std::filesystem::path kShare = std::filesystem::path(PARTRAIN_SOURCE_DIR) / "share";

// meta-llama/Meta-Llama-3-8B
constexpr const char* kLlama3_8b = R"({"architectures": ["LlamaForCausalLM"],
  "attention_bias": false, "attention_dropout": 0.0, "bos_token_id": 128000,
  "eos_token_id": 128001, "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
  "intermediate_size": 14336, "max_position_embeddings": 8192, "model_type": "llama",
  "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
  "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": null, "rope_theta": 500000.0,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.40.0.dev0",
  "use_cache": true, "vocab_size": 128256})";

// mistralai/Mixtral-8x7B-v0.1
constexpr const char* kMixtral = R"({"architectures": ["MixtralForCausalLM"],
  "attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
  "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
  "max_position_embeddings": 32768, "model_type": "mixtral", "num_attention_heads": 32,
  "num_experts_per_tok": 2, "num_hidden_layers": 32, "num_key_value_heads": 8,
  "num_local_experts": 8, "output_router_logits": false, "rms_norm_eps": 1e-05,
  "rope_theta": 1000000.0, "router_aux_loss_coef": 0.02, "sliding_window": null,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.36.0.dev0",
  "use_cache": true, "vocab_size": 32000})";

// deepseek-ai/DeepSeek-V3 (its quantization_config and auto_map left out)
constexpr const char* kDeepSeekV3 = R"({"architectures": ["DeepseekV3ForCausalLM"],
  "attention_bias": false, "attention_dropout": 0.0, "aux_loss_alpha": 0.001,
  "bos_token_id": 0, "eos_token_id": 1, "ep_size": 1, "first_k_dense_replace": 3,
  "hidden_act": "silu", "hidden_size": 7168, "initializer_range": 0.02,
  "intermediate_size": 18432, "kv_lora_rank": 512, "max_position_embeddings": 163840,
  "model_type": "deepseek_v3", "moe_intermediate_size": 2048, "moe_layer_freq": 1,
  "n_group": 8, "n_routed_experts": 256, "n_shared_experts": 1, "norm_topk_prob": true,
  "num_attention_heads": 128, "num_experts_per_tok": 8, "num_hidden_layers": 61,
  "num_key_value_heads": 128, "num_nextn_predict_layers": 1, "q_lora_rank": 1536,
  "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "rms_norm_eps": 1e-06,
  "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0,
                   "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096,
                   "type": "yarn"},
  "rope_theta": 10000, "routed_scaling_factor": 2.5, "scoring_func": "sigmoid",
  "seq_aux": true, "tie_word_embeddings": false, "topk_group": 4, "topk_method": "noaux_tc",
  "torch_dtype": "bfloat16", "transformers_version": "4.33.1", "use_cache": true,
  "v_head_dim": 128, "vocab_size": 129280})";

// EleutherAI/gpt-neox-20b
constexpr const char* kNeox20b = R"({"architectures": ["GPTNeoXForCausalLM"],
  "bos_token_id": 0, "eos_token_id": 0, "hidden_act": "gelu_fast", "hidden_size": 6144,
  "initializer_range": 0.02, "intermediate_size": 24576, "layer_norm_eps": 1e-05,
  "max_position_embeddings": 2048, "model_type": "gpt_neox", "num_attention_heads": 64,
  "num_hidden_layers": 44, "rotary_emb_base": 10000, "rotary_pct": 0.25,
  "tie_word_embeddings": false, "torch_dtype": "float16", "transformers_version": "4.24.0.dev0",
  "use_cache": true, "use_parallel_residual": true, "vocab_size": 50432})";

// bigscience/bloom
constexpr const char* kBloom = R"({"apply_residual_connection_post_layernorm": false,
  "attention_dropout": 0.0, "architectures": ["BloomForCausalLM"],
  "attention_softmax_in_fp32": true, "pad_token_id": 3, "bos_token_id": 1, "eos_token_id": 2,
  "hidden_dropout": 0.0, "initializer_range": 0.02, "layer_norm_epsilon": 1e-05,
  "masked_softmax_fusion": true, "model_type": "bloom", "n_embed": 14336, "n_layer": 70,
  "num_attention_heads": 112, "pretraining_tp": 4, "slow_but_exact": false,
  "transformers_version": "4.21.0", "use_cache": true, "vocab_size": 250880})";

StatusOr<ModelConfig> read(const char* text) {
  return model_from_hf_config(nlohmann::json::parse(text), "config.json");
}

// Every field that makes the model what it is (not its name, source or sequence length).
auto architecture(const ModelConfig& m) {
  return std::tuple(m.layers, m.hidden, m.heads, m.kv_heads, m.ffn, m.vocab, m.mlp, m.norm,
                    m.position, m.tied_embeddings, m.bias, m.embedding_norm, m.attention);
}
auto latent_and_experts(const ModelConfig& m) {
  return std::tuple(m.latent.q_lora_rank, m.latent.kv_lora_rank, m.latent.qk_nope_dim,
                    m.latent.qk_rope_dim, m.latent.v_head_dim, m.moe.experts, m.moe.top_k,
                    m.moe.expert_ffn, m.moe.shared_experts, m.moe.dense_layers);
}

void expect_same_model(const ModelConfig& got, const ModelConfig& preset) {
  EXPECT_EQ(architecture(got), architecture(preset));
  EXPECT_EQ(latent_and_experts(got), latent_and_experts(preset));
  EXPECT_DOUBLE_EQ(total_params(got), total_params(preset));
  EXPECT_DOUBLE_EQ(active_params(got), active_params(preset));
}

TEST(HfConfig, PublishedConfigsReadAsThePresets) {
  const std::pair<const char*, const char*> models[] = {{kLlama3_8b, "llama-3-8b"},
                                                        {kMixtral, "mixtral-8x7b"},
                                                        {kDeepSeekV3, "deepseek-v3"},
                                                        {kNeox20b, "gpt-neox-20b"},
                                                        {kBloom, "bloom-176b"}};
  for (const auto& [text, name] : models) {
    SCOPED_TRACE(name);
    const StatusOr<ModelConfig> got = read(text);
    ASSERT_TRUE(got.is_ok()) << got.status().message();
    const StatusOr<ModelConfig> preset = load_model_preset(kShare, name);
    ASSERT_TRUE(preset.is_ok()) << preset.status().message();
    expect_same_model(*got, *preset);
  }
  // DeepSeek-V3's multi-token-prediction module (14B of Hugging Face's 685B) is said to be left
  // out, as every other part partrain does not count.
  const StatusOr<ModelConfig> v3 = read(kDeepSeekV3);
  ASSERT_TRUE(v3.is_ok());
  EXPECT_NE(std::find(v3->notes.begin(), v3->notes.end(),
                      "its 1 multi-token-prediction module (num_nextn_predict_layers) is not "
                      "counted"),
            v3->notes.end());
}

// Models without a preset, against their published parameter counts (within 1%): Phi-3-mini
// 3.8B (microsoft/Phi-3-mini-128k-instruct), Gemma 2B 2.51B (google/gemma-2b), Qwen3-8B 8.2B
// (Qwen/Qwen3-8B), their configs' size fields as published.
TEST(HfConfig, OtherPublishedConfigsCountTheirPublishedParameters) {
  const std::pair<const char*, double> models[] = {
      {R"({"model_type": "phi3", "hidden_size": 3072, "intermediate_size": 8192,
           "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32,
           "vocab_size": 32064, "max_position_embeddings": 131072,
           "original_max_position_embeddings": 4096, "hidden_act": "silu",
           "rope_scaling": {"type": "longrope", "long_factor": [1.0], "short_factor": [1.0]},
           "tie_word_embeddings": false, "attention_dropout": 0.0, "resid_pdrop": 0.0})",
       3.8e9},
      {R"({"model_type": "gemma", "hidden_size": 2048, "intermediate_size": 16384,
           "num_attention_heads": 8, "num_key_value_heads": 1, "head_dim": 256,
           "num_hidden_layers": 18, "vocab_size": 256000, "max_position_embeddings": 8192,
           "hidden_act": "gelu", "attention_bias": false, "attention_dropout": 0.0})",
       2.51e9},
      {R"({"model_type": "qwen3", "hidden_size": 4096, "intermediate_size": 12288,
           "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
           "num_hidden_layers": 36, "vocab_size": 151936, "max_position_embeddings": 40960,
           "tie_word_embeddings": false, "attention_bias": false, "attention_dropout": 0.0})",
       8.2e9}};
  for (const auto& [text, published] : models) {
    const StatusOr<ModelConfig> model = read(text);
    ASSERT_TRUE(model.is_ok()) << model.status().message();
    EXPECT_NEAR(total_params(*model) / published, 1.0, 0.01) << text;
  }
  EXPECT_EQ(read(models[0].first)->seq, 4096);  // Phi-3's original length, beside rope_scaling
  EXPECT_TRUE(read(models[1].first)->tied_embeddings);  // Gemma ties unless it says otherwise
}

// Heads of their own width (head_dim other than hidden_size / num_attention_heads) and Qwen's
// mixtures, against their published parameter counts (within 1%; the mixtures' active ones
// too): Qwen3-0.6B 0.6B (Qwen/Qwen3-0.6B: 0.44B without embeddings), Qwen3-4B 4.0B, Gemma-7B
// 8.54B (google/gemma-7b), Gemma-2-9B 9.24B (google/gemma-2-9b), Mistral-Nemo 12.2B
// (mistralai/Mistral-Nemo-Base-2407), Qwen3-30B-A3B 30.5B with 3.3B active, Qwen1.5-MoE-A2.7B
// 14.3B with 2.7B active; their configs' size fields as published.
TEST(HfConfig, HeadsOfTheirOwnWidthAndQwenMixturesCountTheirPublishedParameters) {
  struct Published {
    const char* config;
    double total, active;
  };
  const Published models[] = {
      {R"({"model_type": "qwen3", "hidden_size": 1024, "intermediate_size": 3072,
           "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128,
           "num_hidden_layers": 28, "vocab_size": 151936, "max_position_embeddings": 40960,
           "tie_word_embeddings": true, "attention_bias": false})",
       0.6e9, 0.6e9},
      {R"({"model_type": "qwen3", "hidden_size": 2560, "intermediate_size": 9728,
           "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
           "num_hidden_layers": 36, "vocab_size": 151936, "max_position_embeddings": 40960,
           "tie_word_embeddings": true, "attention_bias": false})",
       4.0e9, 4.0e9},
      {R"({"model_type": "gemma", "hidden_size": 3072, "intermediate_size": 24576,
           "num_attention_heads": 16, "num_key_value_heads": 16, "head_dim": 256,
           "num_hidden_layers": 28, "vocab_size": 256000, "max_position_embeddings": 8192,
           "hidden_act": "gelu", "attention_bias": false})",
       8.54e9, 8.54e9},
      {R"({"model_type": "gemma2", "hidden_size": 3584, "intermediate_size": 14336,
           "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 256,
           "num_hidden_layers": 42, "vocab_size": 256000, "max_position_embeddings": 8192,
           "sliding_window": 4096, "hidden_activation": "gelu_pytorch_tanh",
           "query_pre_attn_scalar": 256, "attn_logit_softcapping": 50.0,
           "final_logit_softcapping": 30.0})",
       9.24e9, 9.24e9},
      {R"({"model_type": "mistral", "hidden_size": 5120, "intermediate_size": 14336,
           "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
           "num_hidden_layers": 40, "vocab_size": 131072, "max_position_embeddings": 1024000,
           "sliding_window": null, "tie_word_embeddings": false})",
       12.2e9, 12.2e9},
      {R"({"model_type": "qwen3_moe", "hidden_size": 2048, "intermediate_size": 6144,
           "moe_intermediate_size": 768, "num_experts": 128, "num_experts_per_tok": 8,
           "decoder_sparse_step": 1, "mlp_only_layers": [], "num_attention_heads": 32,
           "num_key_value_heads": 4, "head_dim": 128, "num_hidden_layers": 48,
           "vocab_size": 151936, "max_position_embeddings": 40960, "tie_word_embeddings": false,
           "use_sliding_window": false, "sliding_window": null})",
       30.5e9, 3.3e9},
      {R"({"model_type": "qwen2_moe", "hidden_size": 2048, "intermediate_size": 5632,
           "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632,
           "num_experts": 60, "num_experts_per_tok": 4, "decoder_sparse_step": 1,
           "num_attention_heads": 16, "num_key_value_heads": 16, "num_hidden_layers": 24,
           "vocab_size": 151936, "max_position_embeddings": 8192, "tie_word_embeddings": false,
           "use_sliding_window": false, "sliding_window": 32768})",
       14.3e9, 2.7e9}};
  for (const Published& published : models) {
    const StatusOr<ModelConfig> model = read(published.config);
    ASSERT_TRUE(model.is_ok()) << model.status().message();
    EXPECT_NEAR(total_params(*model) / published.total, 1.0, 0.01) << published.config;
    EXPECT_NEAR(active_params(*model) / published.active, 1.0, 0.02) << published.config;
  }
  // The attention computes with heads x head_dim: Qwen3-0.6B's queries are 2,048 wide over a
  // hidden size of 1,024; Gemma-7B's 4,096 over 3,072.
  EXPECT_EQ(read(models[0].config)->q_dim(), 2048);
  EXPECT_EQ(read(models[2].config)->q_dim(), 4096);
  EXPECT_EQ(attention_widths(*read(models[2].config)).out, 4096);
}

// gpt-oss (openai/gpt-oss-120b, -20b): biases on every linear layer, 128 or 32 experts of 2,880,
// heads of 64 over a hidden size of 2,880; 116.83B and 20.91B as published, 5.13B and 3.61B
// active as OpenAI counts them, without the input embedding (which partrain counts as active).
TEST(HfConfig, GptOssCountsItsPublishedParameters) {
  const std::string big = R"({"architectures": ["GptOssForCausalLM"], "attention_bias": true,
      "attention_dropout": 0.0, "experts_per_token": 4, "head_dim": 64, "hidden_act": "silu",
      "hidden_size": 2880, "initial_context_length": 4096, "intermediate_size": 2880,
      "max_position_embeddings": 131072, "model_type": "gpt_oss", "num_attention_heads": 64,
      "num_experts_per_tok": 4, "num_key_value_heads": 8, "rope_scaling": {"beta_fast": 32.0,
      "beta_slow": 1.0, "factor": 32.0, "original_max_position_embeddings": 4096,
      "rope_type": "yarn", "truncate": false}, "sliding_window": 128, "swiglu_limit": 7.0,
      "tie_word_embeddings": false, "vocab_size": 201088, )";
  const std::tuple<std::string, double, double> models[] = {
      {big + R"("num_hidden_layers": 36, "num_local_experts": 128})", 116.83e9, 5.13e9},
      {big + R"("num_hidden_layers": 24, "num_local_experts": 32})", 20.91e9, 3.61e9}};
  for (const auto& [config, total, active] : models) {
    const StatusOr<ModelConfig> model = read(config.c_str());
    ASSERT_TRUE(model.is_ok()) << model.status().message();
    EXPECT_NEAR(total_params(*model) / total, 1.0, 0.002);
    const double input_embedding = 201088.0 * 2880;
    EXPECT_NEAR((active_params(*model) - input_embedding) / active, 1.0, 0.005);
    EXPECT_EQ(model->seq, 4096);         // YaRN's original, the length it was pre-trained at
    EXPECT_EQ(model->notes.size(), 2u);  // sinks and router biases; the sliding window
  }
}

// A vision-language wrapper's language model is read from its text_config and named after the
// wrapper; the vision encoder is left out and a note says so. Mistral-Small-3.1-24B's language
// model is 23.6B.
TEST(HfConfig, AVisionLanguageWrappersTextConfigIsTheModel) {
  const StatusOr<ModelConfig> model = read(R"({"architectures":
      ["Mistral3ForConditionalGeneration"], "model_type": "mistral3",
      "_name_or_path": "mistralai/Mistral-Small-3.1-24B-Base-2503",
      "text_config": {"model_type": "mistral", "head_dim": 128, "hidden_size": 5120,
        "intermediate_size": 32768, "num_attention_heads": 32, "num_hidden_layers": 40,
        "num_key_value_heads": 8, "vocab_size": 131072, "max_position_embeddings": 131072,
        "sliding_window": null},
      "vision_config": {"model_type": "pixtral", "hidden_size": 1024}})");
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  EXPECT_NEAR(total_params(*model) / 23.6e9, 1.0, 0.01);
  EXPECT_EQ(model->name, "Mistral-Small-3.1-24B-Base-2503");
  ASSERT_EQ(model->notes.size(), 1u);  // all its fields given: no defaults said
  EXPECT_NE(model->notes.front().find("its vision encoder and projector are not"),
            std::string::npos)
      << model->notes.front();
}

// transformers v4 saved a wrapper's text_config as a diff against its text model class's
// defaults, which fill it back when it loads: the published configs of google/gemma-3-27b-it
// and gemma-3-4b-it (their text_configs have no vocab_size, the 4B's no heads or head_dim
// either) and llava-hf/llava-1.5-7b-hf (only vocab_size and max_position_embeddings given),
// against transformers 5.24's parameter counts on the meta device: 27,009,346,304,
// 3,880,263,168 and 6,738,939,904 (the language models'). partrain leaves out Gemma 3's norms
// after attention and the MLP and its q/k norms, 2 h + 2 head_dim a block, which its notes name.
TEST(HfConfig, AWrappersTextConfigIsFilledFromItsClassDefaults) {
  const std::string gemma3 = R"({"architectures": ["Gemma3ForConditionalGeneration"],
      "boi_token_index": 255999, "eoi_token_index": 256000, "eos_token_id": [1, 106],
      "image_token_index": 262144, "initializer_range": 0.02, "mm_tokens_per_image": 256,
      "model_type": "gemma3", "torch_dtype": "bfloat16", "transformers_version": "4.50.0.dev0",
      "vision_config": {"hidden_size": 1152, "image_size": 896, "intermediate_size": 4304,
        "model_type": "siglip_vision_model", "num_attention_heads": 16, "num_hidden_layers": 27,
        "patch_size": 14, "vision_use_head": false}, )";
  const std::string gemma3_27b = gemma3 + R"("text_config": {"head_dim": 128,
      "hidden_size": 5376, "intermediate_size": 21504, "model_type": "gemma3_text",
      "num_attention_heads": 32, "num_hidden_layers": 62, "num_key_value_heads": 16,
      "query_pre_attn_scalar": 168, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
      "sliding_window": 1024}})";
  const std::string gemma3_4b = gemma3 + R"("text_config": {"hidden_size": 2560,
      "intermediate_size": 10240, "model_type": "gemma3_text", "num_hidden_layers": 34,
      "rope_scaling": {"factor": 8.0, "rope_type": "linear"}, "sliding_window": 1024}})";
  const std::string llava = R"({"_name_or_path": "llava-hf/llava-1.5-7b-hf",
      "architectures": ["LlavaForConditionalGeneration"], "ignore_index": -100,
      "image_token_index": 32000, "model_type": "llava", "pad_token_id": 32001,
      "projector_hidden_act": "gelu", "text_config": {"_name_or_path": "lmsys/vicuna-7b-v1.5",
        "architectures": ["LlamaForCausalLM"], "max_position_embeddings": 4096,
        "model_type": "llama", "rms_norm_eps": 1e-05, "torch_dtype": "float16",
        "vocab_size": 32064},
      "tie_word_embeddings": false, "torch_dtype": "float16",
      "transformers_version": "4.36.0.dev0", "vision_config": {"hidden_size": 1024,
        "image_size": 336, "intermediate_size": 4096, "model_type": "clip_vision_model",
        "num_attention_heads": 16, "num_hidden_layers": 24, "patch_size": 14,
        "projection_dim": 768, "vocab_size": 32000}, "vision_feature_layer": -2,
      "vision_feature_select_strategy": "default", "vocab_size": 32064})";
  struct Published {
    std::string config;
    double transformers_count;
    bool gemma3_norms;
    std::string defaults;
  };
  const Published models[] = {
      {gemma3_27b, 27'009'346'304, true,
       "its text_config leaves fields at transformers' Gemma3TextConfig defaults (vocab_size "
       "262208, max_position_embeddings 131072)"},
      {gemma3_4b, 3'880'263'168, true,
       "its text_config leaves fields at transformers' Gemma3TextConfig defaults (vocab_size "
       "262208, num_attention_heads 8, num_key_value_heads 4, head_dim 256, "
       "max_position_embeddings 131072)"},
      {llava, 6'738'939'904, false,
       "its text_config leaves fields at transformers' LlamaConfig defaults (hidden_size 4096, "
       "intermediate_size 11008, num_hidden_layers 32, num_attention_heads 32)"}};
  for (const Published& published : models) {
    const StatusOr<ModelConfig> model = read(published.config.c_str());
    ASSERT_TRUE(model.is_ok()) << model.status().message();
    const double uncounted =
        published.gemma3_norms
            ? static_cast<double>(model->layers * (2 * model->hidden + 2 * model->head_dim()))
            : 0;
    EXPECT_DOUBLE_EQ(total_params(*model) + uncounted, published.transformers_count)
        << published.defaults;
    ASSERT_GE(model->notes.size(), 2u);
    EXPECT_EQ(model->notes[1], published.defaults);
  }
  EXPECT_EQ(read(gemma3_4b.c_str())->name, "config");  // no _name_or_path: the file's
  EXPECT_TRUE(read(gemma3_4b.c_str())->tied_embeddings);
  EXPECT_EQ(read(llava.c_str())->name, "llava-1.5-7b-hf");
  EXPECT_EQ(read(llava.c_str())->seq, 4096);
  // A text_config without model_type is the wrapper's default text model (LLaVA's llama).
  const StatusOr<ModelConfig> untyped =
      read(R"({"model_type": "llava", "text_config": {"vocab_size": 32064}})");
  ASSERT_TRUE(untyped.is_ok()) << untyped.status().message();
  EXPECT_EQ(untyped->layers, 32);
  // A language model partrain has no defaults for names the field it lacks, and the fix.
  const StatusOr<ModelConfig> partial = read(
      R"({"model_type": "some_vlm", "text_config": {"model_type": "qwen3", "hidden_size": 64}})");
  ASSERT_FALSE(partial.is_ok());
  EXPECT_NE(partial.status().message().find(
                "without 'text_config.num_hidden_layers', which partrain knows no default of "
                "for this language model: add it to text_config, from the language model's own "
                "config.json"),
            std::string::npos)
      << partial.status().message();
  // A language model partrain does not read is refused by its own type, not the wrapper's.
  const StatusOr<ModelConfig> refused =
      read(R"({"model_type": "llava", "text_config": {"model_type": "falcon"}})");
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find(
                "llava config's language model, text_config.model_type \"falcon\", is not one "
                "partrain reads"),
            std::string::npos)
      << refused.status().message();
  const StatusOr<ModelConfig> untyped_unknown =
      read(R"({"model_type": "some_vlm", "text_config": {"hidden_size": 64}})");
  ASSERT_FALSE(untyped_unknown.is_ok());
  EXPECT_NE(untyped_unknown.status().message().find(
                "some_vlm config whose text_config has no model_type: add text_config.model_type"),
            std::string::npos)
      << untyped_unknown.status().message();
}

// The length a model was pre-trained with, not the context it was extended to; none without a
// position table.
TEST(HfConfig, SequenceIsThePretrainingLength) {
  EXPECT_EQ(read(kLlama3_8b)->seq, 8192);
  EXPECT_EQ(read(kDeepSeekV3)->seq, 4096);  // YaRN's original, not 163,840
  EXPECT_EQ(read(kBloom)->seq, 0);
  EXPECT_EQ(read(kMixtral)->dropout, 0.0);
  EXPECT_FALSE(read(kNeox20b)->dropout.has_value());  // the config does not say
}

// transformers v5 writes v4's rope_scaling as rope_parameters (meta-llama/Llama-3.1-8B saved by
// transformers 5.24): its original length is the pre-training one, not the 131,072 it extends
// to. Gemma 3's v5 config nests it by layer type: the full attention's counts.
TEST(HfConfig, TransformersV5RopeParametersKeepThePretrainingLength) {
  const StatusOr<ModelConfig> llama = read(R"({"architectures": ["LlamaForCausalLM"],
      "attention_bias": false, "attention_dropout": 0.0, "bos_token_id": 1, "dtype": "bfloat16",
      "eos_token_id": 2, "head_dim": 128, "hidden_act": "silu", "hidden_size": 4096,
      "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 131072,
      "mlp_bias": false, "model_type": "llama", "num_attention_heads": 32,
      "num_hidden_layers": 32, "num_key_value_heads": 8, "pad_token_id": null,
      "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_parameters": {"factor": 8.0,
      "high_freq_factor": 4.0, "low_freq_factor": 1.0, "original_max_position_embeddings": 8192,
      "rope_theta": 500000.0, "rope_type": "llama3"}, "tie_word_embeddings": false,
      "transformers_version": "5.24.0", "use_cache": true, "vocab_size": 128256})");
  ASSERT_TRUE(llama.is_ok()) << llama.status().message();
  EXPECT_EQ(llama->seq, 8192);
  const std::string gemma3 = R"({"model_type": "gemma3_text", "hidden_size": 64,
      "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
      "intermediate_size": 128, "vocab_size": 100, "max_position_embeddings": 131072,
      "rope_parameters": {)";
  const std::pair<std::string, int64_t> nestings[] = {
      {R"("sliding_attention": {"rope_type": "yarn", "original_max_position_embeddings": 4096},
          "full_attention": {"rope_type": "yarn", "original_max_position_embeddings": 32768}}})",
       32768},
      {R"("sliding_attention": {"rope_type": "yarn", "original_max_position_embeddings": 4096},
          "chunked_attention": {"original_max_position_embeddings": 16384}}})",
       16384},
      {R"("sliding_attention": {"rope_type": "default"},
          "full_attention": {"rope_type": "linear", "factor": 8.0}}})",
       131072}};
  for (const auto& [nesting, seq] : nestings) {
    const StatusOr<ModelConfig> model = read((gemma3 + nesting).c_str());
    ASSERT_TRUE(model.is_ok()) << model.status().message();
    EXPECT_EQ(model->seq, seq) << nesting;
  }
  const StatusOr<ModelConfig> refused = read((gemma3 + R"("full_attention":
      {"original_max_position_embeddings": "32k"}}})")
                                                 .c_str());
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find(
                "'rope_parameters.full_attention.original_max_position_embeddings' must be"),
            std::string::npos)
      << refused.status().message();
}

TEST(HfConfig, WhatTheModelCannotExpressIsRefusedByField) {
  auto refused = [](const std::string& text, const std::string& field) {
    const StatusOr<ModelConfig> got = read(text.c_str());
    ASSERT_FALSE(got.is_ok()) << text;
    EXPECT_EQ(got.status().code(), StatusCode::kUnreadable);
    EXPECT_NE(got.status().message().find(field), std::string::npos) << got.status().message();
    EXPECT_NE(got.status().message().find("config.json: "), std::string::npos);
  };
  refused(R"({"model_type": "falcon", "hidden_size": 4544})",
          "model_type \"falcon\" is not one partrain reads (it reads llama, mistral, qwen2");
  refused(R"({"model_type": "opt", "hidden_size": 1024, "num_hidden_layers": 24,
              "num_attention_heads": 16, "ffn_dim": 4096, "vocab_size": 50272,
              "word_embed_proj_dim": 512})",
          "field 'word_embed_proj_dim' (512) differs from hidden_size (1024)");
  refused(R"({"model_type": "llama", "hidden_size": "4096"})",
          "field 'hidden_size' must be an integer from 1 to 1099511627776 (got \"4096\")");
  refused(R"({"model_type": "llama", "hidden_size": 4096})", "without 'num_hidden_layers'");
  refused(R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
              "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100,
              "rope_scaling": {"original_max_position_embeddings": 1e30}})",
          "field 'rope_scaling.original_max_position_embeddings' must be an integer from 1 to");
  refused(R"({"model_type": "mixtral", "hidden_size": 64, "num_hidden_layers": 2,
              "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100,
              "num_local_experts": 2, "num_experts_per_tok": 3})",
          "field 'num_experts_per_tok' must be an integer from 1 to 2 (got 3)");
  // Layers are walked one by one: a count no model has is refused, not walked for hours.
  refused(R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 1000000000000,
              "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100})",
          "field 'num_hidden_layers' must be an integer from 1 to 100000 (got 1000000000000)");
  refused(R"({"model_type": "gpt2", "n_embd": 64, "n_layer": 100001, "n_head": 4,
              "vocab_size": 100})",
          "field 'n_layer' must be an integer from 1 to 100000 (got 100001)");
  const std::string qwen3_moe = R"({"model_type": "qwen3_moe", "hidden_size": 64,
      "num_hidden_layers": 4, "num_attention_heads": 4, "intermediate_size": 128,
      "moe_intermediate_size": 32, "num_experts": 8, "num_experts_per_tok": 2,
      "vocab_size": 100, )";
  refused(qwen3_moe + R"("decoder_sparse_step": 2})", "field 'decoder_sparse_step' is 2");
  refused(qwen3_moe + R"("mlp_only_layers": [1, 3]})",
          "field 'mlp_only_layers' ([1,3]) is not the first blocks");
  refused(R"({"model_type": "qwen2_moe", "hidden_size": 64, "num_hidden_layers": 4,
              "num_attention_heads": 4, "intermediate_size": 128, "moe_intermediate_size": 32,
              "shared_expert_intermediate_size": 48, "num_experts": 8,
              "num_experts_per_tok": 2, "vocab_size": 100})",
          "field 'shared_expert_intermediate_size' (48) is not a multiple of");
}

// A quantized checkpoint (its quantization_config) is counted at the training width, and a note
// says so with the width it stores: mxfp4 gpt-oss (its experts only), AWQ 4-bit, fp8
// DeepSeek-V3, bitsandbytes 4-bit.
TEST(HfConfig, AQuantizedCheckpointIsNoted) {
  const std::string llama = R"({"model_type": "llama", "hidden_size": 64,
      "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128,
      "vocab_size": 100, "quantization_config": )";
  const std::pair<const char*, const char*> quantizations[] = {
      {R"({"modules_to_not_convert": ["model.layers.*.self_attn", "lm_head"],
           "quant_method": "mxfp4"}})",
       "its checkpoint is quantized (quantization_config: mxfp4, 4.25 bits a weight (4-bit "
       "values, an 8-bit scale a 32), except model.layers.*.self_attn, lm_head): partrain "
       "counts every weight at the --precision width training keeps, so an --inference "
       "estimate of the quantized weights is too large"},
      {R"({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": true}})",
       "(quantization_config: awq, 4 bits a weight)"},
      {R"({"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
           "weight_block_size": [128, 128]}})",
       "(quantization_config: fp8, 8 bits a weight)"},
      {R"({"quant_method": "bitsandbytes", "load_in_4bit": true}})",
       "(quantization_config: bitsandbytes, 4 bits a weight)"},
      {R"({"quant_method": "compressed-tensors"}})", "(quantization_config: compressed-tensors)"}};
  for (const auto& [quantization, note] : quantizations) {
    const StatusOr<ModelConfig> model = read((llama + quantization).c_str());
    ASSERT_TRUE(model.is_ok()) << model.status().message();
    ASSERT_EQ(model->notes.size(), 1u) << quantization;
    EXPECT_NE(model->notes.front().find(note), std::string::npos) << model->notes.front();
  }
  const StatusOr<ModelConfig> plain = read(kLlama3_8b);
  EXPECT_TRUE(plain->notes.empty());
}

// Qwen's mixtures: mlp_only_layers that lead are the dense blocks; Qwen2-MoE's shared expert
// is counted as routed experts' widths.
TEST(HfConfig, QwenMixturesKeepTheirDenseBlocksAndSharedExpert) {
  const StatusOr<ModelConfig> qwen3 = read(R"({"model_type": "qwen3_moe", "hidden_size": 64,
      "num_hidden_layers": 4, "num_attention_heads": 4, "intermediate_size": 128,
      "moe_intermediate_size": 32, "num_experts": 8, "num_experts_per_tok": 2,
      "mlp_only_layers": [0, 1], "vocab_size": 100})");
  ASSERT_TRUE(qwen3.is_ok()) << qwen3.status().message();
  EXPECT_EQ(qwen3->moe.dense_layers, 2);
  EXPECT_EQ(qwen3->moe.shared_experts, 0);
  EXPECT_EQ(qwen3->ffn, 128);  // the dense blocks' MLP
  const StatusOr<ModelConfig> qwen2 = read(R"({"model_type": "qwen2_moe", "hidden_size": 64,
      "num_hidden_layers": 4, "num_attention_heads": 4, "intermediate_size": 128,
      "moe_intermediate_size": 32, "shared_expert_intermediate_size": 128, "num_experts": 8,
      "num_experts_per_tok": 2, "vocab_size": 100})");
  ASSERT_TRUE(qwen2.is_ok()) << qwen2.status().message();
  EXPECT_EQ(qwen2->moe.shared_experts, 4);
  EXPECT_EQ(qwen2->moe.dense_layers, 0);
  const std::vector<std::string> notes = {
      "its q/k/v biases (768 parameters) are not counted",
      "its shared expert's gate (256 parameters) is not counted"};
  EXPECT_EQ(qwen2->notes, notes);
}

// A sliding window is not modelled (a longer sequence is costed as full attention), and a note
// says so; no window, or one the config turns off (Qwen2's use_sliding_window false), says nothing.
TEST(HfConfig, ASlidingWindowCostedAsFullAttentionIsStated) {
  const std::string mistral = R"({"model_type": "mistral", "hidden_size": 64,
      "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128,
      "vocab_size": 100, "max_position_embeddings": 8192, )";
  const StatusOr<ModelConfig> windowed = read((mistral + R"("sliding_window": 4096})").c_str());
  ASSERT_TRUE(windowed.is_ok()) << windowed.status().message();
  EXPECT_EQ(windowed->notes,
            std::vector<std::string>{"its sliding window (4096 keys) is not modelled: a longer "
                                     "sequence is costed as full attention"});
  for (const char* tail :
       {R"("sliding_window": null})", R"("sliding_window": 4096, "use_sliding_window": false})"}) {
    const StatusOr<ModelConfig> plain = read((mistral + tail).c_str());
    ASSERT_TRUE(plain.is_ok()) << plain.status().message();
    EXPECT_TRUE(plain->notes.empty()) << tail;
  }
}

// A config.json without model_type is said to be one, with the fix, not asked for a preset's
// "name".
TEST(HfConfig, AConfigWithoutModelTypeIsToldSo) {
  const StatusOr<ModelConfig> got = parse_model_json(
      R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_hidden_layers": 2})",
      "config.json");
  ASSERT_FALSE(got.is_ok());
  EXPECT_EQ(got.status().code(), StatusCode::kUnreadable);
  EXPECT_NE(got.status().message().find("looks like a Hugging Face config.json but has no "
                                        "\"model_type\""),
            std::string::npos)
      << got.status().message();
  EXPECT_NE(got.status().message().find("llama, mistral"), std::string::npos);
}

// The checkpoint's other JSON files, given for its config.json, are named as what they are: a
// weight index read "missing field 'name'", as if it were a broken preset.
TEST(HfConfig, ACheckpointsOtherFilesAreNamedNotReadAsPresets) {
  const std::pair<const char*, const char*> files[] = {
      {R"({"metadata": {"total_size": 16060522496}, "weight_map": {"lm_head.weight": "a"}})",
       "is a file of a Hugging Face checkpoint (a safetensors weight index) but not its "
       "config.json: give the config.json beside it"},
      {R"({"bos_token_id": 128000, "eos_token_id": 128001, "transformers_version": "4.40.0"})",
       "(its generation settings)"},
      {R"({"tokenizer_class": "PreTrainedTokenizerFast", "added_tokens_decoder": {}})",
       "(a tokenizer's settings)"},
  };
  for (const auto& [text, message] : files) {
    const StatusOr<ModelConfig> got = parse_model_json(text, "x.json");
    ASSERT_FALSE(got.is_ok()) << text;
    EXPECT_EQ(got.status().code(), StatusCode::kUnreadable);
    EXPECT_NE(got.status().message().find(message), std::string::npos) << got.status().message();
  }
}

// Through the file loader, as --model-file reads it: a config.json is told from a preset by its
// model_type, and named after its directory (the repository's, in a hub cache).
TEST(HfConfig, TheFileLoaderTellsAConfigFromAPresetAndNamesIt) {
  testing::ScratchDir scratch;
  const std::filesystem::path snapshot = scratch.path() / "models--meta-llama--Meta-Llama-3-8B" /
                                         "snapshots" / "8cde5ca8" / "config.json";
  std::filesystem::create_directories(snapshot.parent_path());
  std::ofstream(snapshot) << kLlama3_8b;
  const StatusOr<ModelConfig> model = load_model_file(snapshot);
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  EXPECT_EQ(model->name, "Meta-Llama-3-8B");
  EXPECT_EQ(model->layers, 32);
  EXPECT_NE(model->source.find("model_type llama"), std::string::npos) << model->source;
  // The snapshot's directory stands for its config.json; a directory without one is refused.
  const StatusOr<ModelConfig> from_dir = load_model_file(snapshot.parent_path());
  ASSERT_TRUE(from_dir.is_ok()) << from_dir.status().message();
  EXPECT_EQ(from_dir->name, "Meta-Llama-3-8B");
  const StatusOr<ModelConfig> empty = load_model_file(scratch.path());
  EXPECT_EQ(empty.status().code(), StatusCode::kUnreadable);
  EXPECT_NE(empty.status().message().find("is a directory without a config.json"),
            std::string::npos)
      << empty.status().message();
}

}  // namespace
}  // namespace partrain::memory
