#include "profiler/import/kineto_rank_scan.h"

#include <algorithm>
#include <limits>

#include "core/interval_union.h"
#include "profiler/import/torch_collectives.h"

namespace partrain::profiler {
namespace {

using Json = nlohmann::json;

int64_t int_arg(const Json& args, const char* key, int64_t fallback) {
  if (!args.is_object()) return fallback;
  auto it = args.find(key);
  return it != args.end() && it->is_number_integer() ? it->get<int64_t>() : fallback;
}

std::array<int32_t, 3> dim3_arg(const Json& args, const char* key) {
  std::array<int32_t, 3> out{0, 0, 0};
  if (!args.is_object()) return out;
  auto it = args.find(key);
  if (it == args.end() || !it->is_array()) return out;
  for (size_t i = 0; i < 3 && i < it->size(); ++i) {
    if ((*it)[i].is_number_integer()) out[i] = static_cast<int32_t>((*it)[i].get<int64_t>());
  }
  return out;
}

std::string stream_track(int64_t device, int64_t stream) {
  return fmt::format("gpu{} stream {}", device, stream);
}

// Kineto's "Memcpy HtoD (Pageable -> Device)" as partrain names copies ("memcpy HtoD").
std::string copy_name(std::string_view kineto_name) {
  std::string_view kind = kineto_name.substr(std::min<size_t>(kineto_name.size(), 7));
  kind = kind.substr(0, kind.find(' '));
  return kind.empty() ? std::string("memcpy") : fmt::format("memcpy {}", kind);
}

// cudaLaunchKernel, cudaLaunchKernelExC, cuLaunchKernelEx, hipLaunchKernel, cudaGraphLaunch...
bool is_launch(const KinetoEvent& e) {
  return (e.category == "cuda_runtime" || e.category == "cuda_driver") &&
         e.name.find("Launch") != std::string::npos;
}

// The categories of host events: the rest, with a stream, are some device's activity.
bool is_host_category(std::string_view cat) {
  return cat == "cpu_op" || cat == "user_annotation" || cat == "python_function" ||
         cat == "Trace" || cat == "gpu_user_annotation" || cat.ends_with("_runtime") ||
         cat.ends_with("_driver") || cat.empty();
}

bool is_cuda_device_category(std::string_view cat) {
  return cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset" || cat == "cuda_sync";
}

bool wants_args(const KinetoEvent& e) {
  switch (e.phase) {
    case 'M':
    case 'C':
      return true;
    case 'i':
      return e.name == "[memory]";
    case 'X':
      if (is_cuda_device_category(e.category) || !is_host_category(e.category)) return true;
      return is_launch(e) || e.name.starts_with("c10d::") || e.name == "record_param_comms" ||
             e.name.starts_with("gloo:") || e.category.empty() || e.name.empty();
    default:
      return false;
  }
}

class RankScanner {
 public:
  RankScanner(int64_t shift_ns, StepMarker& steps, EventSpool& spool)
      : shift_ns_(shift_ns), step_marker_(steps), spool_(spool) {}

  KinetoRankScan& result() { return scan_; }
  const std::vector<KernelLaunch>& launches() const { return launches_; }

  // Once the file is read: whether its last step (two or more) holds no host event.
  bool last_step_empty() const {
    if (scan_.steps.size() < 2 || !any_host_event_) return false;
    const StepSpan& last = *std::max_element(
        scan_.steps.begin(), scan_.steps.end(),
        [](const StepSpan& a, const StepSpan& b) { return a.start_ns < b.start_ns; });
    return std::none_of(host_starts_.begin(), host_starts_.end(),
                        [&](int64_t ts) { return ts >= last.start_ns && ts <= last.end_ns; });
  }
  const Status& error() const { return error_; }

