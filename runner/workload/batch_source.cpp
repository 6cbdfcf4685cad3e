#include "runner/workload/batch_source.h"

#include "runner/workload/mlp_chunk.h"

namespace partrain::runner {

StatusOr<BatchSource> BatchSource::open(const WorkloadConfig& config) {
  BatchSource source;
  source.config_ = &config;
  if (config.kind == WorkloadKind::kGpt) {
    if (config.data_path.empty()) {
      source.tokens_ = make_synthetic_tokens(config.seed, config.model.vocab);
    } else {
      ASSIGN_OR_RETURN(std::unique_ptr<TokenSource> file,
                       open_token_file(config.data_path, config.model.vocab, config.model.seq));
      source.tokens_ = std::move(file);
    }
  } else if (!config.data_path.empty()) {
    return invalid_argument("--data applies to --workload gpt (the mlp trains on synthetic "
                            "features)");
  }
  return source;
}

namespace {

// Copies `values` into `buffer`, grown to hold them on first use.
template <class T>
Status upload_values(Device& device, const std::vector<T>& values, TrackedBuffer& buffer) {
  const size_t bytes = values.size() * sizeof(T);
  RETURN_IF_ERROR(device.allocator().grow(buffer, bytes, memory::Category::kOther));
  device.upload(buffer.data(), values.data(), bytes);
  return Status::ok();
}

}  // namespace

Status BatchSource::fill(Device& device, int step, int dp_rank, int micro_batch,
                         MicroBatch& batch) const {
  const ResolvedLayout& l = config_->resolved;
  const WorkloadModel& m = config_->model;
  const int64_t B = l.layout.micro_batch;
  const int64_t G = l.global_batch;
  const int64_t first = static_cast<int64_t>(step) * G +
                        static_cast<int64_t>(dp_rank) * l.micro_batches * B +
                        static_cast<int64_t>(micro_batch) * B;
  if (config_->kind == WorkloadKind::kGpt) {
    const int64_t T = m.seq;
    std::vector<int32_t> tokens(static_cast<size_t>(B * T)), targets(tokens.size());
    for (int64_t b = 0; b < B; ++b) {
      tokens_->sample(static_cast<uint64_t>(first + b), m.seq, tokens.data() + b * T,
                      targets.data() + b * T);
    }
    // Cross-entropy's scale is per token of the whole global batch.
    batch.dloss_scale = 1.0f / static_cast<float>(G * T);
    RETURN_IF_ERROR(upload_values(device, tokens, batch.tokens));
    return upload_values(device, targets, batch.targets);
  }
  std::vector<float> features(static_cast<size_t>(B * m.hidden));
  for (int64_t b = 0; b < B; ++b) {
    mlp_features(config_->seed, static_cast<uint64_t>(first + b), m.hidden,
                 features.data() + b * m.hidden);
  }
  // The mean-square loss is per micro-batch: its share of the global batch is B / G.
  batch.dloss_scale = static_cast<float>(B) / static_cast<float>(G);
  return upload_values(device, features, batch.features);
}

std::string BatchSource::describe() const {
  return tokens_ ? tokens_->describe() : "synthetic features";
}

}  // namespace partrain::runner
