#include "memory/presets.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/input_file.h"
#include "core/json_fields.h"
#include "memory/experts_json.h"
#include "memory/hf_config.h"
#include "memory/machine_bounds.h"

namespace partrain::memory {
namespace {

using nlohmann::json;

template <typename... Args>
Status unreadable(fmt::format_string<Args...> format, Args&&... args) {
  return make_status(StatusCode::kUnreadable, format, std::forward<Args>(args)...);
}

// Where a parse error is, as an editor shows it: line and column (1-based) of byte `offset`
// (nlohmann's parse_error::byte: 1-based, the byte it stopped at).
std::string text_position(std::string_view text, size_t offset) {
  const size_t end = std::min(offset > 0 ? offset - 1 : 0, text.size());
  size_t line = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < end; ++i) {
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  return fmt::format("line {}, column {}", line, end - line_start + 1);
}

StatusOr<json> parse_object(std::string_view text, std::string_view origin) {
  json object;
  try {
    object = json::parse(text);
  } catch (const json::parse_error& error) {
    // what(): "[json.exception.parse_error.101] parse error at line 3, column 5: syntax error
    // while parsing object - unexpected '}'; expected string literal": the part after the
    // position says what was wrong.
    std::string_view why = error.what();
    const size_t colon = why.find(": ");
    why = colon == std::string_view::npos ? std::string_view() : why.substr(colon + 2);
    return unreadable("{}: not valid JSON at {}{}{}", origin, text_position(text, error.byte),
                      why.empty() ? "" : ": ", why);
  } catch (const json::exception& error) {
    // Well-formed but not representable, such as a number past a double ("1e999"): what():
    // "[json.exception.out_of_range.406] number overflow parsing '1e999'".
    std::string_view why = error.what();
    const size_t bracket = why.find("] ");
    if (bracket != std::string_view::npos) why.remove_prefix(bracket + 2);
    return unreadable("{}: not valid JSON: {}", origin, why);
  }
  if (!object.is_object()) return unreadable("{}: expected a JSON object {{...}}", origin);
  return object;
}

std::vector<std::string> json_stems(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    if (entry.path().extension() == ".json") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "" : ", ") + name;
  return out;
}

Status read_dimensions(JsonFields& r, ModelConfig& m) {
  const bool transformer = m.architecture == Architecture::kTransformer;
  RETURN_IF_ERROR(r.integer("layers", m.layers));
  RETURN_IF_ERROR(r.integer("hidden", m.hidden));
  RETURN_IF_ERROR(r.integer("heads", m.heads, 1, transformer));
  RETURN_IF_ERROR(r.integer("kv_heads", m.kv_heads, 1, false));
  RETURN_IF_ERROR(r.integer("head_dim", m.explicit_head_dim, 1, false));
  RETURN_IF_ERROR(r.integer("ffn", m.ffn, 1, false));
  RETURN_IF_ERROR(r.integer("vocab", m.vocab, 1, transformer));
  RETURN_IF_ERROR(r.integer("seq", m.seq, 1, transformer));
  if (m.kv_heads == 0) m.kv_heads = m.heads;
  if (m.ffn == 0) m.ffn = 4 * m.hidden;
  return Status::ok();
}

// Latent attention's sizes (LatentAttention), read with "attention": "mla".
Status read_latent(JsonFields& r, ModelConfig& m) {
  RETURN_IF_ERROR(r.choice("attention", m.attention, parse_attention, "mha, mla"));
  const bool latent = m.attention == AttentionKind::kLatent;
  RETURN_IF_ERROR(r.integer("q_lora_rank", m.latent.q_lora_rank, 0, false));
  RETURN_IF_ERROR(r.integer("kv_lora_rank", m.latent.kv_lora_rank, 1, latent));
  RETURN_IF_ERROR(r.integer("qk_nope_dim", m.latent.qk_nope_dim, 1, latent));
  RETURN_IF_ERROR(r.integer("qk_rope_dim", m.latent.qk_rope_dim, 1, latent));
  return r.integer("v_head_dim", m.latent.v_head_dim, 1, latent);
}

}  // namespace

