#include "memory/comm_buffers.h"

namespace partrain::memory {

double comm_buffer_bytes(const CommBufferInput& in) {
  double bytes = 0;
  if (in.dp > 1) {
    if (in.zero >= 3) {
      // Zhao 2023 sec. 3.2-3.3: the unit in backward, gathered, with its unsharded gradients;
      // the previous unit's gradients still in their reduce-scatter; the next unit prefetched.
      const auto& [unit, previous, next] = in.largest_units;
      bytes += unit * (in.param_bytes + in.grad_bytes) + previous * in.grad_bytes +
               next * in.param_bytes;
    } else {
      // Li 2020 sec. 3.2.3: gradients are all-reduced bucket by bucket (25 MB by default).
      bytes += std::min(in.bucket_bytes, in.grad_bytes_per_rank);
    }
  }
  if (in.pp > 1) bytes += 2 * in.boundary_activation_bytes;  // Narayanan 2021: p2p b s h per boundary
  return bytes;
}

}  // namespace partrain::memory
