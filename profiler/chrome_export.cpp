// Chrome Trace Event Format writer (chrome_export.h). Each part of the document is one stream of
// the reader's export rows (trace_reader/export_reads.h): process and thread names, slices,
// memory counters, sampled counters (NVML), then flow arrows (send -> recv, and collectives from
// their first member).
#include "profiler/chrome_export.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <span>
#include <string>
#include <unordered_map>

#include "core/rank_list.h"
#include "profiler/json_text.h"
#include "profiler/trace_reader/collective_reads.h"
#include "profiler/trace_reader/communicator_name.h"
#include "profiler/trace_reader/export_reads.h"

namespace partrain::profiler {
namespace {

// The optional "args" object of an event: opened by its first argument.
class Args {
 public:
  explicit Args(fmt::memory_buffer& out) : out_(out) {}
  void add(std::string_view key, int64_t value) {
    start(key);
    fmt::format_to(std::back_inserter(out_), "{}", value);
  }
  void add(std::string_view key, std::string_view value) {
    start(key);
    append_json_string(out_, value);
  }
  void add(std::string_view key, double value) {  // finite: NaN and inf are not JSON
    start(key);
    fmt::format_to(std::back_inserter(out_), "{}", std::isfinite(value) ? value : 0.0);
  }
  void close() {
    if (open_) out_.push_back('}');
  }