StatusOr<ModelConfig> parse_model_json(std::string_view text, std::string_view origin) {
  ASSIGN_OR_RETURN(json object, parse_object(text, origin));
  if (is_hf_config(object)) {
    return model_from_hf_config(object, origin);
  }
  if (object.is_object() && !object.contains("layers") &&
      (object.contains("architectures") || object.contains("num_hidden_layers") ||
       object.contains("hidden_size"))) {
    return unreadable(
        "{}: looks like a Hugging Face config.json but has no \"model_type\", which says how to "
        "read it: add the one its architecture is ({}), or write the model in the presets' format",
        origin, fmt::join(hf_model_types(), ", "));
  }
  // A checkpoint's files beside config.json: a weight index or a tokenizer's or generation's
  // settings, given for the config.
  if (object.is_object() && !object.contains("layers") &&
      (object.contains("weight_map") || object.contains("eos_token_id") ||
       object.contains("tokenizer_class") || object.contains("added_tokens"))) {
    return unreadable(
        "{}: is a file of a Hugging Face checkpoint ({}) but not its config.json: give the "
        "config.json beside it (or the checkpoint's directory)",
        origin,
        object.contains("weight_map") ? "a safetensors weight index"
        : object.contains("tokenizer_class") || object.contains("added_tokens")
            ? "a tokenizer's settings"
            : "its generation settings");
  }
  JsonFields r(object, std::string(origin), StatusCode::kUnreadable);
  ModelConfig m;
  RETURN_IF_ERROR(r.string("name", m.name, true));
  RETURN_IF_ERROR(r.choice("architecture", m.architecture, parse_architecture, "transformer, mlp"));
  RETURN_IF_ERROR(read_dimensions(r, m));
  RETURN_IF_ERROR(r.choice("mlp", m.mlp, parse_mlp, "gelu, swiglu"));
  RETURN_IF_ERROR(r.choice("norm", m.norm, parse_norm, "layernorm, rmsnorm"));
  RETURN_IF_ERROR(r.choice("position", m.position, parse_position, "learned, rotary, alibi"));
  RETURN_IF_ERROR(r.boolean("tied_embeddings", m.tied_embeddings));
  RETURN_IF_ERROR(r.boolean("bias", m.bias));
  RETURN_IF_ERROR(r.boolean("embedding_norm", m.embedding_norm));
  RETURN_IF_ERROR(read_latent(r, m));
  RETURN_IF_ERROR(read_experts(r, m.moe));
  if (r.has("dropout")) {
    double dropout = 0;
    RETURN_IF_ERROR(r.fraction("dropout", dropout, true));
    m.dropout = dropout;
  }
  RETURN_IF_ERROR(r.string("source", m.source));
  double published = 0;  // documentation, checked against the count by the tests
  RETURN_IF_ERROR(r.positive_number("published_params", published, false));
  RETURN_IF_ERROR(r.positive_number("published_active_params", published, false));
  RETURN_IF_ERROR(r.no_unknown_fields());
  if (m.architecture == Architecture::kTransformer) {
    Status valid = m.attention == AttentionKind::kLatent ? validate_model(m) : validate_experts(m);
    if (!valid.is_ok()) {
      return unreadable("{}: {}", origin, valid.message());
    }
  }
  if (m.architecture == Architecture::kTransformer) {
    if (m.explicit_head_dim == 0 && m.hidden % m.heads != 0) {
      return unreadable("{}: field 'heads' ({}) must divide 'hidden' ({}), or give 'head_dim'",
                        origin, m.heads, m.hidden);
    }
    if (m.heads % m.kv_heads != 0) {
      return unreadable("{}: field 'kv_heads' ({}) must divide 'heads' ({})", origin, m.kv_heads,
                        m.heads);
    }
  }
  return m;
}

StatusOr<GpuSpec> parse_gpu_json(std::string_view text, std::string_view origin) {
  ASSIGN_OR_RETURN(json object, parse_object(text, origin));
  JsonFields r(object, std::string(origin), StatusCode::kUnreadable);
  GpuSpec g;
  RETURN_IF_ERROR(r.string("name", g.name, true));
  RETURN_IF_ERROR(r.positive_number("memory_bytes", g.memory_bytes));
  RETURN_IF_ERROR(r.positive_number("bf16_flops", g.bf16_flops));
  RETURN_IF_ERROR(r.positive_number("fp32_flops", g.fp32_flops));
  RETURN_IF_ERROR(r.positive_number("hbm_bandwidth", g.hbm_bandwidth));
  RETURN_IF_ERROR(r.positive_number("intra_node_bandwidth", g.intra_node_bandwidth));
  RETURN_IF_ERROR(r.positive_number("network_bandwidth", g.network_bandwidth));
  RETURN_IF_ERROR(r.positive_number("gemm_efficiency", g.gemm_efficiency, false));
  if (g.gemm_efficiency > 1) {
    return unreadable("{}: field 'gemm_efficiency' is a fraction of peak, at most 1 (got {})",
                      origin, g.gemm_efficiency);
  }
  RETURN_IF_ERROR(r.positive_number("gemm_overhead_us", g.gemm_overhead_us, false));
  RETURN_IF_ERROR(r.positive_number("special_function_rate", g.special_function_rate, false));
  RETURN_IF_ERROR(r.integer("sm_count", g.sm_count, 1, false, kMostSmCount));
  RETURN_IF_ERROR(r.integer("collective_sms", g.collective_sms, 0, false));
  if (g.collective_sms > 0 && g.collective_sms >= g.sm_count) {
    return unreadable("{}: field 'collective_sms' ({}) must be fewer than 'sm_count' ({})", origin,
                      g.collective_sms, g.sm_count);
  }
  for (auto [field, value] :
       {std::pair{"memory_efficiency", &g.memory_efficiency},
        std::pair{"flash_attention_efficiency", &g.flash_attention_efficiency},
        std::pair{"intra_node_efficiency", &g.intra_node_efficiency},
        std::pair{"network_efficiency", &g.network_efficiency}}) {
    RETURN_IF_ERROR(r.positive_number(field, *value, false));
    if (*value > 1) {
      return unreadable(
          "{}: field '{}' is a fraction of the datasheet's figure, at most 1 (got {})", origin,
          field, *value);
    }
  }
  RETURN_IF_ERROR(r.string("fit_source", g.fit_source));
  RETURN_IF_ERROR(r.boolean("overlaps_communication", g.overlaps_communication));
  RETURN_IF_ERROR(r.boolean("cuda_runtime", g.cuda_runtime));
  RETURN_IF_ERROR(r.string("source", g.source));
  RETURN_IF_ERROR(r.string("note", g.note));
  RETURN_IF_ERROR(r.no_unknown_fields());
  return g;
}

