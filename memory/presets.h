// Model and GPU presets (share/models/*.json, share/gpus/*.json) and user files given with
// --model-file / --gpu-file: read, validated field by field; a malformed file is
// StatusCode::kUnreadable (exit 3) naming the file and the field.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "memory/model_config.h"

namespace partrain::memory {

struct GpuSpec {
  std::string name;
  double memory_bytes = 0;
  double bf16_flops = 0;            // dense peak, FLOP/s
  double fp32_flops = 0;            // peak, FLOP/s
  double hbm_bandwidth = 0;         // bytes/s
  double intra_node_bandwidth = 0;  // bytes/s per direction (NVLink)
  double network_bandwidth = 0;     // bytes/s per GPU per direction (InfiniBand/RoCE NIC)
  double gemm_efficiency = 0.75;  // the fraction of peak large GEMMs reach (the recommender's cap)
  // The recommender's other kernel and link speeds. sm_count is the datasheet's; the rest are
  // fitted (fit_source says to what) and shown by `recommend --explain`. The defaults leave a
  // user's file as before: no wave quantization, full bandwidths.
  double gemm_overhead_us = 4;  // launch and tail per GEMM
  int64_t sm_count = 0;         // SMs a GEMM's tiles fill in waves; 0: not modelled
  // SMs an NCCL collective holds while it runs beside compute (one CTA per channel): overlapped
  // communication takes them from the GEMMs. 0: overlap costs compute nothing.
  int64_t collective_sms = 0;
  double memory_efficiency = 1;           // fraction of hbm_bandwidth memory-bound kernels reach
  double flash_attention_efficiency = 0;  // fraction of peak FlashAttention reaches; 0: gemm's
  // Evaluations per second of the special function an elementwise kernel calls per element (the
  // MLP activation's tanh or exp), where that function and not memory paces the kernel: a CPU
  // core's scalar tanh. 0: memory paces every elementwise kernel (a GPU's special-function units
  // outrun its HBM on them).
  double special_function_rate = 0;
  double intra_node_efficiency = 1;       // busbw over intra_node_bandwidth (NCCL over NVLink)
  double network_efficiency = 1;          // busbw over network_bandwidth (NCCL over the NIC)
  std::string fit_source;                 // what the fitted values were fitted to
  bool overlaps_communication =
      true;  // comm runs beside compute (GPU streams); false on the CPU backend
  // The device holds a CUDA context and NCCL's buffers: the default reserve counts them. False for
  // host memory (the cpu preset), whose default reserve is none.
  bool cuda_runtime = true;
  std::string source;
  std::string note;
};

// The machines a job runs on, for the recommender: GPUs per node and the two link levels. Every
// field but the name is optional in a --cluster file; unset (0) fields fall back to the GPU
// preset's bandwidths and the default latencies.
struct ClusterSpec {
  std::string name;
  int64_t gpus_per_node = 0;
  double intra_node_bandwidth = 0;  // bytes/s per GPU per direction
  double intra_node_latency_s = 0;  // per collective step
  double inter_node_bandwidth = 0;
  double inter_node_latency_s = 0;
  std::string source;
};

// Parsing: `origin` names the file in errors.
StatusOr<ModelConfig> parse_model_json(std::string_view text, std::string_view origin);
StatusOr<GpuSpec> parse_gpu_json(std::string_view text, std::string_view origin);
StatusOr<ModelConfig> load_model_file(const std::filesystem::path& path);
StatusOr<GpuSpec> load_gpu_file(const std::filesystem::path& path);
StatusOr<ClusterSpec> parse_cluster_json(std::string_view text, std::string_view origin);
StatusOr<ClusterSpec> load_cluster_file(const std::filesystem::path& path);

// Presets by name under share_dir/models or share_dir/gpus; an unknown name is
// kInvalidArgument listing the presets there.
std::vector<std::string> model_preset_names(const std::filesystem::path& share_dir);
std::vector<std::string> gpu_preset_names(const std::filesystem::path& share_dir);
StatusOr<ModelConfig> load_model_preset(const std::filesystem::path& share_dir,
                                        std::string_view name);
StatusOr<GpuSpec> load_gpu_preset(const std::filesystem::path& share_dir, std::string_view name);

}  // namespace partrain::memory
