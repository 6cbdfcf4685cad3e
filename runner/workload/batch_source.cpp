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

void BatchSource::fill(int step, int dp_rank, int micro_batch, MicroBatch& batch) const {
  const ResolvedLayout& l = config_->resolved;
  const LayoutModel& m = config_->model;
  const int64_t B = l.micro_batch;
  const int64_t G = l.global_batch;
  const int64_t first = static_cast<int64_t>(step) * G +
                        static_cast<int64_t>(dp_rank) * l.micro_batches * B +
                        static_cast<int64_t>(micro_batch) * B;
  if (config_->kind == WorkloadKind::kGpt) {
    const int64_t T = m.seq;
    batch.tokens.resize(static_cast<size_t>(B * T));
    batch.targets.resize(static_cast<size_t>(B * T));
    for (int64_t b = 0; b < B; ++b) {
      tokens_->sample(static_cast<uint64_t>(first + b), m.seq, batch.tokens.data() + b * T,
                      batch.targets.data() + b * T);
    }
    // Cross-entropy's scale is per token of the whole global batch.
    batch.dloss_scale = 1.0f / static_cast<float>(G * T);
  } else {
    batch.features.resize(static_cast<size_t>(B * m.hidden));
    for (int64_t b = 0; b < B; ++b) {
      mlp_features(config_->seed, static_cast<uint64_t>(first + b), m.hidden,
                   batch.features.data() + b * m.hidden);
    }
    // The mean-square loss is per micro-batch: its share of the global batch is B / G.
    batch.dloss_scale = static_cast<float>(B) / static_cast<float>(G);
  }
}

std::string BatchSource::describe() const {
  return tokens_ ? tokens_->describe() : "synthetic features";
}

}  // namespace partrain::runner
