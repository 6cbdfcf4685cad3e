#include "runner/workload/ddp_buckets.h"

#include <algorithm>

namespace partrain::runner {

DdpBuckets::DdpBuckets(const ParamLayout& layout, void* grads, comm::DType dtype,
                       int64_t bucket_bytes, comm::Comm& dp)
    : grads_(grads), dtype_(dtype), dp_(dp) {
  const auto element = static_cast<int64_t>(comm::dtype_size(dtype));
  const auto& units = layout.units();
  // Reverse order: the last units' gradients are produced first by backward.
  for (auto unit = units.rbegin(); unit != units.rend(); ++unit) {
    if (buckets_.empty() ||
        (buckets_.back().numel + unit->numel) * element > bucket_bytes) {
      buckets_.emplace_back();
      buckets_.back().offset = unit->offset + unit->numel;
    }
    Bucket& bucket = buckets_.back();
    bucket.offset = unit->offset;  // units are contiguous: the bucket grows downwards
    bucket.numel += unit->numel;
    bucket.units.push_back(unit->name);
  }
}

void DdpBuckets::launch(Bucket& bucket) {
  if (bucket.work || dp_.size() == 1) return;
  void* data = static_cast<char*>(grads_) +
               bucket.offset * static_cast<int64_t>(comm::dtype_size(dtype_));
  bucket.work = dp_.all_reduce_async(data, data, static_cast<size_t>(bucket.numel), dtype_,
                                     comm::ReduceOp::kSum);
}

void DdpBuckets::unit_ready(const std::string& unit) {
  for (Bucket& bucket : buckets_) {
    if (std::find(bucket.units.begin(), bucket.units.end(), unit) == bucket.units.end()) continue;
    if (++bucket.ready == bucket.units.size()) launch(bucket);
  }
}

Status DdpBuckets::finish() {
  // Buckets launch in order on every rank: a rank whose readiness came out of order must not
  // issue a later bucket before an earlier one, or the collectives' sequence would differ.
  Status result;
  for (Bucket& bucket : buckets_) launch(bucket);
  for (Bucket& bucket : buckets_) {
    if (bucket.work) {
      Status status = bucket.work->wait();
      if (result.is_ok()) result = status;
    }
    bucket.work.reset();
    bucket.ready = 0;
  }
  return result;
}

}  // namespace partrain::runner
