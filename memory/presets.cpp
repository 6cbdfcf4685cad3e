#include "memory/presets.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

namespace partrain::memory {
namespace {

using nlohmann::json;

template <typename... Args>
Status unreadable(fmt::format_string<Args...> format, Args&&... args) {
  return make_status(StatusCode::kUnreadable, format, std::forward<Args>(args)...);
}

// Reads the fields of one JSON object, each with its type checked, and rejects unknown keys.
class FieldReader {
 public:
  FieldReader(const json& object, std::string_view origin) : object_(object), origin_(origin) {}

  Status positive_int(const char* field, int64_t& out, bool required = true) {
    seen_.insert(field);
    auto it = object_.find(field);
    if (it == object_.end()) return missing(field, required);
    if (!it->is_number_integer() || it->get<int64_t>() <= 0) {
      return unreadable("{}: field '{}' must be a positive integer (got {})", origin_, field, it->dump());
    }
    out = it->get<int64_t>();
    return Status::ok();
  }
  Status positive_number(const char* field, double& out, bool required = true) {
    seen_.insert(field);
    auto it = object_.find(field);
    if (it == object_.end()) return missing(field, required);
    if (!it->is_number() || it->get<double>() <= 0) {
      return unreadable("{}: field '{}' must be a positive number (got {})", origin_, field, it->dump());
    }
    out = it->get<double>();
    return Status::ok();
  }
  Status boolean(const char* field, bool& out) {
    seen_.insert(field);
    auto it = object_.find(field);
    if (it == object_.end()) return Status::ok();
    if (!it->is_boolean()) {
      return unreadable("{}: field '{}' must be true or false (got {})", origin_, field, it->dump());
    }
    out = it->get<bool>();
    return Status::ok();
  }
  Status string(const char* field, std::string& out, bool required = false) {
    seen_.insert(field);
    auto it = object_.find(field);
    if (it == object_.end()) return missing(field, required);
    if (!it->is_string()) {
      return unreadable("{}: field '{}' must be a string (got {})", origin_, field, it->dump());
    }
    out = it->get<std::string>();
    return Status::ok();
  }
  template <typename Enum, typename Parse>
  Status choice(const char* field, Enum& out, Parse parse, const char* allowed) {
    std::string text;
    RETURN_IF_ERROR(string(field, text));
    if (text.empty()) return Status::ok();
    auto parsed = parse(text);
    if (!parsed) return unreadable("{}: field '{}' must be one of {} (got \"{}\")", origin_, field, allowed, text);
    out = *parsed;
    return Status::ok();
  }
  Status no_unknown_fields() const {
    for (const auto& [key, value] : object_.items()) {
      if (!seen_.contains(key)) return unreadable("{}: unknown field '{}'", origin_, key);
    }
    return Status::ok();
  }

 private:
  Status missing(const char* field, bool required) const {
    if (!required) return Status::ok();
    return unreadable("{}: missing field '{}'", origin_, field);
  }

  const json& object_;
  std::string_view origin_;
  std::set<std::string, std::less<>> seen_;
};

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

StatusOr<std::string> read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) return unreadable("cannot read {}", path.string());
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
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

Status read_dimensions(FieldReader& r, ModelConfig& m) {
  const bool transformer = m.architecture == Architecture::kTransformer;
  RETURN_IF_ERROR(r.positive_int("layers", m.layers));
  RETURN_IF_ERROR(r.positive_int("hidden", m.hidden));
  RETURN_IF_ERROR(r.positive_int("heads", m.heads, transformer));
  RETURN_IF_ERROR(r.positive_int("kv_heads", m.kv_heads, false));
  RETURN_IF_ERROR(r.positive_int("ffn", m.ffn, false));
  RETURN_IF_ERROR(r.positive_int("vocab", m.vocab, transformer));
  RETURN_IF_ERROR(r.positive_int("seq", m.seq, transformer));
  if (m.kv_heads == 0) m.kv_heads = m.heads;
  if (m.ffn == 0) m.ffn = 4 * m.hidden;
  return Status::ok();
}

}  // namespace

StatusOr<ModelConfig> parse_model_json(std::string_view text, std::string_view origin) {
  ASSIGN_OR_RETURN(json object, parse_object(text, origin));
  FieldReader r(object, origin);
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
  RETURN_IF_ERROR(r.string("source", m.source));
  double published = 0;
  RETURN_IF_ERROR(r.positive_number("published_params", published, false));  // documentation
  RETURN_IF_ERROR(r.no_unknown_fields());
  if (m.architecture == Architecture::kTransformer) {
    if (m.hidden % m.heads != 0) {
      return unreadable("{}: field 'heads' ({}) must divide 'hidden' ({})", origin, m.heads, m.hidden);
    }
    if (m.heads % m.kv_heads != 0) {
      return unreadable("{}: field 'kv_heads' ({}) must divide 'heads' ({})", origin, m.kv_heads, m.heads);
    }
  }
  return m;
}

StatusOr<GpuSpec> parse_gpu_json(std::string_view text, std::string_view origin) {
  ASSIGN_OR_RETURN(json object, parse_object(text, origin));
  FieldReader r(object, origin);
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
    return unreadable("{}: field 'gemm_efficiency' is a fraction of peak, at most 1 (got {})", origin,
                      g.gemm_efficiency);
  }
  RETURN_IF_ERROR(r.boolean("overlaps_communication", g.overlaps_communication));
  RETURN_IF_ERROR(r.string("source", g.source));
  RETURN_IF_ERROR(r.string("note", g.note));
  RETURN_IF_ERROR(r.no_unknown_fields());
  return g;
}

StatusOr<ClusterSpec> parse_cluster_json(std::string_view text, std::string_view origin) {
  ASSIGN_OR_RETURN(json object, parse_object(text, origin));
  FieldReader r(object, origin);
  ClusterSpec c;
  double intra_latency_us = 0, inter_latency_us = 0;
  RETURN_IF_ERROR(r.string("name", c.name, true));
  RETURN_IF_ERROR(r.positive_int("gpus_per_node", c.gpus_per_node, false));
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
  ASSIGN_OR_RETURN(std::string text, read_text(path));
  return parse_cluster_json(text, path.string());
}

StatusOr<ModelConfig> load_model_file(const std::filesystem::path& path) {
  ASSIGN_OR_RETURN(std::string text, read_text(path));
  return parse_model_json(text, path.string());
}

StatusOr<GpuSpec> load_gpu_file(const std::filesystem::path& path) {
  ASSIGN_OR_RETURN(std::string text, read_text(path));
  return parse_gpu_json(text, path.string());
}

std::vector<std::string> model_preset_names(const std::filesystem::path& share_dir) {
  return json_stems(share_dir / "models");
}

std::vector<std::string> gpu_preset_names(const std::filesystem::path& share_dir) {
  return json_stems(share_dir / "gpus");
}

StatusOr<ModelConfig> load_model_preset(const std::filesystem::path& share_dir, std::string_view name) {
  auto names = model_preset_names(share_dir);
  if (std::find(names.begin(), names.end(), name) == names.end()) {
    return invalid_argument("--model '{}' is not a preset (presets: {}); or give --model-file or "
                            "the dimensions", name, joined(names));
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