  bool on_event(KinetoEvent& e) {
    ++scan_.events;
    if (e.unreadable_time) ++scan_.unreadable_times;
    if (e.phase == 'M') {
      if (e.name == "thread_name" && e.args.is_object() && e.args.contains("name") &&
          e.args["name"].is_string()) {
        scan_.thread_names[kineto_thread_key(e.pid, e.tid)] = e.args["name"].get<std::string>();
      }
      return true;
    }
    if (!e.ts_ns) {
      ++scan_.skipped;
      return true;
    }
    e.ts_ns = *e.ts_ns + shift_ns_;
    if (e.dur_ns.value_or(0) < 0) ++scan_.negative_durations;
    const int64_t dur = std::max<int64_t>(0, e.dur_ns.value_or(0));
    e.dur_ns = dur;
    bool kept = false;
    if (e.phase == 'X') {
      kept = on_duration(e);
    } else if (e.phase == 'i' && e.name == "[memory]") {
      kept = on_memory(e);
    } else if (e.phase == 'C') {
      kept = on_counter(e);
    }
    if (!kept) {
      ++scan_.skipped;
    } else {
      scan_.first_ns = std::min(scan_.first_ns, *e.ts_ns);
      scan_.last_ns = std::max(scan_.last_ns, *e.ts_ns + dur);
    }
    return error_.is_ok();
  }

 private:
  bool on_duration(const KinetoEvent& e) {
    const std::string& cat = e.category;
    if (cat == "Trace" || cat == "gpu_user_annotation") return false;  // Kineto's own spans
    if (!is_host_category(cat) && !is_cuda_device_category(cat) && e.args.is_object() &&
        e.args.contains("stream")) {
      // HTA's rule: an event with a stream is device work. Not CUDA's: not read as host time.
      ++scan_.foreign_device_events[cat];
      return false;
    }
    if (cat == "kernel") return on_kernel(e);
    if (cat == "gpu_memcpy" || cat == "gpu_memset") return on_transfer(e);
    if (cat == "cuda_sync") {
      const int64_t device = int_arg(e.args, "device", e.pid.number);
      const int64_t stream = int_arg(e.args, "stream", -1);
      if (stream < 0) return false;
      SliceEvent slice =
          slice_of(e, TrackKind::kCudaStream, stream_track(device, stream), SliceCategory::kSync);
      return spool(slice);
    }
    SliceCategory category = SliceCategory::kPhase;
    if (is_launch(e)) {
      on_launch(e);
    } else if (cat == "user_annotation") {
      if (auto step = step_marker_.step_of(e.name)) {
        scan_.steps.push_back({*step, *e.ts_ns, *e.ts_ns + *e.dur_ns});
        if (scan_.main_pid < 0 && !e.pid.is_text) scan_.main_pid = e.pid.number;
        category = SliceCategory::kStep;
      } else if (auto t = gloo_transfer_of(e)) {
        scan_.collectives.gloo_transfers.push_back(*t);
      }
    } else if (cat == "cpu_op") {
      if (auto record = comms_record_of(e)) {
        note_collective_op(record->thread, record->start_ns, record->end_ns);
        scan_.collectives.comms_records.push_back(std::move(*record));
      } else if (auto call = c10d_call_of(e)) {
        note_collective_op(call->thread, call->start_ns, call->end_ns);
        scan_.collectives.c10d_calls.push_back(*call);
      } else if (e.name != "record_param_comms" && !e.name.starts_with("c10d::")) {
        // ATen ops: the compute of a CPU rank (the second pass makes them phases on a GPU rank,
        // whose compute is its kernels).
        category = SliceCategory::kCompute;
      }
      if (scan_.main_pid < 0 && !e.pid.is_text) scan_.main_pid = e.pid.number;
    }
    if (category == SliceCategory::kStep) {
      on_step_start(*e.ts_ns);
    } else {
      on_host_event(*e.ts_ns);
    }
    SliceEvent slice =
        slice_of(e, TrackKind::kCpuThread, kineto_thread_key(e.pid, e.tid), category);
    return spool(slice);
  }

