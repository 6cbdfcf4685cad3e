// The model a sizing command works on (a preset, a model file, a bare parameter count or the
// dimension flags) and the GPU it runs on: the flags `partrain memory` and `partrain recommend`
// share, and how they resolve into a ModelConfig and a GpuSpec.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>

#include "cli/expert_flags.h"
#include "core/status.h"
#include "memory/model_config.h"
#include "memory/presets.h"

namespace partrain::cli {

struct ModelFlags {
  std::string model;
  std::string model_file;
  double params = 0;
  int64_t layers = 0, hidden = 0, heads = 0, kv_heads = 0, ffn = 0, vocab = 0, seq = 0;
  int64_t head_dim = 0;  // each head's width, where it is not hidden / heads
  bool swiglu = false;
  bool rmsnorm = false;
  bool no_bias = false;
  bool untied_embeddings = false;
  std::string position;
  ExpertFlags moe;  // a mixture of experts (memory::MixtureOfExperts)
};

struct GpuFlags {
  std::string gpu;  // empty: kDefaultGpu, unless --gpu-file
  std::string gpu_file;
};
inline constexpr const char* kDefaultGpu = "h100-80g";

void add_model_flags(CLI::App& cmd, ModelFlags& f);
// `what` says what the preset is used for in the help ("capacity", "capacity, peak FLOP/s, links").
void add_gpu_flags(CLI::App& cmd, GpuFlags& f, const std::string& what);

// A preset or file with the dimension flags applied on top, or a model from dimensions alone;
// kInvalidArgument when neither is given, kUnreadable for a malformed file.
StatusOr<memory::ModelConfig> resolve_model(const ModelFlags& f);
// The dropout probability a run trains with, and where it came from, for the reports to say.
struct DropoutChoice {
  double probability = 0;
  std::string source;
};
// --dropout when given, else the model's published recipe (a preset's "dropout", a config.json's
// attention_dropout, hidden_dropout...), else `otherwise` (each command's own default).
DropoutChoice choose_dropout(const std::optional<double>& flag, const memory::ModelConfig& model,
                             DropoutChoice otherwise);

// kInvalidArgument when --gpu and --gpu-file are both given.
StatusOr<memory::GpuSpec> resolve_gpu(const GpuFlags& f);

}  // namespace partrain::cli
