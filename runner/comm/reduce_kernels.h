// The element-wise reductions host communicators apply (Gloo's reduce callback, the ring
// reduce-scatter): typed sum/max/min for every DType, with bf16/fp16 computed in fp32 and
// rounded once per pairwise step, as NCCL does on the wire.
#pragma once

#include <cstddef>
#include <functional>

#include "runner/comm/dtype.h"

namespace partrain::comm {

// out[i] = a[i] (op) b[i]; out may alias a or b. kAvg reduces as kSum: the division happens
// once, after the whole reduction (divide_for_avg), so the result does not depend on the order.
void reduce_into(void* out, const void* a, const void* b, size_t count, DType dtype, ReduceOp op);

// buffer[i] /= divisor. Integers truncate toward zero (C++ division), as torch's integer avg does.
void divide_for_avg(void* buffer, size_t count, DType dtype, int divisor);

// The same reduction as a Gloo-style callback (out, a, b, count).
using ReduceFunction = std::function<void(void*, const void*, const void*, size_t)>;
ReduceFunction make_reduce_function(DType dtype, ReduceOp op);

}  // namespace partrain::comm
