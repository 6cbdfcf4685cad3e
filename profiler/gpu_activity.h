// What the GPU did, as CUPTI's activity records say it, in vendor-neutral structs: the CUPTI
// parser (profiler/cupti/) makes them from CUpti_Activity* records, tests make them by hand, and
// GpuActivityTranslator turns them into trace events. Times are nanoseconds of the process's
// monotonic clock (the parser adds the offset of that clock to CUPTI's, measured by the session).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

namespace partrain::profiler {

struct GpuKernel {
  std::string name;  // as CUPTI gives it: mangled for C++ kernels
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int32_t device = 0;
  uint32_t stream = 0;
  uint32_t correlation = 0;  // the launching API call's CUPTI correlation id
  std::array<int32_t, 3> grid{};
  std::array<int32_t, 3> block{};
  int32_t registers = 0;
  int32_t static_shared_bytes = 0;
  int32_t dynamic_shared_bytes = 0;
};

enum class CopyDirection : uint8_t { kHostToDevice, kDeviceToHost, kDeviceToDevice, kHostToHost,
                                     kPeerToPeer, kOther };
std::string_view copy_direction_name(CopyDirection direction);  // "HtoD", "DtoH", ...

struct GpuMemcpy {
  CopyDirection direction = CopyDirection::kOther;
  uint64_t bytes = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int32_t device = 0;
  uint32_t stream = 0;
  uint32_t correlation = 0;
};

struct GpuMemset {
  uint64_t bytes = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int32_t device = 0;
  uint32_t stream = 0;
  uint32_t correlation = 0;
};

// A device memory allocation or release (MEMORY2): cudaMalloc-level, so under PyTorch's caching
// allocator it is memory reserved, not memory in use.
struct GpuMemoryChange {
  bool release = false;
  uint64_t address = 0;
  uint64_t bytes = 0;
  int64_t ts_ns = 0;
  int32_t device = 0;
};

// The host waiting for the GPU (cudaStreamSynchronize, cudaEventSynchronize, ...).
struct GpuSynchronization {
  std::string_view what;  // "stream_synchronize", "event_synchronize", ...
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint32_t stream = 0;
  uint32_t correlation = 0;
};

// Links a CUPTI correlation id to the external id pushed around the call that made it (an NCCL
// call or group, for the interposition library).
struct GpuExternalCorrelation {
  uint64_t external_id = 0;
  uint32_t correlation = 0;
};

using GpuActivity = std::variant<GpuKernel, GpuMemcpy, GpuMemset, GpuMemoryChange,
                                 GpuSynchronization, GpuExternalCorrelation>;

}  // namespace partrain::profiler
