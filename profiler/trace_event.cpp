#include "profiler/trace_event.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <type_traits>

namespace partrain::profiler {

namespace {

constexpr std::array<std::string_view, 12> kOps = {
    "other",  "all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce",
    "send",   "recv",       "barrier",        "all_to_all", "gather",    "scatter"};
constexpr std::array<std::string_view, 13> kDtypes = {
    "other", "float",  "bfloat16", "half",   "double",   "int8",    "uint8",
    "int32", "uint32", "int64",    "uint64", "fp8_e4m3", "fp8_e5m2"};
// Index 0 is "no reduction" (an empty name), as CollectiveEvent spells it.
constexpr std::array<std::string_view, 7> kReduceOps = {"", "sum", "prod", "max", "min", "avg",
                                                        "other"};

template <size_t N>
uint8_t code_of(const std::array<std::string_view, N>& names, std::string_view name,
                uint8_t other) {
  for (size_t i = 0; i < N; ++i) {
    if (names[i] == name) return static_cast<uint8_t>(i);
  }
  return other;
}

// Record types on the wire: never renumber, only append.
enum class RecordType : uint8_t {
  kSlice = 1, kCollective = 2, kMemory = 3, kStep = 4, kStat = 5, kRank = 6, kRun = 7,
  kKernel = 8, kCounter = 9, kTransfer = 10, kExpertLoad = 11
};

class Writer {
 public:
  explicit Writer(std::vector<uint8_t>& out) : out_(out) {}
  template <typename T>
  void put(T value) {
    static_assert(std::is_integral_v<T>);
    using U = std::make_unsigned_t<T>;
    U bits = static_cast<U>(value);
    if constexpr (std::endian::native == std::endian::little) {
      const auto* bytes = reinterpret_cast<const uint8_t*>(&bits);  // the wire order is the host's
      out_.insert(out_.end(), bytes, bytes + sizeof(T));
    } else {
      for (size_t i = 0; i < sizeof(T); ++i) out_.push_back(static_cast<uint8_t>(bits >> (8 * i)));
    }
  }
  void put_double(double value) {
    uint64_t bits = 0;
    std::memcpy(&bits, &value, sizeof bits);
    put(bits);
  }
  void put_string(std::string_view s) {
    s = s.substr(0, kMaxEventStringBytes);
    put(static_cast<uint16_t>(s.size()));
    out_.insert(out_.end(), s.begin(), s.end());
  }

 private:
  std::vector<uint8_t>& out_;
};

// Reads fields of one record; every read is checked against the record's end, and a failed read
// leaves the reader failed so callers check once at the end.
class Reader {
 public:
  explicit Reader(std::span<const uint8_t> bytes) : bytes_(bytes) {}
  template <typename T>
  T get() {
    static_assert(std::is_integral_v<T>);
    if (!take(sizeof(T))) return T{};
    std::make_unsigned_t<T> bits = 0;
    if constexpr (std::endian::native == std::endian::little) {
      std::memcpy(&bits, bytes_.data() + pos_, sizeof(T));  // the wire order is the host's
    } else {
      for (size_t i = 0; i < sizeof(T); ++i) {
        bits = static_cast<decltype(bits)>(
            bits | (static_cast<decltype(bits)>(bytes_[pos_ + i]) << (8 * i)));
      }
    }
    pos_ += sizeof(T);
    return static_cast<T>(bits);
  }
  double get_double() {
    uint64_t bits = get<uint64_t>();
    double value = 0;
    std::memcpy(&value, &bits, sizeof value);
    return value;
  }
  // Into `s`, reusing its capacity.
  void get_string(std::string& s) {
    uint16_t size = get<uint16_t>();
    if (size > kMaxEventStringBytes) {
      ok_ = false;
      return;
    }
    if (!take(size)) return;
    s.assign(reinterpret_cast<const char*>(bytes_.data() + pos_), size);
    pos_ += size;
  }
  template <size_t N>
  std::string_view get_name(const std::array<std::string_view, N>& names) {
    uint8_t code = get<uint8_t>();
    if (code >= N) ok_ = false;
    return ok_ ? names[code] : names[0];
  }
  // Enum values up to `last`.
  template <typename E>
  E get_enum(E last) {
    uint8_t code = get<uint8_t>();
    if (code > static_cast<uint8_t>(last)) ok_ = false;
    return ok_ ? static_cast<E>(code) : E{};
  }
  void fail() { ok_ = false; }
  bool ok() const { return ok_; }
  size_t remaining() const { return bytes_.size() - pos_; }
  bool finished_exactly() const { return ok_ && pos_ == bytes_.size(); }

