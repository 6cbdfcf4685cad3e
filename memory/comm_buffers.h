// Communication buffers a data-parallel or pipeline rank allocates besides the model states:
// DDP/ZeRO-1/2 gradient buckets, FSDP (ZeRO-3) all-gather and reduce-scatter buffers, and
// pipeline send/receive buffers.
#pragma once

namespace partrain::memory {

struct CommBufferInput {
  int dp = 1;
  int pp = 1;
  int zero = 0;
  double bucket_bytes = 25e6;          // PyTorch DDP's bucket_cap_mb = 25
  double grad_bytes_per_rank = 0;      // unsharded gradient bytes on this rank (caps the bucket)
  double largest_layer_params = 0;     // of one tensor-parallel rank
  double param_bytes = 2;
  double grad_bytes = 2;
  double boundary_activation_bytes = 0;  // one micro-batch's b s h (/t with SP) at a stage boundary
};

// DDP and ZeRO-1/2: one bucket in flight (Li 2020 "PyTorch Distributed" sec. 3.2.3), capped at the
// gradients; ZeRO-3/FSDP: the gathered parameters of two layers (current + prefetched) and one
// layer's full gradients before reduce-scatter (Zhao 2023 "PyTorch FSDP" sec. 3.2);
// pipeline: a send and a receive buffer of one boundary activation.
double comm_buffer_bytes(const CommBufferInput& input);

}  // namespace partrain::memory
