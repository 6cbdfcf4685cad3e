#include "profiler/cupti/cupti_activity_parser.h"

namespace partrain::profiler::cupti {
namespace {

CopyDirection direction_of(uint8_t copy_kind) {
  switch (copy_kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return CopyDirection::kHostToDevice;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return CopyDirection::kDeviceToHost;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return CopyDirection::kDeviceToDevice;
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return CopyDirection::kHostToHost;
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return CopyDirection::kPeerToPeer;
    default: return CopyDirection::kOther;  // arrays (HTOA, ATOD, ...)
  }
}

std::string_view synchronization_name(CUpti_ActivitySynchronizationType type) {
  switch (type) {
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE: return "event_synchronize";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT: return "stream_wait_event";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE: return "stream_synchronize";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE: return "context_synchronize";
    default: return "synchronize";
  }
}

// A CUPTI timestamp on the monotonic clock.
struct Clock {
  int64_t offset_ns;
  int64_t operator()(uint64_t timestamp) const {
    return timestamp == 0 ? 0 : static_cast<int64_t>(timestamp) + offset_ns;
  }
};

GpuKernel kernel_of(const CUpti_ActivityKernel10& k, Clock ns) {
  GpuKernel kernel;
  kernel.name = k.name != nullptr ? k.name : "(unnamed kernel)";
  kernel.start_ns = ns(k.start);
  kernel.end_ns = ns(k.end);
  kernel.device = static_cast<int32_t>(k.deviceId);
  kernel.stream = k.streamId;
  kernel.correlation = k.correlationId;
  kernel.grid = {k.gridX, k.gridY, k.gridZ};
  kernel.block = {k.blockX, k.blockY, k.blockZ};
  kernel.registers = k.registersPerThread;
  kernel.static_shared_bytes = k.staticSharedMemory;
  kernel.dynamic_shared_bytes = k.dynamicSharedMemory;
  return kernel;
}

}  // namespace

std::optional<GpuActivity> parse_activity(const CUpti_Activity& record, int64_t clock_offset_ns) {
  const Clock ns{clock_offset_ns};
  switch (record.kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      return kernel_of(reinterpret_cast<const CUpti_ActivityKernel10&>(record), ns);
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto& c = reinterpret_cast<const CUpti_ActivityMemcpy6&>(record);
      return GpuMemcpy{direction_of(c.copyKind), c.bytes, ns(c.start), ns(c.end),
                       static_cast<int32_t>(c.deviceId), c.streamId, c.correlationId};
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto& s = reinterpret_cast<const CUpti_ActivityMemset4&>(record);
      return GpuMemset{s.bytes, ns(s.start), ns(s.end), static_cast<int32_t>(s.deviceId),
                       s.streamId, s.correlationId};
    }
    case CUPTI_ACTIVITY_KIND_MEMORY2: {
      const auto& m = reinterpret_cast<const CUpti_ActivityMemory4&>(record);
      if (m.memoryOperationType != CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION &&
          m.memoryOperationType != CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE) {
        return std::nullopt;
      }
      // Device memory only: pinned host buffers are not the GPU's to run out of.
      if (m.memoryKind != CUPTI_ACTIVITY_MEMORY_KIND_DEVICE) return std::nullopt;
      return GpuMemoryChange{m.memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE,
                             m.address, m.bytes, ns(m.timestamp),
                             static_cast<int32_t>(m.deviceId)};
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
      const auto& s = reinterpret_cast<const CUpti_ActivitySynchronization2&>(record);
      return GpuSynchronization{synchronization_name(s.type), ns(s.start), ns(s.end), s.streamId,
                                s.correlationId};
    }
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
      const auto& e = reinterpret_cast<const CUpti_ActivityExternalCorrelation&>(record);
      if (e.externalKind != kNcclCorrelationKind) return std::nullopt;
      return GpuExternalCorrelation{e.externalId, e.correlationId};
    }
    default:
      return std::nullopt;
  }
}

}  // namespace partrain::profiler::cupti
