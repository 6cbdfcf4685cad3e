// Reading a PyTorch profiler (Kineto) trace as a stream: the top-level metadata
// (distributedInfo, baseTimeNanoseconds, ...) and then one event at a time, through nlohmann's
// SAX interface, so a file of any size is read in constant memory (never a DOM of the file).
// Times are taken from the number's text ("4986611431654.615" microseconds) into integer
// nanoseconds: a double holds only ~16 digits, which Kineto's timestamps already use.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "profiler/import/gzip_text.h"

namespace partrain::profiler {

// A process or thread id: Kineto writes OS ids (and CUDA device / stream ids) as integers, and
// its synthetic tracks ("Spans", "Traces") as text.
struct KinetoId {
  int64_t number = 0;
  std::string text;  // non-empty only for text ids
  bool is_text = false;
  bool operator==(const KinetoId&) const = default;
};

// "pid/tid": one host thread of a file (the key spooled slices carry in SliceEvent::track until
// the second pass names it, and what ties a kernel's launch to the op around it).
std::string kineto_thread_key(const KinetoId& pid, const KinetoId& tid);

struct KinetoEvent {
  char phase = 0;  // 'X' duration, 'i' instant, 'M' metadata, 'C' counter, 's'/'f' flows
  std::string category;
  std::string name;
  KinetoId pid;
  KinetoId tid;
  std::optional<int64_t> ts_ns;
  std::optional<int64_t> dur_ns;
  // A ts or dur was there but is no number of microseconds partrain reads (1e300, "soon"): it
  // is then absent (the event skipped without a ts, 0 long without a dur), and the import says so.
  bool unreadable_time = false;
  nlohmann::json args;  // null unless the reader's args filter asked for them
};

// One process group of distributedInfo.pg_config.
struct ProcessGroupConfig {
  std::string name;         // c10d's group name ("0", "1", or a hash for split groups)
  std::string description;  // pg_desc: "default_pg", "undefined", ...
  std::vector<int> ranks;   // world ranks
};

struct KinetoDistributedInfo {
  std::string backend;  // "gloo", "nccl", ...
  int rank = -1;        // -1: not given (a trace of distributedInfo {"backend": "nccl"})
  int world_size = -1;  // -1: not given (HTA's test traces: {"rank": 0})
  std::vector<ProcessGroupConfig> groups;
};

// JSON torch writes beside its Kineto traces that is not one: recognised by its first values,
// so that an import of their directory passes over it and one naming it says what it is.
enum class OtherTorchJson {
  kNone,
  kExecutionTrace,  // ExecutionTraceObserver's (Chakra's schema): {"schema": "...", "nodes": ...}
  kMemoryTimeline,  // torch.profiler's export_memory_timeline(*.json): [[times], [sizes]]
};

// "an execution trace (torch's ExecutionTraceObserver)", ...; empty for kNone.
std::string_view other_torch_json_name(OtherTorchJson kind);

struct KinetoHeader {
  OtherTorchJson other_json = OtherTorchJson::kNone;  // when set, nothing else was read
  bool top_level_object = false;
  bool has_trace_events = false;
  std::optional<int64_t> schema_version;
  std::optional<KinetoDistributedInfo> distributed;
  int64_t base_time_ns = 0;  // baseTimeNanoseconds: Unix ns that ts 0 stands for
  bool has_base_time = false;  // it was read (0 without it: ts are then the file's own)
  // baseTimeNanoseconds as written when it is no integer of Unix ns from 1970 to 2116 ("soon",
  // 1.79e30, 9223372036854775807, whose sum with a ts overflows): ignored, and the import says so.
  std::string unreadable_base_time;
  std::string host_name;
  std::string trace_name;
  // The malformed distributedInfo's problem ("rank is not an integer"), empty when it reads well.
  std::string distributed_error;
  // otherData.exporter, where the writer names itself ("partrain 0.1.0" for partrain's export).
  std::string exporter;
  bool record_shapes = false;  // "record_shapes": 1, torch.profiler's record_shapes=True
};

// Microseconds as written ("12.345", "7", "-0.5", "1.5e3") into nanoseconds, rounded to the
// nearest; nullopt for text that is no number.
std::optional<int64_t> microseconds_text_to_ns(std::string_view text);
// A list of ranks as Kineto writes one: an array [0, 1], or its text "[0, 1]" (libkineto's own
// writer, record_param_comms' "Process Group Ranks"); nullopt for anything else, a list cut
// short ("[0, ..., 7]") included.
std::optional<std::vector<int>> kineto_rank_list(const nlohmann::json& value);
// distributedInfo's object into its fields; the problem when a field has the wrong type (ranks
// are accepted as an array or as the text "[0, 1]", as libkineto's own writer puts them). A
// rank or world_size that is not there is -1: what it is depends on the other files.
StatusOr<KinetoDistributedInfo> parse_distributed_info(const nlohmann::json& info);

struct KinetoReadCallbacks {
  // Called when traceEvents begins, with the metadata read so far; false stops the reading
  // there (a header-only read), with the header as it stands.
  std::function<bool(const KinetoHeader&)> on_events_begin;
  // Whether to keep the args of an event whose fields before `args` are those given (Kineto
  // writes ph, cat, name, pid, tid, ts, dur, then args).
  std::function<bool(const KinetoEvent&)> wants_args;
  // Each event of traceEvents; false stops the reading.
  std::function<bool(KinetoEvent&)> on_event;
};

// Reads `text` to its end (or until a callback says stop) and returns the header, every
// top-level key included. kUnreadable naming the file for malformed JSON (with the byte offset),
// a damaged or truncated gzip stream, an empty file, and a top level that is not an object; a
// file without traceEvents reads (has_trace_events false) and the caller says what it is not,
// as does an execution trace or memory timeline (other_json, read no further than what tells).
StatusOr<KinetoHeader> read_kineto_trace(GzipText& text, const KinetoReadCallbacks& callbacks);

}  // namespace partrain::profiler