 private:
  bool take(size_t n) {
    if (!ok_ || bytes_.size() - pos_ < n) {
      ok_ = false;
      return false;
    }
    return true;
  }
  std::span<const uint8_t> bytes_;
  size_t pos_ = 0;
  bool ok_ = true;
};

void encode(const SliceEvent& e, Writer& w) {
  w.put(e.rank);
  w.put(static_cast<uint8_t>(e.track_kind));
  w.put_string(e.track);
  w.put_string(e.name);
  w.put(static_cast<uint8_t>(e.category));
  w.put(e.ts_ns);
  w.put(e.dur_ns);
  w.put(e.step);
  w.put(e.micro_batch);
  w.put(e.layer);
}

void encode(const CollectiveRecord& r, Writer& w) {
  const CollectiveEvent& e = r.event;
  w.put(r.world_rank);
  w.put(r.step);
  w.put(r.gpu_start_ns);
  w.put(r.gpu_end_ns);
  w.put_string(e.comm_id);
  w.put(e.seq);
  w.put(code_of(kOps, e.op, 0));
  w.put(code_of(kDtypes, e.dtype, 0));
  w.put(code_of(kReduceOps, e.reduce_op, static_cast<uint8_t>(kReduceOps.size() - 1)));
  w.put(e.count);
  w.put(e.bytes);
  w.put(static_cast<int32_t>(e.peer));
  w.put(static_cast<int32_t>(e.rank));
  size_t members = std::min(e.group_ranks.size(), kMaxGroupRanks);
  w.put(static_cast<uint32_t>(members));
  for (size_t i = 0; i < members; ++i) w.put(static_cast<int32_t>(e.group_ranks[i]));
  w.put(static_cast<int32_t>(e.group_size));
  w.put(e.enqueue_ns);
  w.put(e.start_ns);
  w.put(e.end_ns);
  w.put(static_cast<uint8_t>(e.state));
  w.put_string(e.algorithm);
  w.put_string(e.protocol);
  w.put(static_cast<int32_t>(e.channels));
  w.put_string(e.label);
}

void encode(const MemorySample& e, Writer& w) {
  w.put(e.rank);
  w.put(e.category);
  w.put(e.ts_ns);
  w.put(e.bytes);
}

void encode(const StepEvent& e, Writer& w) {
  w.put(e.rank);
  w.put(e.step);
  w.put(e.ts_ns);
  w.put(e.dur_ns);
  w.put_double(e.loss);
  w.put(e.tokens);
  w.put(e.attempt);
}

void encode(const StatEvent& e, Writer& w) {
  w.put_string(e.name);
  w.put(e.rank);
  w.put(e.value);
  w.put(static_cast<uint8_t>(e.severity));
  w.put_string(e.description);
}

void encode(const RankInfo& e, Writer& w) {
  w.put(e.rank);
  w.put(e.local_rank);
  w.put(e.node);
  w.put_string(e.host);
  w.put(e.pid);
  w.put_string(e.device);
  w.put(e.clock_offset_ns);
  w.put(e.clock_uncertainty_ns);
  w.put_double(e.clock_drift_ppm);
  w.put(static_cast<uint8_t>(e.exited ? 1 : 0));
  w.put(e.exit_code);
  w.put(e.exit_signal);
}

void encode(const RunInfo& e, Writer& w) {
  w.put_string(e.run_id);
  w.put_string(e.command);
  w.put_string(e.config_json);
  w.put(e.world_size);
  w.put(e.start_unix_ns);
  w.put(e.start_ns);
}

void encode(const KernelRecord& e, Writer& w) {
  encode(e.slice, w);
  w.put(e.correlation_id);
  w.put(e.device);
  w.put(e.stream);
  for (int32_t v : e.grid) w.put(v);
  for (int32_t v : e.block) w.put(v);
  w.put(e.registers);
  w.put(e.static_shared_bytes);
  w.put(e.dynamic_shared_bytes);
}

void encode(const TransferRecord& e, Writer& w) {
  encode(e.slice, w);
  w.put(e.bytes);
  w.put(e.correlation_id);
  w.put(e.device);
  w.put(e.stream);
}

void encode(const CounterSample& e, Writer& w) {
  w.put(e.rank);
  w.put_string(e.name);
  w.put(e.ts_ns);
  w.put_double(e.value);
}

void encode(const ExpertLoadRecord& e, Writer& w) {
  w.put(e.rank);
  w.put(e.step);
  w.put(e.layer);
  const size_t experts = std::min(e.tokens_per_expert.size(), kMaxExperts);
  w.put(static_cast<uint32_t>(experts));
  for (size_t i = 0; i < experts; ++i) w.put(e.tokens_per_expert[i]);
  w.put(e.dropped_tokens);
  w.put_double(e.aux_loss);
}

constexpr RecordType record_type(const TraceEvent& event) {
  return static_cast<RecordType>(event.index() + 1);
}
static_assert(std::variant_size_v<TraceEvent> == static_cast<size_t>(RecordType::kExpertLoad),
              "a new event type is appended to TraceEvent and to RecordType together");

void decode(Reader& r, SliceEvent& e) {
  e.rank = r.get<int32_t>();
  e.track_kind = r.get_enum(TrackKind::kMemory);
  r.get_string(e.track);
  r.get_string(e.name);
  e.category = r.get_enum(SliceCategory::kPhase);
  e.ts_ns = r.get<int64_t>();
  e.dur_ns = r.get<int64_t>();
  e.step = r.get<int64_t>();
  e.micro_batch = r.get<int32_t>();
  e.layer = r.get<int32_t>();
}

void decode(Reader& r, CollectiveRecord& rec) {
  CollectiveEvent& e = rec.event;
  rec.world_rank = r.get<int32_t>();
  rec.step = r.get<int64_t>();
  rec.gpu_start_ns = r.get<int64_t>();
  rec.gpu_end_ns = r.get<int64_t>();
  r.get_string(e.comm_id);
  e.seq = r.get<uint64_t>();
  e.op = r.get_name(kOps);
  e.dtype = r.get_name(kDtypes);
  e.reduce_op = r.get_name(kReduceOps);
  e.count = r.get<uint64_t>();
  e.bytes = r.get<uint64_t>();
  e.peer = r.get<int32_t>();
  e.rank = r.get<int32_t>();
  uint32_t members = r.get<uint32_t>();
  // Checked against what is left before reserving, so a forged count cannot allocate.
  if (members > kMaxGroupRanks || members * sizeof(int32_t) > r.remaining()) {
    r.fail();
    return;
  }
  e.group_ranks.resize(members);
  for (uint32_t i = 0; i < members; ++i) e.group_ranks[i] = r.get<int32_t>();
  e.group_size = r.get<int32_t>();
  if (e.group_size < 0) r.fail();
  e.enqueue_ns = r.get<int64_t>();
  e.start_ns = r.get<int64_t>();
  e.end_ns = r.get<int64_t>();
  e.state = r.get_enum(CollectiveState::kFailed);
  r.get_string(e.algorithm);
  r.get_string(e.protocol);
  e.channels = r.get<int32_t>();
  if (e.channels < 0) r.fail();
  r.get_string(e.label);
}

void decode(Reader& r, MemorySample& e) {
  e.rank = r.get<int32_t>();
  e.category = r.get<uint8_t>();
  e.ts_ns = r.get<int64_t>();
  e.bytes = r.get<int64_t>();
}

void decode(Reader& r, StepEvent& e) {
  e.rank = r.get<int32_t>();
  e.step = r.get<int64_t>();
  e.ts_ns = r.get<int64_t>();
  e.dur_ns = r.get<int64_t>();
  e.loss = r.get_double();
  e.tokens = r.get<int64_t>();
  e.attempt = r.get<int32_t>();
  if (e.attempt < 0) r.fail();
}

void decode(Reader& r, StatEvent& e) {
  r.get_string(e.name);
  e.rank = r.get<int32_t>();
  e.value = r.get<int64_t>();
  e.severity = r.get_enum(StatSeverity::kError);
  r.get_string(e.description);
}

void decode(Reader& r, RankInfo& e) {
  e.rank = r.get<int32_t>();
  e.local_rank = r.get<int32_t>();
  e.node = r.get<int32_t>();
  r.get_string(e.host);
  e.pid = r.get<int64_t>();
  r.get_string(e.device);
  e.clock_offset_ns = r.get<int64_t>();
  e.clock_uncertainty_ns = r.get<int64_t>();
  e.clock_drift_ppm = r.get_double();
  e.exited = r.get<uint8_t>() != 0;
  e.exit_code = r.get<int32_t>();
  e.exit_signal = r.get<int32_t>();
}

void decode(Reader& r, RunInfo& e) {
  r.get_string(e.run_id);
  r.get_string(e.command);
  r.get_string(e.config_json);
  e.world_size = r.get<int32_t>();
  e.start_unix_ns = r.get<int64_t>();
  e.start_ns = r.get<int64_t>();
}

void decode(Reader& r, KernelRecord& e) {
  decode(r, e.slice);
  e.correlation_id = r.get<uint32_t>();
  e.device = r.get<int32_t>();
  e.stream = r.get<int64_t>();
  for (int32_t& v : e.grid) v = r.get<int32_t>();
  for (int32_t& v : e.block) v = r.get<int32_t>();
  e.registers = r.get<int32_t>();
  e.static_shared_bytes = r.get<int32_t>();
  e.dynamic_shared_bytes = r.get<int32_t>();
}

void decode(Reader& r, TransferRecord& e) {
  decode(r, e.slice);
  e.bytes = r.get<uint64_t>();
  e.correlation_id = r.get<uint32_t>();
  e.device = r.get<int32_t>();
  e.stream = r.get<int64_t>();
}

void decode(Reader& r, CounterSample& e) {
  e.rank = r.get<int32_t>();
  r.get_string(e.name);
  e.ts_ns = r.get<int64_t>();
  e.value = r.get_double();
}

void decode(Reader& r, ExpertLoadRecord& e) {
  e.rank = r.get<int32_t>();
  e.step = r.get<int64_t>();
  e.layer = r.get<int32_t>();
  const uint32_t experts = r.get<uint32_t>();
  // Checked against what is left before reserving, so a forged count cannot allocate.
  if (experts > kMaxExperts || experts * sizeof(int64_t) > r.remaining()) {
    r.fail();
    return;
  }
  e.tokens_per_expert.resize(experts);
  for (int64_t& tokens : e.tokens_per_expert) tokens = r.get<int64_t>();
  e.dropped_tokens = r.get<int64_t>();
  e.aux_loss = r.get_double();
}

// Decodes a record of type `type` into a new element at the end of out; false for an unknown
// type (nothing appended).
template <size_t I = 0>
bool decode_record(RecordType type, Reader& r, std::vector<TraceEvent>& out) {
  if constexpr (I == std::variant_size_v<TraceEvent>) {
    return false;
  } else {
    if (static_cast<size_t>(type) != I + 1) return decode_record<I + 1>(type, r, out);
    decode(r, std::get<I>(out.emplace_back(std::in_place_index<I>)));
    return true;
  }
}

}  // namespace

std::string_view track_kind_name(TrackKind kind) {
  switch (kind) {
    case TrackKind::kCpuThread: return "cpu_thread";
    case TrackKind::kCudaStream: return "cuda_stream";
    case TrackKind::kComm: return "comm";
    case TrackKind::kMemory: return "memory";
    case TrackKind::kCounter: return "counter";
  }
  return "unknown";
}

std::string_view slice_category_name(SliceCategory category) {
  switch (category) {
    case SliceCategory::kCompute: return "compute";
    case SliceCategory::kCollective: return "collective";
    case SliceCategory::kP2p: return "p2p";
    case SliceCategory::kKernel: return "kernel";
    case SliceCategory::kMemcpy: return "memcpy";
    case SliceCategory::kMemset: return "memset";
    case SliceCategory::kSync: return "sync";
    case SliceCategory::kStep: return "step";
    case SliceCategory::kPhase: return "phase";
  }
  return "unknown";
}

std::string_view run_status_name(RunStatus status) {
  switch (status) {
    case RunStatus::kRunning: return "running";
    case RunStatus::kCompleted: return "completed";
    case RunStatus::kFailed: return "failed";
    case RunStatus::kKilled: return "killed";
    case RunStatus::kIncomplete: return "incomplete";
  }
  return "unknown";
}

std::string_view stat_severity_name(StatSeverity severity) {
  switch (severity) {
    case StatSeverity::kInfo: return "info";
    case StatSeverity::kDataLoss: return "data_loss";
    case StatSeverity::kError: return "error";
  }
  return "unknown";
}

std::span<const std::string_view> collective_op_names() { return kOps; }
std::span<const std::string_view> collective_dtype_names() { return kDtypes; }
std::span<const std::string_view> reduce_op_names() { return kReduceOps; }

void encode_event(const TraceEvent& event, std::vector<uint8_t>& out) {
  size_t size_at = out.size();
  Writer w(out);
  w.put(uint32_t{0});  // patched below, once the payload size is known
  w.put(static_cast<uint8_t>(record_type(event)));
  std::visit([&w](const auto& e) { encode(e, w); }, event);
  auto size = static_cast<uint32_t>(out.size() - size_at - sizeof(uint32_t));
  for (size_t i = 0; i < sizeof size; ++i) out[size_at + i] = static_cast<uint8_t>(size >> (8 * i));
}

Status decode_events_into(std::span<const uint8_t> bytes, std::vector<TraceEvent>& out) {
  const size_t first = out.size();
  auto fail = [&](Status status) {
    out.resize(first);
    return status;
  };
  size_t pos = 0;
  for (size_t index = 0; pos < bytes.size(); ++index) {
    Reader header(bytes.subspan(pos));
    auto size = header.get<uint32_t>();
    if (!header.ok()) {
      return fail(make_status(StatusCode::kUnreadable,
                              "event {} at byte {}: truncated size field", index, pos));
    }
    if (size == 0 || size > kMaxEventRecordBytes) {
      return fail(make_status(StatusCode::kUnreadable,
                              "event {} at byte {}: record size {} outside 1..{}", index, pos,
                              size, kMaxEventRecordBytes));
    }
    if (size > bytes.size() - pos - sizeof(uint32_t)) {
      return fail(make_status(StatusCode::kUnreadable,
                              "event {} at byte {}: record of {} bytes but only {} left", index,
                              pos, size, bytes.size() - pos - sizeof(uint32_t)));
    }
    Reader record(bytes.subspan(pos + sizeof(uint32_t), size));
    auto type = static_cast<RecordType>(record.get<uint8_t>());
    if (!decode_record(type, record, out)) {
      return fail(make_status(StatusCode::kUnreadable, "unknown event type {}",
                              static_cast<int>(type)));
    }
    if (!record.finished_exactly()) {
      return fail(make_status(StatusCode::kUnreadable,
                              "event {} at byte {} (type {}): fields do not fill its {} bytes",
                              index, pos, static_cast<int>(type), size));
    }
    pos += sizeof(uint32_t) + size;
  }
  return Status::ok();
}

StatusOr<std::vector<TraceEvent>> decode_events(std::span<const uint8_t> bytes) {
  std::vector<TraceEvent> events;
  RETURN_IF_ERROR(decode_events_into(bytes, events));
  return events;
}

}  // namespace partrain::profiler