 private:
  void start(std::string_view key) {
    append_json_raw(out_, open_ ? "," : ",\"args\":{");
    open_ = true;
    append_json_string(out_, key);
    out_.push_back(':');
  }
  fmt::memory_buffer& out_;
  bool open_ = false;
};

// Rank r is process r + 1: Perfetto gives pid 0 (the kernel's swapper) special handling and its
// maintainers ask synthesised traces to start at 1.
void open_event(fmt::memory_buffer& out, char phase, int rank) {
  fmt::format_to(std::back_inserter(out), "{{\"ph\":\"{}\",\"pid\":{}", phase, rank + 1);
}

// ---- what is exported ----------------------------------------------------------------------

struct ExportedRank {
  int rank = 0;
  std::string host;
  std::string device;
};

struct ExportedRun {
  std::string run_id, command, status, backend;
  std::optional<int64_t> world_size;
};

// Ranks named by `ranks` or owning a track or a step (a rank that only sampled memory, with no
// rank row, is not listed).
StatusOr<std::vector<ExportedRank>> read_ranks(const TraceReader& reader) {
  ASSIGN_OR_RETURN(const std::vector<int> recorded, reader.recorded_ranks());
  ASSIGN_OR_RETURN(const std::vector<RankRow> rows, reader.ranks());
  std::vector<ExportedRank> ranks;
  for (int rank : recorded) {
    auto row = std::find_if(rows.begin(), rows.end(),
                            [rank](const RankRow& r) { return r.rank == rank; });
    ranks.push_back(row == rows.end() ? ExportedRank{rank, "", ""}
                                      : ExportedRank{rank, row->host, row->device});
  }
  return ranks;
}

StatusOr<ExportedRun> read_run(const TraceReader& reader, const std::vector<ExportedRank>& ranks) {
  ASSIGN_OR_RETURN(const std::optional<RunRow> row, reader.run());
  ExportedRun run;
  if (row) {
    run = {row->run_id, row->command,
           row->status ? std::string(run_status_name(*row->status)) : std::string(),
           row->backend, std::nullopt};
    if (row->world_size) run.world_size = *row->world_size;
  }
  if (!run.world_size || *run.world_size <= 0) run.world_size = static_cast<int64_t>(ranks.size());
  if (run.backend.empty()) {
    // A PyTorch program says its backend (stat torch_backend: "gloo", "nccl", or c10d's
    // "cpu:gloo,cuda:nccl", whose NCCL carries the collectives a profile is about).
    ASSIGN_OR_RETURN(const std::vector<StatRow> stats, reader.stats());
    for (const StatRow& stat : stats) {
      if (stat.name != "torch_backend" || stat.description.empty()) continue;
      run.backend = stat.description.find("nccl") != std::string::npos ? "nccl" : stat.description;
      break;
    }
  }
  if (run.backend.empty()) {
    // Another program partrain traced (no launch config): its collectives, if any, came through
    // the NCCL interposition, and a rank on a GPU uses NCCL; otherwise the backend is not known
    // and distributedInfo leaves it out rather than guess.
    const bool cuda = std::any_of(ranks.begin(), ranks.end(),
                                  [](const ExportedRank& r) { return r.device.starts_with("cuda"); });
    ASSIGN_OR_RETURN(const bool collectives, has_collectives(reader));
    if (cuda || collectives) run.backend = "nccl";
  }
  return run;
}

StatusOr<std::vector<ExportedRank>> select_ranks(const std::vector<ExportedRank>& present,
                                            const std::vector<int>& wanted) {
  if (wanted.empty()) return present;
  std::vector<int> present_ranks;
  for (const ExportedRank& r : present) present_ranks.push_back(r.rank);
  std::vector<ExportedRank> chosen;
  for (int rank : wanted) {
    auto it = std::find(present_ranks.begin(), present_ranks.end(), rank);
    if (it == present_ranks.end()) {
      return invalid_argument("rank {} is not in this trace ({})", rank,
                              present.empty()
                                  ? std::string("it records no ranks")
                                  : "ranks present: " + format_rank_list(present_ranks));
    }
    chosen.push_back(present[static_cast<size_t>(it - present_ranks.begin())]);
  }
  return chosen;
}

std::string step_range_text(const StepRange& steps) {
  auto end = [](const std::optional<int64_t>& v) { return v ? std::to_string(*v) : std::string(); };
  if (steps.first && steps.last && *steps.first == *steps.last) return end(steps.first);
  return end(steps.first) + ":" + end(steps.last);
}

// The selected steps' time window on the exported ranks (`steps`: earliest start to latest end).
Status select_steps(const TraceReader& reader, const StepRange& steps,
                    ExportSelection& selection) {
  selection.by_step = true;
  selection.first_step = steps.first.value_or(std::numeric_limits<int64_t>::min());
  selection.last_step = steps.last.value_or(std::numeric_limits<int64_t>::max());
  ASSIGN_OR_RETURN(const std::optional<EventSpan> window,
                   selected_steps_window(reader, selection));
  if (window) {
    selection.window_start = window->start_ns;
    selection.window_end = window->end_ns;
    ASSIGN_OR_RETURN(const std::optional<int64_t> earlier_end, earlier_attempts_end(reader));
    if (earlier_end) selection.earlier_attempts_end = *earlier_end;
    return Status::ok();
  }
  ASSIGN_OR_RETURN(const auto recorded, selected_step_numbers(reader, selection));
  return invalid_argument(
      "steps {} match no step recorded on the exported ranks ({})", step_range_text(steps),
      !recorded ? std::string("they record no steps")
                : fmt::format("steps recorded: {}..{}", recorded->first, recorded->second));
}

// ---- processes and threads -----------------------------------------------------------------

struct Track {
  int rank = 0;
  int tid = 0;
  std::string label;
};

// tid of each (rank, track kind, track name): 1, 2, ... within a rank, in display order
// (cpu threads, cuda streams, communicators, memory), so a pid never shares tid 0 with itself.
class TrackIds {
 public:
  void add(int rank, std::string_view kind, std::string_view name) {
    int tid = tracks_.empty() || tracks_.back().rank != rank ? 1 : tracks_.back().tid + 1;
    ids_.emplace(key(rank, kind, name), tid);
    // A communicator's track by its group's name (profiler::communicator_name).
    tracks_.push_back({rank, tid,
                       fmt::format("{} ({})", kind == "comm" ? communicator_name(name)
                                                             : std::string(name),
                                   kind)});
  }
  int find(int rank, std::string_view kind, std::string_view name) const {
    auto it = ids_.find(key(rank, kind, name));
    return it == ids_.end() ? 0 : it->second;
  }
  const std::vector<Track>& tracks() const { return tracks_; }