  bool on_kernel(const KinetoEvent& e) {
    KernelRecord k;
    const int64_t device = int_arg(e.args, "device", e.pid.is_text ? 0 : e.pid.number);
    const int64_t stream = int_arg(e.args, "stream", e.tid.is_text ? 0 : e.tid.number);
    k.slice =
        slice_of(e, TrackKind::kCudaStream, stream_track(device, stream), SliceCategory::kKernel);
    k.correlation_id = static_cast<uint32_t>(int_arg(e.args, "correlation", 0));
    k.device = static_cast<int32_t>(device);
    k.stream = stream;
    k.grid = dim3_arg(e.args, "grid");
    k.block = dim3_arg(e.args, "block");
    k.registers = static_cast<int32_t>(int_arg(e.args, "registers per thread", 0));
    // Kineto sums static and dynamic shared memory into one figure.
    k.dynamic_shared_bytes = static_cast<int32_t>(int_arg(e.args, "shared memory", 0));
    ++scan_.kernels_per_device[static_cast<int>(device)];
    if (auto nccl = nccl_kernel_of(e)) scan_.collectives.nccl_kernels.push_back(std::move(*nccl));
    return spool(k);
  }

  bool on_transfer(const KinetoEvent& e) {
    TransferRecord t;
    const int64_t device = int_arg(e.args, "device", e.pid.is_text ? 0 : e.pid.number);
    const int64_t stream = int_arg(e.args, "stream", e.tid.is_text ? 0 : e.tid.number);
    const bool copy = e.category == "gpu_memcpy";
    t.slice = slice_of(e, TrackKind::kCudaStream, stream_track(device, stream),
                       copy ? SliceCategory::kMemcpy : SliceCategory::kMemset);
    t.slice.name = copy ? copy_name(e.name) : "memset";
    t.bytes = static_cast<uint64_t>(std::max<int64_t>(0, int_arg(e.args, "bytes", 0)));
    t.correlation_id = static_cast<uint32_t>(int_arg(e.args, "correlation", 0));
    t.device = static_cast<int32_t>(device);
    t.stream = stream;
    return spool(t);
  }

  // "[memory]": the allocator's total after one allocation or free, on the CPU (Device Type 0)
  // or a CUDA device (Device Type 1, Device Id the device).
  bool on_memory(const KinetoEvent& e) {
    const int64_t type = int_arg(e.args, "Device Type", -1);
    const int64_t allocated = int_arg(e.args, "Total Allocated", -1);
    if (allocated < 0 || (type != 0 && type != 1)) return false;
    MemorySample m;
    if (type == 1) {
      const int device = static_cast<int>(int_arg(e.args, "Device Id", 0));
      m.rank = spooled_cuda_memory(device);
      ++scan_.memory_events_per_cuda_device[device];
    } else {
      m.rank = kSpooledCpuMemory;
      ++scan_.cpu_memory_events;
    }
    m.ts_ns = *e.ts_ns;
    m.bytes = allocated;
    return spool(m);
  }

  bool on_counter(const KinetoEvent& e) {
    if (!e.args.is_object()) return false;
    bool any = false;
    for (const auto& [key, value] : e.args.items()) {
      if (!value.is_number()) continue;
      CounterSample c;
      c.name = e.args.size() == 1 ? e.name : fmt::format("{}.{}", e.name, key);
      c.ts_ns = *e.ts_ns;
      c.value = value.get<double>();
      any = spool(c) || any;
    }
    return any;
  }

  // A launch is kept only inside a collective op already read on its thread (c10d launches
  // NCCL's kernels within its op, and Kineto writes its host ops before the runtime's events), so
  // memory holds the collectives' launches, not every kernel's.
  void note_collective_op(const std::string& thread, int64_t start_ns, int64_t end_ns) {
    CollectiveOpSpans& ops = collective_ops_by_thread_[thread];
    ops.spans.emplace_back(start_ns, end_ns);
    ops.merged = false;
  }
  void on_launch(const KinetoEvent& e) {
    auto launch = kernel_launch_of(e);
    if (!launch) return;
    auto it = collective_ops_by_thread_.find(launch->thread);
    if (it == collective_ops_by_thread_.end() || !it->second.contain(launch->ts_ns)) return;
    launches_.push_back(std::move(*launch));
  }

