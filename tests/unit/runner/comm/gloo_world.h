// Test harness for communicator tests: runs one function per rank, each rank a thread of this
// process with its own Gloo communicator over 127.0.0.1, all sharing one InMemoryStore.
#pragma once

#include <gtest/gtest.h>

#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "runner/comm/dtype.h"
#include "runner/comm/gloo_comm.h"
#include "runner/rendezvous/in_memory_store.h"

namespace partrain::comm::testing {

// Builds the world (failing the test if bootstrap fails) and runs body(rank, comm) on each rank.
inline void run_world(int size, const std::function<void(int rank, Comm& comm)>& body,
                      GlooOptions options = {}) {
  auto store = std::make_shared<rendezvous::InMemoryStore>();
  options.timeout = std::min<Nanoseconds>(options.timeout, std::chrono::seconds(30));
  // Every rank keeps its communicator until all ranks are done: gloo's pair handshake can finish
  // on one side first, and a rank that tore its connections down while a slower peer was still
  // bootstrapping with it failed that bootstrap ("Connection closed by peer") under load. A body
  // that builds sub-communicators ends with a barrier on `comm` for the same reason.
  std::barrier done(size);
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < size; ++rank) {
    ranks.emplace_back([&, rank] {
      StatusOr<std::unique_ptr<Comm>> comm = create_gloo_comm(store, rank, size, options);
      if (comm.is_ok()) {
        body(rank, **comm);
      } else {
        ADD_FAILURE() << comm.status().message();
      }
      done.arrive_and_wait();
    });
  }
  for (auto& thread : ranks) thread.join();
}

// Typed access to a byte buffer holding `dtype` elements, through double.
inline void put(DType dtype, std::vector<uint8_t>& buffer, size_t i, double value) {
  uint8_t* at = buffer.data() + i * dtype_size(dtype);
  switch (dtype) {
    case DType::kF32: { float v = static_cast<float>(value); std::memcpy(at, &v, 4); return; }
    case DType::kBF16: { uint16_t v = float_to_bf16(static_cast<float>(value)); std::memcpy(at, &v, 2); return; }
    case DType::kF16: { uint16_t v = float_to_fp16(static_cast<float>(value)); std::memcpy(at, &v, 2); return; }
    case DType::kI32: { auto v = static_cast<int32_t>(value); std::memcpy(at, &v, 4); return; }
    case DType::kI64: { auto v = static_cast<int64_t>(value); std::memcpy(at, &v, 8); return; }
  }
}

inline double get(DType dtype, const std::vector<uint8_t>& buffer, size_t i) {
  const uint8_t* at = buffer.data() + i * dtype_size(dtype);
  switch (dtype) {
    case DType::kF32: { float v; std::memcpy(&v, at, 4); return v; }
    case DType::kBF16: { uint16_t v; std::memcpy(&v, at, 2); return bf16_to_float(v); }
    case DType::kF16: { uint16_t v; std::memcpy(&v, at, 2); return fp16_to_float(v); }
    case DType::kI32: { int32_t v; std::memcpy(&v, at, 4); return v; }
    case DType::kI64: { int64_t v; std::memcpy(&v, at, 8); return static_cast<double>(v); }
  }
  return 0;
}

inline bool is_float(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kBF16 || dtype == DType::kF16;
}

// Tolerance for comparing with a host reference: 16-bit floats carry 8 or 11 bits.
inline double tolerance(DType dtype, double expected) {
  switch (dtype) {
    case DType::kBF16: return 1e-2 * std::max(1.0, std::fabs(expected));
    case DType::kF16: return 2e-3 * std::max(1.0, std::fabs(expected));
    case DType::kF32: return 1e-5 * std::max(1.0, std::fabs(expected));
    default: return 0;
  }
}

inline constexpr DType kAllDTypes[] = {DType::kF32, DType::kBF16, DType::kF16, DType::kI32,
                                       DType::kI64};
inline constexpr ReduceOp kAllOps[] = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax,
                                       ReduceOp::kMin};

}  // namespace partrain::comm::testing