 private:
  const std::string& key(int rank, std::string_view kind, std::string_view name) const {
    key_.clear();
    fmt::format_to(std::back_inserter(key_), "{}\x1f{}\x1f{}", rank, kind, name);
    return key_;
  }
  std::unordered_map<std::string, int> ids_;
  std::vector<Track> tracks_;
  mutable std::string key_;  // reused: one lookup per slice row
};

// Names with numbers in them in the numbers' order: "gpu0 stream 7" before "gpu0 stream 13"
// (as text, stream 7 came after 20).
bool natural_less(std::string_view a, std::string_view b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (std::isdigit(static_cast<unsigned char>(a[i])) &&
        std::isdigit(static_cast<unsigned char>(b[j]))) {
      size_t i_end = i, j_end = j;
      while (i_end < a.size() && std::isdigit(static_cast<unsigned char>(a[i_end]))) ++i_end;
      while (j_end < b.size() && std::isdigit(static_cast<unsigned char>(b[j_end]))) ++j_end;
      std::string_view x = a.substr(i, i_end - i), y = b.substr(j, j_end - j);
      x.remove_prefix(std::min(x.find_first_not_of('0'), x.size()));
      y.remove_prefix(std::min(y.find_first_not_of('0'), y.size()));
      if (x.size() != y.size()) return x.size() < y.size();
      if (x != y) return x < y;
      i = i_end;
      j = j_end;
      continue;
    }
    if (a[i] != b[j]) return a[i] < b[j];
    ++i;
    ++j;
  }
  return a.size() - i < b.size() - j;
}

StatusOr<TrackIds> read_tracks(const TraceReader& reader, const ExportSelection& selection) {
  ASSIGN_OR_RETURN(std::vector<ExportTrack> rows, export_tracks(reader, selection));
  // Within a rank's tracks of one kind, in their numbers' order; ranks and kinds as they come.
  for (auto run = rows.begin(); run != rows.end();) {
    const auto end = std::find_if(run, rows.end(), [&](const ExportTrack& t) {
      return t.rank != run->rank || t.kind != run->kind;
    });
    std::stable_sort(run, end, [](const ExportTrack& a, const ExportTrack& b) {
      return natural_less(a.name, b.name);
    });
    run = end;
  }
  TrackIds tracks;
  for (const ExportTrack& t : rows) tracks.add(t.rank, t.kind, t.name);
  return tracks;
}

// An "M" event naming a process or thread ("process_name", "thread_name"), or ordering it
// ("process_sort_index", "thread_sort_index").
template <typename Value>
Status write_metadata_event(JsonStream& sink, std::string_view event, int pid, int tid,
                            std::string_view key, Value value) {
  fmt::memory_buffer& out = sink.next_element();
  open_event(out, 'M', pid);
  fmt::format_to(std::back_inserter(out), ",\"tid\":{},\"ts\":0,\"name\":\"{}\"", tid, event);
  Args args(out);
  args.add(key, value);
  args.close();
  out.push_back('}');
  return sink.end_element();
}

Status write_metadata(JsonStream& sink, const std::vector<ExportedRank>& ranks, const TrackIds& tracks) {
  for (const ExportedRank& r : ranks) {
    const std::string name = r.host.empty() ? fmt::format("rank {}", r.rank)
                                            : fmt::format("rank {} ({})", r.rank, r.host);
    RETURN_IF_ERROR(
        write_metadata_event(sink, "process_name", r.rank, 0, "name", std::string_view(name)));
    RETURN_IF_ERROR(
        write_metadata_event(sink, "process_sort_index", r.rank, 0, "sort_index", int64_t{r.rank}));
  }
  for (const Track& t : tracks.tracks()) {
    RETURN_IF_ERROR(write_metadata_event(sink, "thread_name", t.rank, t.tid, "name",
                                         std::string_view(t.label)));
    RETURN_IF_ERROR(write_metadata_event(sink, "thread_sort_index", t.rank, t.tid, "sort_index",
                                         int64_t{t.tid}));
  }
  return Status::ok();
}

// ---- slices --------------------------------------------------------------------------------

// The slice's name, but for two kinds, for HolisticTraceAnalysis's sake. A GPU copy or fill
// goes under Kineto's name ("memcpy HtoD" as "Memcpy HtoD", "memset" as "Memset"): HTA tells
// copies from compute kernels by these capitalised prefixes alone. A step is "step" (its number
// in args), as recorded steps are, also where an import kept "ProfilerStep#N": HTA takes such a
// name as its iteration marker and then keeps only the GPU events whose CPU launch (by
// correlation) it finds, launches partrain does not store, so it would drop every kernel.
void append_slice_name(fmt::memory_buffer& out, const ExportSlice& slice) {
  if (slice.category == "step") {
    append_json_raw(out, "\"step\"");
    return;
  }
  const bool transfer = slice.category == "memcpy" || slice.category == "memset";
  if (!transfer || slice.name.empty() || slice.name[0] != 'm') {
    append_json_string(out, slice.name);
    return;
  }
  std::string name = slice.name;
  name[0] = 'M';
  append_json_string(out, name);
}

void write_slice(fmt::memory_buffer& out, const ExportSlice& slice, const TrackIds& tracks) {
  open_event(out, 'X', slice.rank);
  fmt::format_to(std::back_inserter(out), ",\"tid\":{},\"ts\":",
                 tracks.find(slice.rank, slice.track_kind, slice.track));
  append_json_us(out, slice.ts_ns);
  append_json_raw(out, ",\"dur\":");
  append_json_us(out, slice.dur_ns);
  append_json_raw(out, ",\"name\":");
  append_slice_name(out, slice);
  append_json_raw(out, ",\"cat\":");
  append_json_string(out, slice.category);
  Args args(out);
  if (slice.step) args.add("step", *slice.step);
  if (slice.micro_batch) args.add("micro_batch", *slice.micro_batch);
  if (slice.layer) args.add("layer", *slice.layer);
  for (const ExportArg& arg : slice.args) {
    if (arg.text) {
      args.add(arg.name, std::string_view(arg.value));
    } else {
      args.add(arg.name, arg.number);
    }
  }
  args.close();
  out.push_back('}');
}

// One pass per kind: slices with no detail row, collectives (their args), kernels (their launch
// parameters) and, from schema version 3, GPU copies and fills (their bytes).
StatusOr<int64_t> write_slices(const TraceReader& reader, const ExportSelection& selection,
                               const TrackIds& tracks, JsonStream& sink) {
  std::vector<SliceDetail> passes{SliceDetail::kNone, SliceDetail::kCollective,
                                  SliceDetail::kKernel};
  if (has_transfer_table(reader)) passes.push_back(SliceDetail::kTransfer);
  int64_t total = 0;
  ExportSlice slice;
  for (SliceDetail detail : passes) {
    ASSIGN_OR_RETURN(ExportSliceCursor rows, export_slices(reader, selection, detail));
    while (rows.next(slice)) {
      write_slice(sink.next_element(), slice, tracks);
      RETURN_IF_ERROR(sink.end_element());
      ++total;
    }
    RETURN_IF_ERROR(rows.status());
  }
  return total;
}

// ---- memory counters -----------------------------------------------------------------------

Status write_counter(JsonStream& sink, int rank, int64_t ts_ns, std::string_view category,
                     int64_t bytes) {
  fmt::memory_buffer& out = sink.next_element();
  open_event(out, 'C', rank);
  append_json_raw(out, ",\"ts\":");
  append_json_us(out, ts_ns);
  append_json_raw(out, ",\"name\":");
  append_json_string(out, fmt::format("memory {}", category));
  append_json_raw(out, ",\"cat\":\"memory\"");
  Args args(out);
  args.add("bytes", bytes);
  args.close();
  out.push_back('}');
  return sink.end_element();
}

// With --steps, each counter starts at the window with the bytes in use then: the last sample
// at or before the window's start, one indexed lookup per (rank, category).
StatusOr<int64_t> write_counters_at_window_start(const TraceReader& reader,
                                                 const ExportSelection& selection,
                                                 const std::vector<ExportedRank>& ranks,
                                                 JsonStream& sink) {
  ASSIGN_OR_RETURN(const std::vector<std::string> names, memory_category_names(reader));
  int64_t written = 0;
  for (const ExportedRank& r : ranks) {
    for (const std::string& category : names) {
      ASSIGN_OR_RETURN(const std::optional<int64_t> bytes,
                       memory_bytes_at(reader, r.rank, category, selection.window_start));
      if (!bytes) continue;
      RETURN_IF_ERROR(write_counter(sink, r.rank, selection.window_start, category, *bytes));
      ++written;
    }
  }
  return written;
}

StatusOr<int64_t> write_counters(const TraceReader& reader, const ExportSelection& selection,
                                 const std::vector<ExportedRank>& ranks, JsonStream& sink) {
  int64_t written = 0;
  if (selection.by_step) {
    ASSIGN_OR_RETURN(written, write_counters_at_window_start(reader, selection, ranks, sink));
  }
  ASSIGN_OR_RETURN(ExportMemoryCursor samples, export_memory(reader, selection));
  ExportMemorySample sample;
  while (samples.next(sample)) {
    RETURN_IF_ERROR(write_counter(sink, sample.rank, sample.ts_ns, sample.category, sample.bytes));
    ++written;
  }
  RETURN_IF_ERROR(samples.status());
  return written;
}

// ---- sampled counters (NVML) -----------------------------------------------------------------

// One "C" event per sample of the counters view, named as its track (gpu_sm_clock_mhz). Traces
// of schema version 1 have no counter table: nothing to write.
StatusOr<int64_t> write_sampled_counters(const TraceReader& reader,
                                         const ExportSelection& selection, JsonStream& sink) {
  if (!has_counter_table(reader)) return int64_t{0};
  ASSIGN_OR_RETURN(ExportCounterCursor samples, export_counters(reader, selection));
  ExportCounterSample sample;
  int64_t written = 0;
  while (samples.next(sample)) {
    fmt::memory_buffer& out = sink.next_element();
    open_event(out, 'C', sample.rank);
    append_json_raw(out, ",\"ts\":");
    append_json_us(out, sample.ts_ns);
    append_json_raw(out, ",\"name\":");
    append_json_string(out, sample.name);
    append_json_raw(out, ",\"cat\":\"counter\"");
    Args args(out);
    args.add("value", sample.value);
    args.close();
    out.push_back('}');
    RETURN_IF_ERROR(sink.end_element());
    ++written;
  }
  RETURN_IF_ERROR(samples.status());
  return written;
}

// ---- flows ---------------------------------------------------------------------------------

// One end of an arrow, strictly inside its slice ("s" and "f" bind to the enclosing slice,
// whatever order a viewer sorts equal timestamps in) and never before the arrow's start: the
// source just after its slice starts, the target at its middle or, when that comes before the
// source's point (the first member of a collective waits longest, so its middle came late and
// a fifth of the arrows pointed back in time), as soon after the source's point as it can.
struct FlowEnd {
  int pid = 0;
  int tid = 0;
  int64_t ts_ns = 0;
};

constexpr int64_t kFlowInsetNs = 1'000;  // 1 us inside the slice, or its middle if shorter

FlowEnd flow_source(const FlowSlice& slice, const TrackIds& tracks) {
  return {slice.rank, tracks.find(slice.rank, slice.track_kind, slice.track),
          slice.ts_ns + std::min(slice.dur_ns / 2, kFlowInsetNs)};
}

FlowEnd flow_target(const FlowSlice& slice, const TrackIds& tracks, const FlowEnd& source) {
  const int64_t inset = std::min(slice.dur_ns / 2, kFlowInsetNs);
  const int64_t latest = slice.ts_ns + slice.dur_ns - inset;
  const int64_t ts = std::max(slice.ts_ns + slice.dur_ns / 2, source.ts_ns);
  return {slice.rank, tracks.find(slice.rank, slice.track_kind, slice.track),
          std::clamp(ts, slice.ts_ns + inset, std::max(latest, slice.ts_ns + inset))};
}

Status write_flow(JsonStream& sink, int64_t id, std::string_view category, std::string_view name,
                  const FlowEnd& from, const FlowEnd& to) {
  for (const FlowEnd* end : {&from, &to}) {
    fmt::memory_buffer& out = sink.next_element();
    open_event(out, end == &from ? 's' : 'f', end->pid);
    fmt::format_to(std::back_inserter(out), ",\"tid\":{},\"id\":{}{},\"ts\":", end->tid, id,
                   end == &from ? "" : ",\"bp\":\"e\"");
    append_json_us(out, end->ts_ns);
    append_json_raw(out, ",\"cat\":");
    append_json_string(out, category);
    append_json_raw(out, ",\"name\":");
    append_json_string(out, name);
    out.push_back('}');
    RETURN_IF_ERROR(sink.end_element());
  }
  return Status::ok();
}

// send -> recv, both ends exported.
StatusOr<int64_t> write_p2p_flows(const TraceReader& reader, const ExportSelection& selection,
                                  const TrackIds& tracks, JsonStream& sink, int64_t& next_id) {
  ASSIGN_OR_RETURN(SendRecvCursor pairs, export_send_recv_pairs(reader, selection));
  FlowSlice send, recv;
  int64_t written = 0;
  while (pairs.next(send, recv)) {
    const FlowEnd from = flow_source(send, tracks);
    RETURN_IF_ERROR(
        write_flow(sink, next_id++, "p2p", "send -> recv", from, flow_target(recv, tracks, from)));
    ++written;
  }
  RETURN_IF_ERROR(pairs.status());
  return written;
}

// A collective's members (same comm_id and seq): one arrow from the member that started first
// to each other exported member. Members come sorted by (comm_id, seq, start), so only the
// current group is held.
StatusOr<int64_t> write_collective_flows(const TraceReader& reader,
                                         const ExportSelection& selection,
                                         const TrackIds& tracks, JsonStream& sink,
                                         int64_t& next_id) {
  ASSIGN_OR_RETURN(CollectiveMemberCursor members, export_collective_members(reader, selection));
  CollectiveMember member;
  std::string comm_id;
  int64_t seq = 0;
  FlowEnd first;
  bool in_group = false;
  int64_t written = 0;
  while (members.next(member)) {
    if (!in_group || member.seq != seq || member.comm_id != comm_id) {
      comm_id = member.comm_id;
      seq = member.seq;
      first = flow_source(member.slice, tracks);
      in_group = true;
      continue;
    }
    RETURN_IF_ERROR(write_flow(sink, next_id++, "collective", member.op, first,
                               flow_target(member.slice, tracks, first)));
    ++written;
  }
  RETURN_IF_ERROR(members.status());
  return written;
}

// ---- the document --------------------------------------------------------------------------

// The keys other than traceEvents come after it: older Perfetto versions stop reading at a
// top-level key they do not know (distributedInfo), which is harmless once the events are in.
void write_trailer(fmt::memory_buffer& out, const ExportedRun& run, const std::vector<ExportedRank>& ranks,
                   const ChromeExportOptions& options) {
  std::vector<int> exported;
  for (const ExportedRank& r : ranks) exported.push_back(r.rank);
  std::sort(exported.begin(), exported.end());
  auto string_field = [&](std::string_view key, std::string_view value) {
    fmt::format_to(std::back_inserter(out), ",\"{}\":", key);
    append_json_string(out, value);
  };
  append_json_raw(out, "\n],\n\"displayTimeUnit\":\"ns\",\n");
  append_json_raw(out, "\"otherData\":{\"exporter\":\"partrain " PARTRAIN_VERSION "\"");
  string_field("run_id", run.run_id);
  string_field("command", run.command);
  string_field("status", run.status);
  string_field("ranks", format_rank_list(exported));
  if (options.steps) string_field("steps", step_range_text(*options.steps));
  append_json_raw(out,
                  ",\"time_unit\":\"ts and dur are microseconds on the run-wide timeline\"},\n");
  // With Kineto's spacing: HTA finds a file's rank by the pattern `"rank":\s+(\d+)` (the
  // first match in the file; the events before, written compactly, never match).
  append_json_raw(out, "\"distributedInfo\": {");
  if (!run.backend.empty()) {
    append_json_raw(out, "\"backend\": ");
    append_json_string(out, run.backend);
    append_json_raw(out, ", ");
  }
  fmt::format_to(std::back_inserter(out), "\"rank\": {}, \"world_size\": {}}}}}\n",
                 exported.empty() ? 0 : exported.front(), run.world_size.value_or(0));
}

}  // namespace

