#include "runner/comm/gloo_ring_reduce_scatter.h"

#include <vector>

#include "runner/comm/reduce_kernels.h"

namespace partrain::comm {
namespace {

// Slots above Gloo's own prefixes (0x01..0x08); the low 16 bits number the ring step.
constexpr uint64_t kReduceScatterSlotPrefix = 0x10;

uint64_t step_slot(uint32_t tag, int step) {
  return (kReduceScatterSlotPrefix << 56) | (uint64_t{tag} << 16) | static_cast<uint64_t>(step);
}

}  // namespace

void gloo_ring_reduce_scatter(gloo::Context& context, const void* send, void* recv, size_t count,
                              DType dtype, ReduceOp op, uint32_t tag,
                              std::chrono::milliseconds timeout) {
  const int n = context.size;
  const int rank = context.rank;
  const size_t block_bytes = count * dtype_size(dtype);
  const auto* send_bytes = static_cast<const uint8_t*>(send);
  auto block = [&](int index) { return send_bytes + static_cast<size_t>(index) * block_bytes; };
  auto ring = [n](int index) { return ((index % n) + n) % n; };
  const int right = ring(rank + 1);
  const int left = ring(rank - 1);

  // Gloo sends from non-const buffers; the send buffer is only read.
  auto send_buffer = context.createUnboundBuffer(const_cast<uint8_t*>(send_bytes),
                                                 block_bytes * static_cast<size_t>(n));
  std::vector<uint8_t> partial(block_bytes);   // the running sum this rank passes right
  std::vector<uint8_t> incoming(block_bytes);  // the running sum arriving from the left
  auto partial_buffer = context.createUnboundBuffer(partial.data(), block_bytes);
  auto incoming_buffer = context.createUnboundBuffer(incoming.data(), block_bytes);

  // Block b starts at rank b+1 and travels right, gaining one contribution per hop; after
  // n-1 hops it arrives complete at rank b. At step s this rank sends block rank-s-1 and
  // receives block rank-s-2.
  for (int step = 0; step < n - 1; ++step) {
    const uint64_t slot = step_slot(tag, step);
    incoming_buffer->recv(left, slot);
    if (step == 0) {
      send_buffer->send(right, slot, static_cast<size_t>(ring(rank - 1)) * block_bytes,
                        block_bytes);
    } else {
      partial_buffer->send(right, slot);
    }
    // Both posted before waiting, so neighbours never wait on each other's order.
    incoming_buffer->waitRecv(timeout);
    if (step == 0) {
      send_buffer->waitSend(timeout);
    } else {
      partial_buffer->waitSend(timeout);
    }
    const bool last = step == n - 2;
    reduce_into(last ? recv : partial.data(), incoming.data(), block(ring(rank - step - 2)), count,
                dtype, op);
  }
}

}  // namespace partrain::comm
