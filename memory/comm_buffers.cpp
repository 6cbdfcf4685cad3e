#include "memory/comm_buffers.h"

#include <algorithm>

namespace partrain::memory {

double comm_buffer_bytes(const CommBufferInput& in) {
  double bytes = 0;
  if (in.dp > 1) {
    if (in.zero >= 3) {
      // Zhao 2023 sec. 3.2-3.3: unsharded unit + the prefetched next one, and its gradients.
      bytes += in.largest_layer_params * (2 * in.param_bytes + in.grad_bytes);
    } else {
      // Li 2020 sec. 3.2.3: gradients are all-reduced bucket by bucket (25 MB by default).
      bytes += std::min(in.bucket_bytes, in.grad_bytes_per_rank);
    }
  }
  if (in.pp > 1) bytes += 2 * in.boundary_activation_bytes;  // Narayanan 2021: p2p b s h per boundary
  return bytes;
}

}  // namespace partrain::memory