  // Host events are kept (their start) only from the latest step's start on: no earlier one can
  // be in the last step. Kineto writes the host events mostly in time order, so few are kept.
  void on_host_event(int64_t ts_ns) {
    any_host_event_ = true;
    if (ts_ns >= latest_step_start_ns_) host_starts_.push_back(ts_ns);
  }
  void on_step_start(int64_t ts_ns) {
    if (ts_ns <= latest_step_start_ns_) return;
    latest_step_start_ns_ = ts_ns;
    std::erase_if(host_starts_, [&](int64_t t) { return t < ts_ns; });
  }

  SliceEvent slice_of(const KinetoEvent& e, TrackKind kind, std::string track,
                      SliceCategory category) const {
    SliceEvent s;
    s.track_kind = kind;
    s.track = std::move(track);
    s.name = e.name;
    s.category = category;
    s.ts_ns = *e.ts_ns;
    s.dur_ns = *e.dur_ns;
    return s;
  }

  bool spool(const TraceEvent& event) {
    if (!error_.is_ok()) return false;
    error_ = spool_.append(event);
    if (error_.is_ok()) ++scan_.spooled;
    return error_.is_ok();
  }

  int64_t shift_ns_;
  StepMarker& step_marker_;
  EventSpool& spool_;
  KinetoRankScan scan_;
  // The launches inside collective ops, until the file is read: those of NCCL kernels are kept.
  std::vector<KernelLaunch> launches_;
  // The spans of one thread's collective ops, merged into disjoint ones when asked.
  struct CollectiveOpSpans {
    std::vector<std::pair<int64_t, int64_t>> spans;
    bool merged = true;
    bool contain(int64_t ts_ns) {
      if (!merged) merge();
      auto after = std::upper_bound(spans.begin(), spans.end(),
                                    std::pair(ts_ns, std::numeric_limits<int64_t>::max()));
      return after != spans.begin() && std::prev(after)->second >= ts_ns;
    }
    void merge() {
      merge_intervals(spans);
      merged = true;
    }
  };
  std::map<std::string, CollectiveOpSpans> collective_ops_by_thread_;
  int64_t latest_step_start_ns_ = INT64_MIN;
  std::vector<int64_t> host_starts_;  // of host events from latest_step_start_ns_ on
  bool any_host_event_ = false;
  Status error_;
};

}  // namespace

int KinetoRankScan::main_device() const {
  const auto& counts =
      kernels_per_device.empty() ? memory_events_per_cuda_device : kernels_per_device;
  if (counts.empty()) return -1;
  return std::max_element(counts.begin(), counts.end(),
                          [](const auto& a, const auto& b) { return a.second < b.second; })
      ->first;
}

StatusOr<KinetoRankScan> scan_kineto_rank(GzipText& text, int64_t shift_ns, StepMarker& steps,
                                          EventSpool& spool) {
  RankScanner scanner(shift_ns, steps, spool);
  KinetoReadCallbacks callbacks;
  callbacks.wants_args = wants_args;
  callbacks.on_event = [&scanner](KinetoEvent& e) { return scanner.on_event(e); };
  auto header = read_kineto_trace(text, callbacks);
  if (!scanner.error().is_ok()) return scanner.error();
  if (!header.is_ok()) return header.status();
  std::sort(scanner.result().steps.begin(), scanner.result().steps.end(),
            [](const StepSpan& a, const StepSpan& b) { return a.start_ns < b.start_ns; });
  place_launches(scanner.result().collectives.nccl_kernels, scanner.launches());
  scanner.result().collectives.gpu_rank = scanner.result().has_kernels();
  scanner.result().last_step_empty = scanner.last_step_empty();
  scanner.result().exporter = header->exporter;
  scanner.result().kineto_metadata = header->schema_version.has_value() ||
                                     header->distributed.has_value() || header->base_time_ns != 0;
  return std::move(scanner.result());
}

}  // namespace partrain::profiler