StatusOr<ClusterSpec> parse_cluster_json(std::string_view text, std::string_view origin) {
  ASSIGN_OR_RETURN(json object, parse_object(text, origin));
  JsonFields r(object, std::string(origin), StatusCode::kUnreadable);
  ClusterSpec c;
  double intra_latency_us = 0, inter_latency_us = 0;
  RETURN_IF_ERROR(r.string("name", c.name, true));
  // Bounded as --gpus-per-node is (memory/machine_bounds.h).
  RETURN_IF_ERROR(r.integer("gpus_per_node", c.gpus_per_node, 1, false, kMostGpusPerNode));
  RETURN_IF_ERROR(r.positive_number("intra_node_bandwidth", c.intra_node_bandwidth, false));
  RETURN_IF_ERROR(r.positive_number("intra_node_latency_us", intra_latency_us, false));
  RETURN_IF_ERROR(r.positive_number("inter_node_bandwidth", c.inter_node_bandwidth, false));
  RETURN_IF_ERROR(r.positive_number("inter_node_latency_us", inter_latency_us, false));
  RETURN_IF_ERROR(r.string("source", c.source));
  RETURN_IF_ERROR(r.no_unknown_fields());
  c.intra_node_latency_s = intra_latency_us * 1e-6;
  c.inter_node_latency_s = inter_latency_us * 1e-6;
  return c;
}

StatusOr<ClusterSpec> load_cluster_file(const std::filesystem::path& path) {
  ASSIGN_OR_RETURN(std::string text, read_input_file(path));
  return parse_cluster_json(text, path.string());
}

StatusOr<ModelConfig> load_model_file(const std::filesystem::path& given) {
  // A model's directory (a Hugging Face snapshot) stands for the config.json in it.
  std::error_code error;
  const bool directory = std::filesystem::is_directory(given, error);
  const std::filesystem::path path = directory ? given / "config.json" : given;
  if (directory && !std::filesystem::exists(path, error)) {
    return unreadable("{} is a directory without a config.json: give a model file", given.string());
  }
  ASSIGN_OR_RETURN(std::string text, read_input_file(path));
  return parse_model_json(text, path.string());
}

StatusOr<GpuSpec> load_gpu_file(const std::filesystem::path& path) {
  ASSIGN_OR_RETURN(std::string text, read_input_file(path));
  return parse_gpu_json(text, path.string());
}

std::vector<std::string> model_preset_names(const std::filesystem::path& share_dir) {
  return json_stems(share_dir / "models");
}

std::vector<std::string> gpu_preset_names(const std::filesystem::path& share_dir) {
  return json_stems(share_dir / "gpus");
}

StatusOr<ModelConfig> load_model_preset(const std::filesystem::path& share_dir,
                                        std::string_view name) {
  auto names = model_preset_names(share_dir);
  if (std::find(names.begin(), names.end(), name) == names.end()) {
    return invalid_argument(
        "--model '{}' is not a preset (presets: {}); or give --model-file or "
        "the dimensions",
        name, joined(names));
  }
  return load_model_file(share_dir / "models" / (std::string(name) + ".json"));
}

StatusOr<GpuSpec> load_gpu_preset(const std::filesystem::path& share_dir, std::string_view name) {
  auto names = gpu_preset_names(share_dir);
  if (std::find(names.begin(), names.end(), name) == names.end()) {
    return invalid_argument("--gpu '{}' is not a preset (presets: {}); or give --gpu-file", name,
                            joined(names));
  }
  return load_gpu_file(share_dir / "gpus" / (std::string(name) + ".json"));
}

}  // namespace partrain::memory
