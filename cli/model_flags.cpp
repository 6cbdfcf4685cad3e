#include "cli/model_flags.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "cli/command.h"
#include "core/share_dir.h"
#include "memory/hf_cache.h"

namespace partrain::cli {
namespace {

// The dimension flags given on the command line override a preset's (or define a model).
void apply_dimensions(const ModelFlags& f, memory::ModelConfig& m) {
  // Dimensions that follow others unless given: multi-head attention keeps one KV head per
  // head, and a GPT MLP stays 4 x hidden wide.
  const bool multi_head = m.kv_heads == m.heads;
  const bool gpt_width = m.mlp == memory::MlpKind::kGelu && m.ffn == 4 * m.hidden;
  const std::pair<int64_t, int64_t*> dims[] = {{f.layers, &m.layers}, {f.hidden, &m.hidden},
                                               {f.heads, &m.heads},   {f.kv_heads, &m.kv_heads},
                                               {f.ffn, &m.ffn},       {f.vocab, &m.vocab},
                                               {f.seq, &m.seq}};
  for (const auto& [value, field] : dims) {
    if (value > 0) *field = value;
  }
  if (multi_head && f.kv_heads == 0) m.kv_heads = m.heads;
  if (f.head_dim > 0) m.explicit_head_dim = f.head_dim;
  if (gpt_width && f.ffn == 0) m.ffn = 4 * m.hidden;
  if (f.swiglu) m.mlp = memory::MlpKind::kSwiglu;
  if (f.rmsnorm) m.norm = memory::NormKind::kRmsNorm;
  if (f.no_bias) m.bias = false;
  if (f.untied_embeddings) m.tied_embeddings = false;
  if (auto position = memory::parse_position(f.position)) m.position = *position;
  apply_expert_flags(f.moe, m.ffn, m.moe);
}

// A model from dimensions only: GPT defaults; SwiGLU's ffn as LLaMA rounds 8h/3 up to 256.
StatusOr<memory::ModelConfig> dimensions_model(const ModelFlags& f) {
  const std::pair<const char*, int64_t> needed[] = {{"--layers", f.layers},
                                                    {"--hidden", f.hidden},
                                                    {"--heads", f.heads},
                                                    {"--vocab", f.vocab},
                                                    {"--seq", f.seq}};
  std::vector<std::string> missing;
  for (const auto& [flag, value] : needed) {
    if (value == 0) missing.push_back(flag);
  }
  if (!missing.empty()) {
    // Some dimensions given: name the ones still missing, not the whole list again.
    const std::string which = missing.size() < std::size(needed)
                                  ? fmt::format(" ({} missing)", fmt::join(missing, " "))
                                  : std::string();
    return invalid_argument(
        "give --model PRESET, --model-file FILE, --params N, or the dimensions "
        "--layers --hidden --heads --vocab --seq{} (and optionally --kv-heads "
        "--ffn --swiglu --rmsnorm --position --untied-embeddings)",
        which);
  }
  memory::ModelConfig m = memory::gpt_model(f.layers, f.hidden, f.heads, f.vocab, f.seq);
  m.name = "custom";
  apply_dimensions(f, m);
  if (f.kv_heads == 0) m.kv_heads = m.heads;
  if (f.ffn == 0 && f.swiglu) m.ffn = (8 * m.hidden / 3 + 255) / 256 * 256;  // Touvron 2023 code
  return m;
}

// A local file or directory given to --model, which takes names, not paths.
Status local_path_given(const std::string& name) {
  std::error_code error;
  return invalid_argument(
      "--model '{}' is a local {}: --model takes a preset or a Hugging Face repository id "
      "(ORG/NAME) in the hub cache; use --model-file {}",
      name, std::filesystem::is_directory(name, error) ? "directory" : "file", name);
}

// The config.json --model names in the hub cache (ORG/NAME, or a NAME cached as models--NAME,
// such as gpt2); empty for a preset (or an unknown name, which the preset lookup refuses).
StatusOr<std::filesystem::path> model_flag_config(const std::string& name,
                                                  const std::filesystem::path& share) {
  std::error_code error;
  const bool local = std::filesystem::exists(name, error);
  if (name.ends_with(".json") || name.starts_with('/') || name.starts_with('.')) {
    return local_path_given(name);
  }
  if (memory::is_hf_repo_id(name)) {
    StatusOr<std::filesystem::path> cached = memory::find_hf_cached_config(name);
    if (!cached.is_ok() && local) return local_path_given(name);
    return cached;
  }
  const std::vector<std::string> presets = memory::model_preset_names(share);
  if (std::find(presets.begin(), presets.end(), name) != presets.end()) {
    return std::filesystem::path();
  }
  if (std::filesystem::exists(memory::hf_cache_repo_dir(name), error)) {
    return memory::find_hf_cached_config(name);
  }
  if (local) return local_path_given(name);
  return std::filesystem::path();
}

}  // namespace

// The flags naming the model's source, given together, would leave one of them unused: refused,
// naming both.
Status check_one_model_source(const ModelFlags& f) {
  std::vector<std::string> given;
  if (!f.model.empty()) given.push_back("--model " + f.model);
  if (!f.model_file.empty()) given.push_back("--model-file " + f.model_file);
  if (f.params > 0) given.push_back("--params");
  if (given.size() > 1) {
    return invalid_argument(
        "{} and {} both give the model: pass one (the dimension flags, such as "
        "--layers or --seq, change a preset's or a file's)",
        given[0], given[1]);
  }
  if (f.params > 0) {
    const char* dimension = first_given({{"--layers", f.layers > 0},
                                         {"--hidden", f.hidden > 0},
                                         {"--heads", f.heads > 0},
                                         {"--kv-heads", f.kv_heads > 0},
                                         {"--head-dim", f.head_dim > 0},
                                         {"--ffn", f.ffn > 0},
                                         {"--vocab", f.vocab > 0},
                                         {"--seq", f.seq > 0},
                                         {"--swiglu", f.swiglu},
                                         {"--rmsnorm", f.rmsnorm},
                                         {"--no-bias", f.no_bias},
                                         {"--untied-embeddings", f.untied_embeddings},
                                         {"--position", !f.position.empty()}});
    if (const char* flag = dimension != nullptr ? dimension : first_expert_flag(f.moe)) {
      return invalid_argument(
          "--params gives a bare parameter count (model states only), which "
          "{} cannot change: pass the dimensions without --params, or "
          "--params alone",
          flag);
    }
  }
  return Status::ok();
}

StatusOr<memory::ModelConfig> resolve_model(const ModelFlags& f) {
  RETURN_IF_ERROR(check_one_model_source(f));
  if (f.params > 0) return memory::bare_model(f.params);
  memory::ModelConfig m;
  std::filesystem::path file = f.model_file;
  if (!f.model.empty()) {
    ASSIGN_OR_RETURN(auto share, find_share_dir());
    ASSIGN_OR_RETURN(file, model_flag_config(f.model, share));
    if (file.empty()) {
      ASSIGN_OR_RETURN(m, memory::load_model_preset(share, f.model));
    }
  }
  if (!file.empty()) {
    ASSIGN_OR_RETURN(m, memory::load_model_file(file));
  } else if (f.model.empty()) {
    return dimensions_model(f);
  }
  if (f.kv_heads > 0 && m.attention == memory::AttentionKind::kLatent) {
    return invalid_argument(
        "--kv-heads {} would change nothing: {}'s latent attention gives every head its keys and "
        "values (from a kv_lora_rank latent): drop --kv-heads",
        f.kv_heads, m.name);
  }
  apply_dimensions(f, m);
  if (m.seq == 0 && m.architecture == memory::Architecture::kTransformer) {
    // A Hugging Face config of a model without a position table (BLOOM) has no length.
    return make_status(StatusCode::kUnreadable,
                       "{} gives no sequence length (no max_position_embeddings): pass --seq",
                       file.string());
  }
  return m;
}

DropoutChoice choose_dropout(const std::optional<double>& flag, const memory::ModelConfig& model,
                             DropoutChoice otherwise) {
  if (flag) return {*flag, "--dropout"};
  if (model.dropout) return {*model.dropout, "the model's published recipe"};
  return otherwise;
}

StatusOr<memory::GpuSpec> resolve_gpu(const GpuFlags& f) {
  if (!f.gpu.empty() && !f.gpu_file.empty()) {
    return invalid_argument("--gpu {} and --gpu-file {} both give the GPU: pass one", f.gpu,
                            f.gpu_file);
  }
  if (!f.gpu_file.empty()) return memory::load_gpu_file(f.gpu_file);
  ASSIGN_OR_RETURN(auto share, find_share_dir());
  return memory::load_gpu_preset(share, f.gpu.empty() ? kDefaultGpu : f.gpu);
}

// "a, b or c" of the presets installed with this partrain, for a flag's help: the user picks one
// without looking in share/.
std::string preset_list(std::vector<std::string> (*names_in)(const std::filesystem::path&)) {
  StatusOr<std::filesystem::path> share = find_share_dir();
  if (!share.is_ok()) return "none found (set PARTRAIN_SHARE_DIR)";
  const std::vector<std::string> names = names_in(*share);
  std::string list;
  for (size_t i = 0; i < names.size(); ++i) {
    list += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  }
  return list;
}

void add_model_flags(CLI::App& cmd, ModelFlags& f) {
  CLI::Option* model = cmd.add_option(
      "--model", f.model,
      "Model preset (share/partrain/models/*.json): " + preset_list(memory::model_preset_names) +
          "; or a Hugging Face repository id (ORG/NAME) whose config.json is in the local hub "
          "cache (HF_HUB_CACHE, HF_HOME/hub, ~/.cache/huggingface/hub)");
  CLI::Option* model_file = cmd.add_option(
      "--model-file", f.model_file,
      "Model JSON file: the presets' format, or a Hugging Face config.json "
      "(llama, mistral, phi3, qwen2, qwen3, qwen2_moe, qwen3_moe, gemma, gemma2, gemma3_text, "
      "mixtral, gpt_oss, deepseek_v2/v3, gpt_neox, gpt2, opt, bloom; a vision-language "
      "config's text_config)");
  CLI::Option* params =
      cmd.add_option("--params", f.params, "A bare parameter count (model states only), e.g. 7.5e9")
          ->check(positive_number());
  env_yields_to_alternatives({model, model_file, params});
  cmd.add_option("--layers", f.layers, "Transformer layers (overrides the preset's)")
      ->check(positive_number());
  cmd.add_option("--hidden", f.hidden, "Hidden size h")->check(positive_number());
  cmd.add_option("--heads", f.heads, "Attention heads a")->check(positive_number());
  cmd.add_option("--kv-heads", f.kv_heads, "Key/value heads (grouped-query attention)")
      ->check(positive_number());
  cmd.add_option("--head-dim", f.head_dim,
                 "Each attention head's width, where it is not hidden / heads (Gemma, Qwen3, "
                 "Mistral-Nemo: the attention computes with heads x head-dim)")
      ->check(positive_number());
  cmd.add_option("--ffn", f.ffn,
                 "MLP inner size (default 4h; with --swiglu LLaMA's 8h/3 rounded to 256)")
      ->check(positive_number());
  cmd.add_option("--vocab", f.vocab, "Vocabulary size V")->check(positive_number());
  cmd.add_option("--seq", f.seq, "Sequence length s (overrides the preset's)")
      ->check(positive_number());
  cmd.add_flag("--swiglu", f.swiglu, "LLaMA-style SwiGLU MLP (3 matrices h x ffn)");
  cmd.add_flag("--rmsnorm", f.rmsnorm, "RMSNorm instead of LayerNorm");
  cmd.add_flag("--no-bias", f.no_bias, "Linear layers without biases (LLaMA)");
  cmd.add_flag("--untied-embeddings", f.untied_embeddings, "A separate LM head (V x h)");
  cmd.add_option("--position", f.position, "Positions: learned (s x h weights), rotary or alibi")
      ->check(CLI::IsMember({"learned", "rotary", "alibi"}));
  add_expert_flags(cmd, f.moe);
}

void add_gpu_flags(CLI::App& cmd, GpuFlags& f, const std::string& what) {
  CLI::Option* gpu = cmd.add_option("--gpu", f.gpu,
                                    "GPU preset (" + preset_list(memory::gpu_preset_names) +
                                        "; share/partrain/gpus/*.json): " + what)
                         ->default_str(kDefaultGpu);
  CLI::Option* gpu_file =
      cmd.add_option("--gpu-file", f.gpu_file, "GPU JSON file (the presets' format)");
  env_yields_to_alternatives({gpu, gpu_file});
}

}  // namespace partrain::cli
