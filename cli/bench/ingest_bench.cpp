// `partrain bench ingest`: the events, the cases that time their way into a trace file, and the
// report. The mix imitates what a traced training step produces (compute and phase slices on a
// thread, memory samples per allocation category, collectives on a data-parallel and a pipeline
// communicator, a step record), arriving as the collector delivers it: runs of 1,000 events from
// one rank at a time.
#include "cli/bench/ingest_bench.h"

#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "core/clock.h"
#include "core/json_dump.h"
#include "core/log.h"
#include "core/temp_dir.h"
#include "profiler/collector.h"
#include "profiler/recorder.h"
#include "profiler/sqlite_db.h"
#include "profiler/trace_reader/trace_reader.h"
#include "profiler/trace_session.h"
#include "profiler/trace_writer.h"

namespace partrain::bench {
namespace {

namespace fs = std::filesystem;
using profiler::TraceEvent;

constexpr uint64_t kRunLength = 1000;  // events of one rank in a row, as one collector batch
constexpr std::array<std::string_view, 12> kSliceNames = {
    "forward",      "backward",   "optimizer", "embedding.forward", "block.forward", "attention",
    "mlp",          "layernorm",  "head.forward", "block.backward",  "reduce_gradients", "loss"};

enum class Kind { kMix, kSlices, kMemory, kCollectives };

std::string_view kind_name(Kind kind) {
  switch (kind) {
    case Kind::kMix: return "mix";
    case Kind::kSlices: return "slices";
    case Kind::kMemory: return "memory";
    case Kind::kCollectives: return "collectives";
  }
  return "mix";
}

// One rank's events, i = 0, 1, 2... Each kind lives in its own TraceEvent, refilled in place, so
// making an event allocates nothing.
class EventSource {
 public:
  EventSource(int rank, int world, Kind kind) : rank_(rank), world_(world), kind_(kind) {
    std::get<profiler::SliceEvent>(slice_).track = "main";
    auto& group = std::get<profiler::CollectiveRecord>(collective_).event.group_ranks;
    for (int r = 0; r < world; ++r) dp_group_.push_back(r);
    group.reserve(static_cast<size_t>(world));
  }

  const TraceEvent& next() {
    const uint64_t i = i_++;
    switch (kind_) {
      case Kind::kSlices: return make_slice(i);
      case Kind::kMemory: return make_memory(i);
      case Kind::kCollectives: return make_collective(i);
      case Kind::kMix: break;
    }
    // Per 1,000 events: 550 slices, 350 memory samples, 99 collectives, 1 step (IngestMix).
    const uint64_t position = i % IngestMix::kMixPeriod;
    if (position == IngestMix::kMixPeriod - 1) return make_step(i);
    const uint64_t phase = position % 20;
    if (phase < 11) return make_slice(i);
    if (phase < 18) return make_memory(i);
    return make_collective(i);
  }

 private:
  int64_t ts(uint64_t i) const { return static_cast<int64_t>(i) * 1000 + rank_; }

  const TraceEvent& make_slice(uint64_t i) {
    auto& e = std::get<profiler::SliceEvent>(slice_);
    e.rank = rank_;
    e.name = kSliceNames[(i / 7) % kSliceNames.size()];
    e.category = i % 11 == 0 ? profiler::SliceCategory::kPhase : profiler::SliceCategory::kCompute;
    e.ts_ns = ts(i);
    e.dur_ns = 800 + static_cast<int64_t>(i % 200);
    e.step = static_cast<int64_t>(i / 1000);
    e.micro_batch = static_cast<int32_t>((i / 250) % 4);
    e.layer = static_cast<int32_t>((i / 20) % 24);
    return slice_;
  }
  const TraceEvent& make_memory(uint64_t i) {
    auto& e = std::get<profiler::MemorySample>(memory_);
    e = {rank_, static_cast<uint8_t>(i % 7), ts(i), static_cast<int64_t>(i % 4096) << 16};
    return memory_;
  }
  const TraceEvent& make_step(uint64_t i) {
    auto& e = std::get<profiler::StepEvent>(step_);
    e = {rank_, static_cast<int64_t>(i / 1000), ts(i), 1'000'000, 2.5, 4096};
    return step_;
  }
  const TraceEvent& make_collective(uint64_t i);

