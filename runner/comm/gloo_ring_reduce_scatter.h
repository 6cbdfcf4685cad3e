// Reduce-scatter for Gloo, which has no options-style one: a ring over unbound buffers.
// n-1 steps; in each, every rank sends one block to its right neighbour and reduces the block
// arriving from its left, so each rank moves (n-1)/n x S bytes (docs/collectives.md).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "runner/comm/dtype.h"
#include "runner/comm/gloo_headers.h"

namespace partrain::comm {

// send holds context.size blocks of `count` elements; recv gets the reduction of block `rank`
// (kAvg is left as the sum: the caller divides). recv may alias send. Throws Gloo's exceptions.
// tag must be the same on every rank and distinct from other reduce-scatters in flight.
void gloo_ring_reduce_scatter(gloo::Context& context, const void* send, void* recv, size_t count,
                              DType dtype, ReduceOp op, uint32_t tag,
                              std::chrono::milliseconds timeout);

}  // namespace partrain::comm