StatusOr<ChromeExportCounts> export_chrome_trace(const TraceReader& reader,
                                                 const ChromeExportOptions& options,
                                                 std::ostream& out) {
  ASSIGN_OR_RETURN(std::vector<ExportedRank> present, read_ranks(reader));
  ASSIGN_OR_RETURN(std::vector<ExportedRank> ranks, select_ranks(present, options.ranks));
  ExportSelection selection;
  selection.ranks = options.ranks;
  if (options.steps) RETURN_IF_ERROR(select_steps(reader, *options.steps, selection));
  ASSIGN_OR_RETURN(ExportedRun run, read_run(reader, present));
  ASSIGN_OR_RETURN(TrackIds tracks, read_tracks(reader, selection));

  JsonStream sink(out);
  append_json_raw(sink.raw(), "{\"traceEvents\":[");
  ChromeExportCounts counts;
  counts.ranks = static_cast<int>(ranks.size());
  RETURN_IF_ERROR(write_metadata(sink, ranks, tracks));
  ASSIGN_OR_RETURN(counts.slices, write_slices(reader, selection, tracks, sink));
  ASSIGN_OR_RETURN(counts.counters, write_counters(reader, selection, ranks, sink));
  ASSIGN_OR_RETURN(int64_t sampled, write_sampled_counters(reader, selection, sink));
  counts.counters += sampled;
  int64_t next_flow_id = 1;
  ASSIGN_OR_RETURN(int64_t p2p, write_p2p_flows(reader, selection, tracks, sink, next_flow_id));
  ASSIGN_OR_RETURN(int64_t grouped,
                   write_collective_flows(reader, selection, tracks, sink, next_flow_id));
  counts.flows = p2p + grouped;
  write_trailer(sink.raw(), run, ranks, options);
  RETURN_IF_ERROR(sink.flush());
  out.flush();
  if (!out) return failed("writing the JSON output failed (disk full, or the reader went away?)");
  counts.events = sink.elements();
  return counts;
}

}  // namespace partrain::profiler