  int rank_;
  int world_;
  Kind kind_;
  uint64_t i_ = 0;
  uint64_t dp_seq_ = 0, pp_seq_ = 0;
  std::vector<int> dp_group_;
  TraceEvent slice_{profiler::SliceEvent{}}, memory_{profiler::MemorySample{}},
      collective_{profiler::CollectiveRecord{}}, step_{profiler::StepEvent{}};
};

// all_reduce, reduce_scatter and all_gather over every rank ("dp0"), send and recv with the
// neighbour rank ("pp0"), in turn.
const TraceEvent& EventSource::make_collective(uint64_t i) {
  static constexpr std::array<std::string_view, 5> kOps = {"all_reduce", "reduce_scatter",
                                                           "all_gather", "send", "recv"};
  auto& r = std::get<profiler::CollectiveRecord>(collective_);
  profiler::CollectiveEvent& e = r.event;
  const uint64_t which = (i / 20) % kOps.size();
  const bool p2p = which >= 3;
  const int peer = (rank_ ^ 1) < world_ ? (rank_ ^ 1) : rank_;
  r.world_rank = rank_;
  r.step = static_cast<int64_t>(i / 1000);
  e.comm_id = p2p ? "pp0" : "dp0";
  e.seq = p2p ? pp_seq_++ : dp_seq_++;
  e.op = kOps[which];
  e.dtype = "bfloat16";
  e.reduce_op = which < 2 ? "sum" : "";
  e.count = 1u << 20;
  e.bytes = e.count * 2 * (which == 2 ? static_cast<uint64_t>(world_) : 1);
  e.peer = p2p ? peer : -1;
  e.rank = p2p ? (rank_ < peer ? 0 : 1) : rank_;
  if (p2p) {
    e.group_ranks.assign({std::min(rank_, peer), std::max(rank_, peer)});
  } else {
    e.group_ranks.assign(dp_group_.begin(), dp_group_.end());
  }
  e.enqueue_ns = ts(i);
  e.start_ns = e.enqueue_ns + 20;
  e.end_ns = e.start_ns + 400 + static_cast<int64_t>(i % 100);
  e.state = profiler::CollectiveState::kCompleted;
  return collective_;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// CPU time of the whole process (every thread: the writer's, a checkpointer's, the producers').
double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

void remove_trace(const fs::path& path) {
  std::error_code ignored;
  for (const char* suffix : {"", "-wal", "-shm", "-writer"}) {
    fs::remove(path.string() + suffix, ignored);
  }
}

// Events stored in a closed trace: every event is one row of slice (collectives included),
// memory or step. Opened read-write only so that closing removes the -wal and -shm files a
// reader of a WAL database creates; nothing is written.
StatusOr<uint64_t> stored_events(const fs::path& path) {
  ASSIGN_OR_RETURN(profiler::SqliteDb db,
                   profiler::SqliteDb::open(path.string(), SQLITE_OPEN_READWRITE));
  ASSIGN_OR_RETURN(const int64_t count, profiler::TraceReader(db).event_count());
  return static_cast<uint64_t>(count);
}

Status measure_file(const fs::path& path, IngestCase& result) {
  std::error_code error;
  result.file_bytes = fs::file_size(path, error);
  if (error) return failed("cannot read the size of {}: {}", path.string(), error.message());
  ASSIGN_OR_RETURN(result.stored, stored_events(path));
  return Status::ok();
}

// The writer alone: events are made untimed, a run of one rank at a time, and only
// TraceWriter::append and the final commit are timed. Closing (building the deferred indexes,
// the last WAL checkpoint) is timed apart.
StatusOr<IngestCase> run_writer_case(const fs::path& path, uint64_t events, int ranks, Kind kind) {
  IngestCase result{.name = kind == Kind::kMix ? "writer" : fmt::format("writer ({} only)",
                                                                        kind_name(kind)),
                    .kind = std::string(kind_name(kind)), .events = events};
  ASSIGN_OR_RETURN(auto writer, profiler::TraceWriter::create(path, {.overwrite = true}));
  std::vector<EventSource> sources;
  for (int r = 0; r < ranks; ++r) sources.emplace_back(r, ranks, kind);
  std::vector<TraceEvent> run;
  run.reserve(kRunLength);
  std::chrono::steady_clock::duration timed{};
  double cpu = 0;
  for (uint64_t done = 0, turn = 0; done < events; ++turn) {
    EventSource& source = sources[turn % sources.size()];
    const uint64_t n = std::min(kRunLength, events - done);
    run.clear();
    for (uint64_t k = 0; k < n; ++k) run.push_back(source.next());
    const auto start = std::chrono::steady_clock::now();
    const double cpu_start = process_cpu_seconds();
    writer->append(run);
    cpu += process_cpu_seconds() - cpu_start;
    timed += std::chrono::steady_clock::now() - start;
    done += n;
  }
  const auto start = std::chrono::steady_clock::now();
  const double cpu_start = process_cpu_seconds();
  RETURN_IF_ERROR(writer->commit());
  cpu += process_cpu_seconds() - cpu_start;
  timed += std::chrono::steady_clock::now() - start;
  result.seconds = std::chrono::duration<double>(timed).count();
  result.cpu_seconds = cpu;
  result.dropped = writer->write_errors();
  const auto close_start = std::chrono::steady_clock::now();
  writer.reset();  // builds the deferred indexes, checkpoints the WAL into the file
  result.close_seconds = seconds_since(close_start);
  RETURN_IF_ERROR(measure_file(path, result));
  return result;
}

// A producer keeps at most this many records unshipped in its recorder (3/4 of its buffer at
// the largest record of the mix), so it runs as fast as the pipeline takes events and no faster:
// the end-to-end rate is then what the pipeline sustains, not how much a full buffer drops.
uint64_t producer_window(const profiler::RecorderOptions& options, int producers) {
  const uint64_t largest_record = 128 + 4 * static_cast<uint64_t>(producers) + 8;
  return options.buffer_bytes_per_thread * 3 / 4 / largest_record;
}

// Waits while the recorder holds `window` records not yet shipped; past half of it, asks the
// flusher to drain now rather than at its next interval.
void wait_for_room(profiler::Recorder& recorder, uint64_t window) {
  while (true) {
    const profiler::RecorderStats stats = recorder.stats();
    const uint64_t pending = stats.recorded - std::min(stats.recorded, stats.shipped);
    if (pending >= window / 2) (void)recorder.flush(std::chrono::milliseconds(0));
    if (pending < window) return;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

// One rank: its own CollectorClient and Recorder (as a traced worker has), `count` events.
void produce(const std::string& socket_path, const std::string& token, int rank, int world,
             uint64_t count) {
  profiler::CollectorClient client(
      {.socket_path = socket_path, .token = token, .rank = rank});
  const profiler::RecorderOptions options;
  profiler::Recorder recorder(client, options);
  const uint64_t window = producer_window(options, world);
  EventSource source(rank, world, Kind::kMix);
  std::vector<uint8_t> encoded;
  for (uint64_t i = 0; i < count; ++i) {
    if (i % 64 == 0) wait_for_room(recorder, window);
    encoded.clear();
    profiler::encode_event(source.next(), encoded);
    recorder.record(encoded);
  }
}  // the recorder drains what is left, then the client says goodbye

std::string random_token() {
  std::random_device device;
  return fmt::format("{:08x}{:08x}{:08x}{:08x}", device(), device(), device(), device());
}

// End to end: `producers` ranks send `events` in all to a TraceSession; timed from the first
// event until finish() has drained the sockets and committed.
StatusOr<IngestCase> run_end_to_end_case(const fs::path& path, uint64_t events, int producers) {
  IngestCase result{.name = "end-to-end", .kind = "mix", .end_to_end = true, .events = events};
  profiler::TraceSessionOptions options;
  options.path = path;
  options.overwrite = true;
  options.run_id = fmt::format("bench-ingest-{}-{}", ::getpid(), monotonic_ns());
  options.token = random_token();
  ASSIGN_OR_RETURN(auto session, profiler::TraceSession::start(options));
  profiler::RunInfo run;
  run.run_id = options.run_id;
  run.command = "partrain bench ingest";
  run.world_size = producers;
  session->append(run);
  const auto start = std::chrono::steady_clock::now();
  const double cpu_start = process_cpu_seconds();
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < producers; ++rank) {
    const auto world = static_cast<uint64_t>(producers);
    const uint64_t count = events / world + (static_cast<uint64_t>(rank) < events % world ? 1 : 0);
    ranks.emplace_back(produce, session->socket_path(), options.token, rank, producers, count);
  }
  for (auto& rank : ranks) rank.join();
  RETURN_IF_ERROR(session->finish(profiler::RunStatus::kCompleted));
  result.seconds = seconds_since(start);
  result.cpu_seconds = process_cpu_seconds() - cpu_start;
  result.dropped = session->stats().records_lost;
  session.reset();
  RETURN_IF_ERROR(measure_file(path, result));
  return result;
}

StatusOr<fs::path> bench_directory(const IngestOptions& options, bool* created) {
  std::error_code error;
  if (!options.dir.empty()) {
    fs::create_directories(options.dir, error);
    if (error) return failed("cannot create --dir {}: {}", options.dir.string(), error.message());
    *created = false;
    return options.dir;
  }
  std::string pattern = (temporary_directory() / "partrain-ingest-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    return failed("cannot create a temporary directory {}: {}", pattern, std::strerror(errno));
  }
  *created = true;
  return fs::path(pattern);
}

// Runs one case into `file` and keeps or removes the file afterwards.
template <typename Run>
Status run_case(IngestReport& report, const std::string& file, Run&& run) {
  const fs::path path = report.dir / file;
  log::debug("bench ingest: {}", path.string());
  auto result = run(path);
  if (!report.options.keep) remove_trace(path);
  if (!result.is_ok()) return result.status().with_context(path.string());
  report.cases.push_back(std::move(*result));
  return Status::ok();
}

}  // namespace

uint64_t IngestReport::writer_lost() const {
  uint64_t lost = 0;
  for (const IngestCase& c : cases) {
    if (!c.end_to_end) lost += c.lost();
  }
  return lost;
}

StatusOr<IngestReport> run_ingest_bench(const IngestOptions& options) {
  if (options.events == 0) return invalid_argument("--events must be at least 1");
  if (options.producers < 1) return invalid_argument("--producers must be at least 1");
  IngestReport report;
  report.options = options;
  bool created = false;
  ASSIGN_OR_RETURN(report.dir, bench_directory(options, &created));
  const uint64_t n = options.events;
  const int ranks = options.producers;
  Status status = Status::ok();
  if (options.writer) {
    status = run_case(report, "writer.db", [&](const fs::path& path) {
      return run_writer_case(path, n, ranks, Kind::kMix);
    });
  }
  if (status.is_ok() && options.end_to_end) {
    status = run_case(report, "end-to-end.db", [&](const fs::path& path) {
      return run_end_to_end_case(path, n, ranks);
    });
  }
  // Each kind alone, on a quarter of the events: what the mix's rate is made of.
  for (Kind kind : {Kind::kSlices, Kind::kMemory, Kind::kCollectives}) {
    if (!status.is_ok() || !options.kinds) break;
    status = run_case(report, fmt::format("writer-{}.db", kind_name(kind)),
                      [&](const fs::path& path) {
                        return run_writer_case(path, std::max<uint64_t>(n / 4, 1), ranks, kind);
                      });
  }
  if (created && !options.keep) {
    std::error_code ignored;
    fs::remove_all(report.dir, ignored);
  }
  if (!status.is_ok()) return status;
  return report;
}

std::string format_ingest_table(const IngestReport& report) {
  const IngestOptions& o = report.options;
  const IngestMix& mix = report.mix;
  std::string out = fmt::format(
      "# partrain bench ingest: {} events per case, {} producers end to end, files in {}{}\n",
      o.events, o.producers, report.dir.string(), o.keep ? " (kept)" : " (removed)");
  out += fmt::format("# mix per {} events: {} slices ({} names), {} memory samples, "
                     "{} collectives, {} step; runs of {} events per rank\n#\n",
                     IngestMix::kMixPeriod, mix.slices, kSliceNames.size(), mix.memory_samples,
                     mix.collectives, mix.steps, kRunLength);
  out += fmt::format("# {:>24} {:>10} {:>10} {:>9} {:>9} {:>11} {:>10} {:>9} {:>10} {:>11}\n",
                     "case", "events", "stored", "lost", "time", "rate", "cpu", "close", "file",
                     "size");
  out += fmt::format("# {:>24} {:>10} {:>10} {:>9} {:>9} {:>11} {:>10} {:>9} {:>10} {:>11}\n", "",
                     "(events)", "(events)", "(events)", "(s)", "(events/s)", "(ns/event)", "(s)",
                     "(MiB)", "(B/event)");
  for (const IngestCase& c : report.cases) {
    out += fmt::format(
        "  {:>24} {:>10} {:>10} {:>9} {:>9.3f} {:>11.0f} {:>10.0f} {:>9} {:>10.1f} {:>11.1f}\n",
        c.name, c.events, c.stored, c.lost(), c.seconds, c.events_per_second(),
        c.cpu_ns_per_event(), c.end_to_end ? "-" : fmt::format("{:.3f}", c.close_seconds),
        static_cast<double>(c.file_bytes) / (1024.0 * 1024.0), c.bytes_per_event());
  }
  out += "# writer: TraceWriter::append alone, timed to its last commit; close: closing the "
         "writer afterwards (building the deferred indexes, the final checkpoint), not in the "
         "rate.\n";
  out += fmt::format(
      "# end-to-end: {} threads, each a rank with its own Recorder and CollectorClient, over the "
      "Unix socket into a TraceSession (collector, decode, writer), timed until finish() has "
      "stored everything; a producer waits while 3/4 of its recorder buffer is unshipped. Events "
      "lost end to end are reported, not a failure.\n",
      o.producers);
  out += "# cpu: the process's CPU time (every thread) while timed, over the events stored; "
         "steadier than the rate when other work shares the cores.\n";
  out += "# size: the finished file (WAL checkpointed into it) over the events stored.\n";
  const uint64_t lost = report.writer_lost();
  out += fmt::format("# Stored by the writer alone: {}\n",
                     lost == 0 ? "every event, OK" : fmt::format("{} events lost, FAILED", lost));
  return out;
}

std::string format_ingest_json(const IngestReport& report) {
  nlohmann::json results = nlohmann::json::array();
  for (const IngestCase& c : report.cases) {
    results.push_back({{"case", c.name},
                       {"kind", c.kind},
                       {"end_to_end", c.end_to_end},
                       {"events", c.events},
                       {"stored", c.stored},
                       {"lost", c.lost()},
                       {"dropped_reported", c.dropped},
                       {"time_s", c.seconds},
                       {"cpu_s", c.cpu_seconds},
                       {"cpu_ns_per_event", c.cpu_ns_per_event()},
                       {"close_s", c.close_seconds},
                       {"events_per_s", c.events_per_second()},
                       {"file_bytes", c.file_bytes},
                       {"bytes_per_event", c.bytes_per_event()}});
  }
  const IngestMix& mix = report.mix;
  nlohmann::json document = {
      {"events", report.options.events},
      {"producers", report.options.producers},
      {"dir", report.dir.string()},
      {"kept", report.options.keep},
      {"mix", {{"per_events", IngestMix::kMixPeriod}, {"slices", mix.slices},
               {"memory_samples", mix.memory_samples}, {"collectives", mix.collectives},
               {"steps", mix.steps}, {"run_length", kRunLength}}},
      {"writer_lost", report.writer_lost()},
      {"results", results}};
  return dump_json(document, 2) + "\n";
}

}  // namespace partrain::bench
