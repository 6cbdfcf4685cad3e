// The events a rank's recorder ships to its node's collector and the SQLite writer stores
// (docs/trace-format.md), and their compact binary encoding: explicit little-endian fields,
// bounded strings and records, so the collector can decode bytes it does not trust.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "core/status.h"
#include "profiler/collective_event.h"

namespace partrain::profiler {

// Codes match the lookup tables of share/schema.sql.
enum class TrackKind : uint8_t { kCpuThread, kCudaStream, kComm, kMemory, kCounter };
enum class SliceCategory : uint8_t {
  kCompute, kCollective, kP2p, kKernel, kMemcpy, kMemset, kSync, kStep, kPhase
};
enum class RunStatus : uint8_t { kRunning, kCompleted, kFailed, kKilled, kIncomplete };
enum class StatSeverity : uint8_t { kInfo, kDataLoss, kError };

std::string_view track_kind_name(TrackKind kind);
std::string_view slice_category_name(SliceCategory category);
std::string_view run_status_name(RunStatus status);
std::string_view stat_severity_name(StatSeverity severity);

// A span of time on one track of one rank (a phase, a compute region, a memcpy...).
struct SliceEvent {
  int32_t rank = 0;
  TrackKind track_kind = TrackKind::kCpuThread;
  std::string track;  // thread, stream or communicator name
  std::string name;
  SliceCategory category = SliceCategory::kCompute;
  int64_t ts_ns = 0;
  int64_t dur_ns = 0;
  int64_t step = -1;  // -1: not known (stored as NULL)
  int32_t micro_batch = -1;
  int32_t layer = -1;
};

// A collective or p2p op of one world rank; stored as a slice on the communicator's track plus
// its collective row. `event.op`, `dtype` and `reduce_op` travel as codes of a fixed vocabulary
// (collective_op_names() ...); names outside it arrive as "other".
struct CollectiveRecord {
  int32_t world_rank = 0;
  int64_t step = -1;
  int64_t gpu_start_ns = -1;  // -1: not measured
  int64_t gpu_end_ns = -1;
  CollectiveEvent event;
};

// Bytes in use in one memory::Category (its integer value) from ts_ns on.
struct MemorySample {
  int32_t rank = 0;
  uint8_t category = 0;
  int64_t ts_ns = 0;
  int64_t bytes = 0;
};

// One value of a sampled quantity on the rank's counter track `name` (its unit in the name:
// gpu_sm_clock_mhz, gpu_power_w).
struct CounterSample {
  int32_t rank = 0;
  std::string name;
  int64_t ts_ns = 0;
  double value = 0;
};

struct StepEvent {
  int32_t rank = 0;
  int64_t step = 0;
  int64_t ts_ns = 0;
  int64_t dur_ns = 0;
  double loss = 0.0;
  int64_t tokens = 0;
  // torchrun's restarts of the job before the process that ran the step (its
  // TORCHELASTIC_RESTART_COUNT): each attempt numbers its steps from 0 again.
  int32_t attempt = 0;
};

// A trace problem or counter; values add up per (name, rank). rank -1: the whole run.
struct StatEvent {
  std::string name;
  int32_t rank = -1;
  int64_t value = 0;
  StatSeverity severity = StatSeverity::kInfo;
  std::string description;
};

// Who a rank is: sent by the rank at start (and when its clock is re-measured), and by the
// launcher with `exited` set once its exit status is known. An exit record only fills in what the
// rank did not say itself (a rank killed before it connected still gets host, pid and node).
struct RankInfo {
  int32_t rank = 0;
  int32_t local_rank = 0;
  int32_t node = 0;
  std::string host;
  int64_t pid = 0;
  std::string device;
  int64_t clock_offset_ns = 0;
  int64_t clock_uncertainty_ns = 0;
  double clock_drift_ppm = 0;
  bool exited = false;
  int32_t exit_code = 0;    // meaningless when a signal ended the rank: stored as NULL then
  int32_t exit_signal = 0;  // the signal that ended it, 0 if none
};

// A GPU kernel (CUPTI's CONCURRENT_KERNEL record): its slice on the stream's track and its row
// in the kernel table.
struct KernelRecord {
  SliceEvent slice;  // track_kind kCudaStream, category kKernel, name demangled
  uint32_t correlation_id = 0;
  int32_t device = 0;
  int64_t stream = 0;
  std::array<int32_t, 3> grid{};
  std::array<int32_t, 3> block{};
  int32_t registers = 0;
  int32_t static_shared_bytes = 0;
  int32_t dynamic_shared_bytes = 0;
};

// A GPU copy or fill (CUPTI's MEMCPY and MEMSET records): its slice on the stream's track
// ("memcpy HtoD", "memset") and its row in the transfer table, with the bytes it moved.
struct TransferRecord {
  SliceEvent slice;  // track_kind kCudaStream, category kMemcpy or kMemset
  uint64_t bytes = 0;
  uint32_t correlation_id = 0;
  int32_t device = 0;
  int64_t stream = 0;
};

// How a mixture-of-experts layer routed one step's tokens, as the workload's router counted them
// over the whole micro-batch (the same on every rank of the layer's group): the token-to-expert
// assignments each routed expert received (top-k counts a token k times), before any capacity
// cut; of those, the assignments dropped for want of capacity (0 when dropless); and the
// load-balancing auxiliary loss (NaN when the layer does not compute one).
struct ExpertLoadRecord {
  int32_t rank = 0;
  int64_t step = 0;
  int32_t layer = 0;
  std::vector<int64_t> tokens_per_expert;
  int64_t dropped_tokens = 0;
  double aux_loss = 0;
};

// The run's row. Stored as an update of what it knows: an empty run_id or command, a config of
// "{}" (or empty), a world size or start of 0 leave the stored value as it is.
struct RunInfo {
  std::string run_id;
  std::string command;
  std::string config_json;
  int32_t world_size = 0;
  int64_t start_unix_ns = 0;
  int64_t start_ns = 0;
};

using TraceEvent = std::variant<SliceEvent, CollectiveRecord, MemorySample, StepEvent, StatEvent,
                                RankInfo, RunInfo, KernelRecord, CounterSample, TransferRecord,
                                ExpertLoadRecord>;

// Encoding limits, checked by the decoder before it allocates anything.
inline constexpr size_t kMaxEventStringBytes = 4096;
inline constexpr size_t kMaxEventRecordBytes = 64 * 1024;
inline constexpr size_t kMaxGroupRanks = 8192;
// Routed experts of one layer (DeepSeek-V3 has 256): 8 bytes each keeps a record far below
// kMaxEventRecordBytes.
inline constexpr size_t kMaxExperts = 4096;

std::span<const std::string_view> collective_op_names();
std::span<const std::string_view> collective_dtype_names();
std::span<const std::string_view> reduce_op_names();

// Appends one record: u32 payload size, u8 type, payload. Strings longer than
// kMaxEventStringBytes are cut there (and group ranks at kMaxGroupRanks, experts at kMaxExperts)
// so every record decodes.
void encode_event(const TraceEvent& event, std::vector<uint8_t>& out);
// Decodes a sequence of whole records; kUnreadable names the first bad record and why.
StatusOr<std::vector<TraceEvent>> decode_events(std::span<const uint8_t> bytes);
// The same, appending to `out` (which a collector reuses batch after batch, so decoding allocates
// little). On failure `out` is left as it was.
Status decode_events_into(std::span<const uint8_t> bytes, std::vector<TraceEvent>& out);

}  // namespace partrain::profiler
