// Communication buffers a data-parallel or pipeline rank allocates besides the model states:
// DDP/ZeRO-1/2 gradient buckets, FSDP (ZeRO-3) all-gather and reduce-scatter buffers, and
// pipeline send/receive buffers.
#pragma once

#include <vector>

namespace partrain::memory {

struct CommBufferInput {
  int dp = 1;  // ranks holding the same weights: dp x cp
  int pp = 1;
  int zero = 0;
  double bucket_bytes = 25e6;          // PyTorch DDP's bucket_cap_mb = 25
  // ZeRO-3: DeepSpeed's reduce bucket (reduce_bucket_size elements of gradient bytes), which it
  // allocates whole beside the units, whatever the gradients' size; 0: FSDP's units alone.
  double zero3_reduce_bucket_bytes = 0;
  double grad_bytes_per_rank = 0;      // unsharded gradient bytes on this rank (caps the bucket)
  // Parameters of the units one tensor-parallel rank of the stage uses in backward, in that
  // order (memory_estimate.h: backward_units).
  std::vector<double> backward_units;
  double param_bytes = 2;
  double grad_bytes = 2;
  double boundary_activation_bytes = 0;  // one micro-batch's b s h (/t with SP) at a stage boundary
};

// DDP and ZeRO-1/2: one bucket in flight (Li 2020 "PyTorch Distributed" sec. 3.2.3), capped at the
// gradients; ZeRO-3/FSDP: the most, along the backward order, of a unit gathered with its full
// gradients, the previous unit's gradients still in their reduce-scatter and the next unit
// prefetched (Zhao 2023 "PyTorch FSDP" sec. 3.2-3.3; a small model's token embedding outweighs
// its blocks), plus DeepSpeed's reduce bucket when one is given; pipeline: a send and a receive
// buffer of one boundary activation.
double comm_buffer_bytes(const CommBufferInput& input);

// The most parameters two consecutive units of `units` hold together: gradients staged unit by
// unit, one reducing while the next is produced.
double largest_adjacent_pair(const std::vector<double>& units);

}  // namespace partrain::memory
