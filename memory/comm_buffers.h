// Communication buffers a data-parallel or pipeline rank allocates besides the model states:
// DDP/ZeRO-1/2 gradient buckets, FSDP (ZeRO-3) all-gather and reduce-scatter buffers, and
// pipeline send/receive buffers.
#pragma once

#include <array>

namespace partrain::memory {

struct CommBufferInput {
  int dp = 1;
  int pp = 1;
  int zero = 0;
  double bucket_bytes = 25e6;          // PyTorch DDP's bucket_cap_mb = 25
  double grad_bytes_per_rank = 0;      // unsharded gradient bytes on this rank (caps the bucket)
  // Parameters of the three largest units (memory_estimate.h: largest_units) of one
  // tensor-parallel rank's stage, largest first.
  std::array<double, 3> largest_units{};
  double param_bytes = 2;
  double grad_bytes = 2;
  double boundary_activation_bytes = 0;  // one micro-batch's b s h (/t with SP) at a stage boundary
};

// DDP and ZeRO-1/2: one bucket in flight (Li 2020 "PyTorch Distributed" sec. 3.2.3), capped at the
// gradients; ZeRO-3/FSDP: a unit in backward, gathered, with its full gradients, beside the
// previous unit's gradients in their reduce-scatter and the next unit's parameters prefetched
// (Zhao 2023 "PyTorch FSDP" sec. 3.2-3.3), taken as the three largest units in that order (a
// small model's token embedding outweighs its blocks); pipeline: a send and a receive buffer of
// one boundary activation.
double comm_buffer_bytes(const CommBufferInput& input);

}  // namespace partrain::memory
