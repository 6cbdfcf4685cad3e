#include "profiler/gpu_activity_translator.h"

#include <cxxabi.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <memory>

namespace partrain::profiler {
namespace {

constexpr uint8_t kOtherMemory = 6;  // memory::Category::kOther: the foreign job's reserve

}  // namespace

std::string_view copy_direction_name(CopyDirection direction) {
  switch (direction) {
    case CopyDirection::kHostToDevice: return "HtoD";
    case CopyDirection::kDeviceToHost: return "DtoH";
    case CopyDirection::kDeviceToDevice: return "DtoD";
    case CopyDirection::kHostToHost: return "HtoH";
    case CopyDirection::kPeerToPeer: return "PtoP";
    case CopyDirection::kOther: return "other";
  }
  return "other";
}

GpuActivityTranslator::GpuActivityTranslator(GpuTraceSink& sink) : sink_(sink) {}

void GpuActivityTranslator::add(const GpuActivity& activity) {
  std::visit([this](const auto& record) { on(record); }, activity);
}

const std::string& GpuActivityTranslator::demangled(const std::string& name) {
  auto found = names_.find(name);
  if (found != names_.end()) return found->second;
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> plain(
      abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status), std::free);
  // C names (NCCL's ncclDevKernel_*) are not mangled: kept as they are.
  return names_.emplace(name, status == 0 && plain ? std::string(plain.get()) : name)
      .first->second;
}

void GpuActivityTranslator::on(const GpuKernel& kernel) {
  KernelRecord record;
  record.slice = slice_on(TrackKind::kCudaStream, stream_track(kernel.device, kernel.stream),
                          demangled(kernel.name), SliceCategory::kKernel, kernel.start_ns,
                          kernel.end_ns);
  record.correlation_id = kernel.correlation;
  record.device = kernel.device;
  record.stream = kernel.stream;
  record.grid = kernel.grid;
  record.block = kernel.block;
  record.registers = kernel.registers;
  record.static_shared_bytes = kernel.static_shared_bytes;
  record.dynamic_shared_bytes = kernel.dynamic_shared_bytes;
  sink_.emit(record);
  latest_kernel_start_ns_ = std::max(latest_kernel_start_ns_, kernel.start_ns);

  auto link = external_of_.find(kernel.correlation);
  if (link != external_of_.end()) {
    extend_span(link->second, kernel.start_ns, kernel.end_ns);
    external_of_.erase(link);  // one kernel per launch call: its correlation id is spent
  } else if (unlinked_.size() < kMaxUnmatchedCorrelations) {
    // Its EXTERNAL_CORRELATION record may come in a later buffer.
    GpuSpan& span = unlinked_.try_emplace(kernel.correlation,
                                          GpuSpan{kernel.start_ns, kernel.end_ns}).first->second;
    span.start_ns = std::min(span.start_ns, kernel.start_ns);
    span.end_ns = std::max(span.end_ns, kernel.end_ns);
  }
}

void GpuActivityTranslator::on(const GpuExternalCorrelation& link) {
  // Links of API calls that launched no kernel (event records, stream waits inside NCCL) are
  // never spent: past the bound they are forgotten together.
  if (external_of_.size() >= kMaxUnmatchedCorrelations) external_of_.clear();
  external_of_[link.correlation] = link.external_id;
  auto early = unlinked_.find(link.correlation);
  if (early != unlinked_.end()) {
    extend_span(link.external_id, early->second.start_ns, early->second.end_ns);
    unlinked_.erase(early);
  }
}

void GpuActivityTranslator::extend_span(uint64_t external_id, int64_t start_ns, int64_t end_ns) {
  auto [it, added] = spans_.try_emplace(external_id, GpuSpan{start_ns, end_ns});
  if (!added) {
    it->second.start_ns = std::min(it->second.start_ns, start_ns);
    it->second.end_ns = std::max(it->second.end_ns, end_ns);
  }
}

std::string GpuActivityTranslator::stream_track(int32_t device, uint32_t stream) {
  return fmt::format("gpu{} stream {}", device, stream);
}

SliceEvent GpuActivityTranslator::slice_on(TrackKind kind, std::string track,
                                           std::string_view name, SliceCategory category,
                                           int64_t start_ns, int64_t end_ns) const {
  SliceEvent slice;
  slice.rank = sink_.rank();
  slice.track_kind = kind;
  slice.track = std::move(track);
  slice.name = name;
  slice.category = category;
  slice.ts_ns = sink_.timeline_ns(start_ns);
  slice.dur_ns = std::max<int64_t>(0, end_ns - start_ns);
  slice.step = sink_.step_at(start_ns);
  return slice;
}

void GpuActivityTranslator::on(const GpuMemcpy& copy) {
  sink_.emit(TransferRecord{slice_on(TrackKind::kCudaStream, stream_track(copy.device, copy.stream),
                                     fmt::format("memcpy {}", copy_direction_name(copy.direction)),
                                     SliceCategory::kMemcpy, copy.start_ns, copy.end_ns),
                            copy.bytes, copy.correlation, copy.device, copy.stream});
}

void GpuActivityTranslator::on(const GpuMemset& set) {
  sink_.emit(TransferRecord{slice_on(TrackKind::kCudaStream, stream_track(set.device, set.stream),
                                     "memset", SliceCategory::kMemset, set.start_ns, set.end_ns),
                            set.bytes, set.correlation, set.device, set.stream});
}

void GpuActivityTranslator::on(const GpuMemoryChange& change) {
  const auto bytes = static_cast<int64_t>(change.bytes);
  reserved_bytes_ = std::max<int64_t>(0, reserved_bytes_ + (change.release ? -bytes : bytes));
  sink_.emit(MemorySample{sink_.rank(), kOtherMemory, sink_.timeline_ns(change.ts_ns),
                          reserved_bytes_});
}

void GpuActivityTranslator::on(const GpuSynchronization& sync) {
  sink_.emit(slice_on(TrackKind::kCpuThread, "cuda sync", sync.what, SliceCategory::kSync,
                      sync.start_ns, sync.end_ns));
}

void GpuActivityTranslator::add_nccl_call(const NcclCallRecord& call) {
  if (pending_.size() >= kMaxPendingCalls) {
    sink_.collective(pending_.front().event, -1, -1);
    ++calls_without_gpu_time_;
    pending_.pop_front();
  }
  pending_.push_back(call);
}

void GpuActivityTranslator::flush(bool final) {
  std::deque<NcclCallRecord> waiting;
  // A group's calls share one correlation id: its span is dropped once none of them waits.
  std::unordered_map<uint64_t, int> still_waiting;
  for (NcclCallRecord& call : pending_) {
    auto span = spans_.find(call.correlation);
    if (span != spans_.end()) {
      sink_.collective(call.event, span->second.start_ns, span->second.end_ns);
    } else if (final || call.event.end_ns + kKernelWaitNs < latest_kernel_start_ns_) {
      sink_.collective(call.event, -1, -1);
      ++calls_without_gpu_time_;
    } else {
      ++still_waiting[call.correlation];
      waiting.push_back(std::move(call));
    }
  }
  pending_ = std::move(waiting);
  std::erase_if(spans_, [&](const auto& entry) { return !still_waiting.contains(entry.first); });
  if (final) {
    external_of_.clear();
    unlinked_.clear();
  }
}

}  // namespace partrain::profiler
