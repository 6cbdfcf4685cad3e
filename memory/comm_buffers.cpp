#include "memory/comm_buffers.h"

#include <algorithm>

namespace partrain::memory {

double comm_buffer_bytes(const CommBufferInput& in) {
  double bytes = 0;
  if (in.dp > 1) {
    if (in.zero >= 3) {
      // Zhao 2023 sec. 3.2-3.3: the unit in backward, gathered, with its unsharded gradients;
      // the previous unit's gradients still in their reduce-scatter; the next unit prefetched.
      const std::vector<double>& u = in.backward_units;
      double most = 0;
      for (size_t i = 0; i < u.size(); ++i) {
        const double previous = i > 0 ? u[i - 1] : 0;
        const double next = i + 1 < u.size() ? u[i + 1] : 0;
        most = std::max(most, u[i] * (in.param_bytes + in.grad_bytes) + previous * in.grad_bytes +
                                  next * in.param_bytes);
      }
      // DeepSpeed ZeRO-3 (0.19.8, stage3.py): its IPG bucket's flat buffer of
      // reduce_bucket_size elements, allocated whole (2 GB in fp32 at its default 5e8).
      bytes += most + in.zero3_reduce_bucket_bytes;
    } else {
      // Li 2020 sec. 3.2.3: gradients are all-reduced bucket by bucket (25 MB by default).
      bytes += std::min(in.bucket_bytes, in.grad_bytes_per_rank);
    }
  }
  if (in.pp > 1) bytes += 2 * in.boundary_activation_bytes;  // Narayanan 2021: p2p b s h per boundary
  return bytes;
}

double largest_adjacent_pair(const std::vector<double>& units) {
  double most = units.size() == 1 ? units[0] : 0;
  for (size_t i = 1; i < units.size(); ++i) most = std::max(most, units[i - 1] + units[i]);
  return most;
}

}  // namespace partrain::memory
