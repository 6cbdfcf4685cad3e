// The samples of a training step, split the same way for every layout: step s uses samples
// [s G, (s + 1) G) of the data stream, dp rank d the d-th contiguous block of G / dp, micro-batch
// j the j-th block of that. Fills a MicroBatch's device buffers with gpt tokens or mlp features.
#pragma once

#include <memory>

#include "core/status.h"
#include "runner/device/device.h"
#include "runner/workload/model_chunk.h"
#include "runner/workload/token_source.h"
#include "runner/workload/workload_config.h"

namespace partrain::runner {

class BatchSource {
 public:
  static StatusOr<BatchSource> open(const WorkloadConfig& config);

  // Computes the micro-batch on the host and uploads it into `batch`'s device buffers (allocated
  // from `device` on first use, then reused).
  Status fill(Device& device, int step, int dp_rank, int micro_batch, MicroBatch& batch) const;
  std::string describe() const;

 private:
  const WorkloadConfig* config_ = nullptr;
  std::shared_ptr<TokenSource> tokens_;
};

}  // namespace partrain::runner
