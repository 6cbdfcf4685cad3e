// PyTorch DDP's gradient buckets (Li et al. 2020, "PyTorch Distributed", sec. 3.2): the flat
// gradient buffer is cut, in reverse parameter order, into buckets of about --bucket-mb; each
// bucket's all-reduce starts asynchronously as soon as backward has produced all of its
// gradients, so communication overlaps the rest of backward. Buckets here are whole parameter
// units (a layer, the embedding, the final norm): a unit is never split between buckets.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "runner/comm/comm.h"
#include "runner/workload/param_layout.h"

namespace partrain::runner {

class DdpBuckets {
 public:
  // `grads` holds the flat gradients as `dtype` (fp32, or bf16 under bf16-mixed: half the bytes
  // on the wire); --bucket-mb counts their bytes.
  DdpBuckets(const ParamLayout& layout, void* grads, comm::DType dtype, int64_t bucket_bytes,
             comm::Comm& dp);

  size_t bucket_count() const { return buckets_.size(); }
  // Backward has finished `unit`'s gradients for this step: launches every bucket now complete.
  void unit_ready(const std::string& unit);
  // Launches what is left and waits for every bucket's all-reduce (a sum: the loss is already
  // scaled by the global batch). Resets the buckets for the next step.
  Status finish();

 private:
  struct Bucket {
    int64_t offset = 0;
    int64_t numel = 0;
    std::vector<std::string> units;
    size_t ready = 0;
    comm::WorkPtr work;
  };
  void launch(Bucket& bucket);

  void* grads_;
  comm::DType dtype_;
  comm::Comm& dp_;
  std::vector<Bucket> buckets_;
};

}  // namespace partrain::runner
