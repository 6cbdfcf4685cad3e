#include "profiler/import/kineto_import.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string_view>

#include "core/duration.h"
#include "profiler/import/event_spool.h"
#include "profiler/import/gzip_text.h"
#include "profiler/import/import_output.h"
#include "profiler/import/imported_run.h"
#include "profiler/import/kineto_collectives.h"
#include "profiler/import/kineto_rank_scan.h"
#include "profiler/step_marker.h"

namespace partrain::profiler {
namespace fs = std::filesystem;
namespace {

// memory::Category::kOther (the profiler does not see memory/): Kineto's allocator totals carry
// no category of partrain's.
constexpr uint8_t kOtherMemoryCategory = 6;

struct KinetoFile {
  fs::path path;
  KinetoHeader header;
  int rank = 0;
  int world_size = 1;
};

Status unreadable(const fs::path& path, std::string_view why) {
  return make_status(StatusCode::kUnreadable, "{}: {}", path.string(), why);
}

// The metadata written before traceEvents.
StatusOr<KinetoHeader> read_leading_header(const fs::path& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<GzipText> text, GzipText::open(path));
  KinetoReadCallbacks stop_at_events;
  stop_at_events.on_events_begin = [](const KinetoHeader&) { return false; };
  return read_kineto_trace(*text, stop_at_events);
}

// The metadata before traceEvents (where Kineto writes it); the whole file when what is needed
// was not there: distributedInfo after the events (other writers), baseTimeNanoseconds after
// them (Kineto of the ROCm, Triton and MTIA traces HTA tests with), which every time hangs on.
StatusOr<KinetoHeader> read_header(const fs::path& path, bool need_rank) {
  ASSIGN_OR_RETURN(KinetoHeader header, read_leading_header(path));
  if (header.has_trace_events && ((!header.distributed && need_rank) || !header.has_base_time)) {
    ASSIGN_OR_RETURN(std::unique_ptr<GzipText> text, GzipText::open(path));
    KinetoReadCallbacks skip_events;
    skip_events.wants_args = [](const KinetoEvent&) { return false; };
    ASSIGN_OR_RETURN(header, read_kineto_trace(*text, skip_events));
  }
  return header;
}

// When the file's first event happened (Unix ns): orders one rank's files of several cycles.
StatusOr<int64_t> first_event_ns(const KinetoFile& file) {
  ASSIGN_OR_RETURN(std::unique_ptr<GzipText> text, GzipText::open(file.path));
  std::optional<int64_t> first;
  KinetoReadCallbacks until_first;
  until_first.wants_args = [](const KinetoEvent&) { return false; };
  until_first.on_event = [&](KinetoEvent& event) {
    first = event.ts_ns;
    return !first.has_value();
  };
  RETURN_IF_ERROR(read_kineto_trace(*text, until_first).status());
  return file.header.base_time_ns + first.value_or(0);
}

// One profiler cycle's files, one per rank: a schedule with repeat (or several active cycles)
// writes a file per cycle, and each rank's k-th file in time order is cycle k.
StatusOr<std::vector<KinetoFile>> one_cycle(std::vector<KinetoFile> files,
                                            std::optional<int> cycle) {
  std::map<int, std::vector<size_t>> of_rank;
  for (size_t i = 0; i < files.size(); ++i) of_rank[files[i].rank].push_back(i);
  size_t cycles = 0;
  for (const auto& [rank, indexes] : of_rank) cycles = std::max(cycles, indexes.size());
  const bool first_or_last = cycle && (*cycle == TraceImportOptions::kLastCycle || *cycle == 1);
  if (cycles == 1 && (!cycle || first_or_last)) return files;
  if (cycle && *cycle != TraceImportOptions::kLastCycle && *cycle > static_cast<int>(cycles)) {
    return invalid_argument("--cycle {}: the traces hold {} profiler cycle{} per rank", *cycle,
                            cycles, cycles == 1 ? "" : "s");
  }
  for (auto& [rank, indexes] : of_rank) {
    std::vector<std::pair<int64_t, size_t>> by_time;
    for (size_t i : indexes) {
      ASSIGN_OR_RETURN(const int64_t begin, first_event_ns(files[i]));
      by_time.emplace_back(begin, i);
    }
    std::sort(by_time.begin(), by_time.end());
    for (size_t k = 0; k < by_time.size(); ++k) indexes[k] = by_time[k].second;
  }
  const auto& [rank, indexes] = *std::max_element(
      of_rank.begin(), of_rank.end(),
      [](const auto& a, const auto& b) { return a.second.size() < b.second.size(); });
  if (!cycle) {
    std::vector<std::string> names;
    for (size_t i : indexes) names.push_back(files[i].path.filename().string());
    return unreadable(
        files[indexes.front()].path,
        fmt::format("rank {} has {} files ({}, in time order): a profiler schedule with repeat or "
                    "several active cycles writes one per cycle; import one cycle with --cycle "
                    "1..{} (or --cycle last)",
                    rank, indexes.size(), fmt::join(names, ", "), indexes.size()));
  }
  for (const auto& [other, its] : of_rank) {
    if (its.size() != cycles) {
      return unreadable(files[its.front()].path,
                        fmt::format("rank {} has {} file{} and rank {} has {}: which files are "
                                    "one cycle is unknown; give one file per rank",
                                    other, its.size(), its.size() == 1 ? "" : "s", rank, cycles));
    }
  }
  const size_t k =
      *cycle == TraceImportOptions::kLastCycle ? cycles - 1 : static_cast<size_t>(*cycle - 1);
  std::vector<KinetoFile> chosen;
  for (const auto& [unused, its] : of_rank) chosen.push_back(std::move(files[its[k]]));
  return chosen;
}

// The world's size when distributedInfo gives none ({"rank": 0}, HTA's test traces): the
// largest rank + 1, as HTA takes it (one file: a world of its rank + 1), said in `notes` when it
// is a guess beyond one rank. Files that give it must agree.
Status settle_world_size(std::vector<KinetoFile>& files, std::vector<std::string>& notes) {
  const KinetoFile* given = nullptr;
  int largest_rank = 0;
  for (const KinetoFile& file : files) {
    largest_rank = std::max(largest_rank, file.rank);
    if (file.world_size < 0) continue;
    if (given != nullptr && file.world_size != given->world_size) {
      return unreadable(file.path,
                        fmt::format("says the world has {} ranks, but {} says {}: these files "
                                    "are not of one run",
                                    file.world_size, given->path.string(), given->world_size));
    }
    given = &file;
  }
  if (given != nullptr && largest_rank >= given->world_size) {
    return unreadable(given->path, fmt::format("says the world has {} ranks, but another file is "
                                               "rank {}: these files are not of one run",
                                               given->world_size, largest_rank));
  }
  const int world = given != nullptr ? given->world_size : largest_rank + 1;
  if (given == nullptr && world > 1) {
    notes.push_back(fmt::format(
        "distributedInfo gives no world_size: the world is taken as {} ranks (the largest rank "
        "+ 1, as HTA takes it)",
        world));
  }
  for (KinetoFile& file : files) file.world_size = world;
  return Status::ok();
}

StatusOr<std::vector<KinetoFile>> read_headers(const std::vector<fs::path>& inputs,
                                               std::optional<int> cycle,
                                               std::vector<std::string>& notes) {
  std::vector<KinetoFile> files;
  for (const fs::path& path : inputs) {
    ASSIGN_OR_RETURN(KinetoHeader header, read_header(path, inputs.size() > 1));
    if (header.other_json != OtherTorchJson::kNone) {
      return unreadable(path, fmt::format("is {}, not a Kineto trace: import the trace "
                                          "torch.profiler wrote beside it",
                                          other_torch_json_name(header.other_json)));
    }
    if (!header.top_level_object || !header.has_trace_events) {
      return unreadable(path,
                        "is JSON but not a Kineto trace: it has no traceEvents array (a "
                        "trace from torch.profiler's export_chrome_trace or "
                        "tensorboard_trace_handler has one)");
    }
    if (!header.distributed_error.empty()) {
      return unreadable(path, fmt::format("distributedInfo: {}", header.distributed_error));
    }

    if (!header.unreadable_base_time.empty()) {
      notes.push_back(fmt::format(
          "{}: baseTimeNanoseconds {} is no integer of Unix ns (1970 to 2116): ignored, its ts "
          "are taken as they are, so the run's start (and its name) is not the real one",
          path.string(), header.unreadable_base_time));
    }
    KinetoFile file{path, std::move(header)};
    if (file.header.distributed) {
      file.rank = file.header.distributed->rank;
      file.world_size = file.header.distributed->world_size;
    } else if (inputs.size() > 1) {
      return unreadable(path,
                        "has no distributedInfo, so its rank is unknown (torch.profiler "
                        "writes it when torch.distributed is initialised before the "
                        "profile); import files of one distributed run, one per rank");
    }
    if (file.rank < 0) {
      // distributedInfo without a rank ({"backend": "nccl"}): alone, the file is rank 0, as a
      // file without distributedInfo is.
      if (inputs.size() > 1) {
        return unreadable(path,
                          "has a distributedInfo without a rank, so its rank is unknown among "
                          "several files; import it alone (it is then rank 0), or give files "
                          "whose distributedInfo names their rank");
      }
      file.rank = 0;
    }
    files.push_back(std::move(file));
  }
  RETURN_IF_ERROR(settle_world_size(files, notes));
  ASSIGN_OR_RETURN(files, one_cycle(std::move(files), cycle));
  std::sort(files.begin(), files.end(),
            [](const KinetoFile& a, const KinetoFile& b) { return a.rank < b.rank; });
  return files;
}

// Every rank's pg_config lists the groups created (new_group is called on all ranks); their
// union by name, in the order met. A trace without pg_config (torch before 2.2) still had the
// default group, "0", of every rank: implied, so a collective whose members are the world's
// matches on it.
std::vector<ProcessGroupConfig> process_groups(const std::vector<KinetoFile>& files,
                                               int world_size) {
  std::vector<ProcessGroupConfig> groups;
  std::set<std::string_view> names;  // of `groups`: the files' strings outlive them
  for (const KinetoFile& file : files) {
    if (!file.header.distributed) continue;
    for (const ProcessGroupConfig& g : file.header.distributed->groups) {
      if (names.insert(g.name).second) groups.push_back(g);
    }
  }
  if (groups.empty()) {
    ProcessGroupConfig world{"0", "default_pg", {}};
    for (int r = 0; r < world_size; ++r) world.ranks.push_back(r);
    groups.push_back(std::move(world));
  }
  return groups;
}

struct ScannedRank {
  std::unique_ptr<EventSpool> spool;
  KinetoRankScan scan;
};

// Stores one rank's spooled events on the timeline: its threads named, its steps given, its
// CPU ops made phases when the rank's compute is its kernels, one device's memory kept.
Status replay_rank(TraceWriter& writer, const ImportedRank& rank, ScannedRank& scanned) {
  const KinetoRankScan& scan = scanned.scan;
  const bool gpu_rank = scan.has_kernels();
  const int32_t memory_code =
      scan.memory_on_cpu() ? kSpooledCpuMemory : spooled_cuda_memory(scan.main_device());
  std::vector<TraceEvent> keep;
  auto on_slice = [&](SliceEvent& s) {
    s.rank = rank.rank;
    s.step = rank.step_at(s.ts_ns);
    s.ts_ns = rank.on_timeline(s.ts_ns);
  };
  return scanned.spool->replay([&](std::vector<TraceEvent>& events) -> Status {
    keep.clear();
    for (TraceEvent& event : events) {
      if (auto* s = std::get_if<SliceEvent>(&event)) {
        if (s->track_kind == TrackKind::kCpuThread) {
          auto name = scan.thread_names.find(s->track);
          s->track = name != scan.thread_names.end()
                         ? name->second
                         : fmt::format("thread {}", s->track.substr(s->track.find('/') + 1));
          if (gpu_rank && s->category == SliceCategory::kCompute) {
            s->category = SliceCategory::kPhase;
          }
        }
        on_slice(*s);
      } else if (auto* k = std::get_if<KernelRecord>(&event)) {
        on_slice(k->slice);
      } else if (auto* t = std::get_if<TransferRecord>(&event)) {
        on_slice(t->slice);
      } else if (auto* m = std::get_if<MemorySample>(&event)) {
        if (m->rank != memory_code) continue;
        m->rank = rank.rank;
        m->category = kOtherMemoryCategory;
        m->ts_ns = rank.on_timeline(m->ts_ns);
      } else if (auto* c = std::get_if<CounterSample>(&event)) {
        c->rank = rank.rank;
        c->ts_ns = rank.on_timeline(c->ts_ns);
      }
      keep.push_back(std::move(event));
    }
    writer.append(keep);
    return Status::ok();
  });
}

std::string backend_of(const std::vector<KinetoFile>& files) {
  for (const KinetoFile& f : files) {
    if (f.header.distributed && !f.header.distributed->backend.empty()) {
      return f.header.distributed->backend;
    }
  }
  return {};
}

// What the first pass over every file leaves: the ranks, their spools and the collectives'
// evidence, and the events' extent on the reference file's clock.
struct ScannedFiles {
  std::vector<ImportedRank> ranks;
  std::map<int, int64_t> empty_last_steps;                              // rank -> the step left out
  std::map<int, std::map<std::string, int64_t>> foreign_device_events;  // rank -> by category
  std::vector<ScannedRank> spooled;  // one per rank, in the same order
  std::map<int, RankCollectiveEvidence> evidence;
  int64_t first_ns = INT64_MAX;
  int64_t last_ns = INT64_MIN;
  uint64_t input_bytes = 0;
  int64_t skipped = 0;
  int64_t negative_durations = 0;
  int64_t unreadable_times = 0;
  int64_t renumbered_steps = 0;  // StepMarker::renumbered
  int64_t unnumbered_steps = 0;  // StepMarker::unnumbered
};

ImportedRank rank_of(const KinetoFile& file, int64_t reference_base, const KinetoRankScan& scan) {
  ImportedRank rank;
  rank.rank = file.rank;
  rank.file = file.path;
  rank.host = file.header.host_name;
  rank.clock_domain = file.header.host_name;
  rank.shift_ns = file.header.base_time_ns - reference_base;
  rank.steps = scan.steps;
  rank.pid = std::max<int64_t>(0, scan.main_pid);
  const int device = scan.main_device();
  rank.device = device >= 0 ? fmt::format("cuda:{}", device) : "cpu";
  rank.events = scan.spooled;
  return rank;
}

// A file read whole that gives nothing to import: partrain's own export (its events are a
// partrain trace's, not Kineto's: the .db it came from is the trace), or no event with a time.
Status check_scanned(const fs::path& path, const KinetoRankScan& scan) {
  if (scan.exporter.starts_with("partrain")) {
    return unreadable(path,
                      fmt::format("is partrain's own export ({}), not a PyTorch profiler trace: "
                                  "analyze the trace it was exported from (its otherData.run_id "
                                  "names the run)",
                                  scan.exporter));
  }
  // torch.profiler (Kineto) writes schemaVersion into every trace; another tool's Chrome trace
  // has none of its metadata, and its events would be read as a PyTorch rank's.
  if (!scan.kineto_metadata) {
    return unreadable(path,
                      "is a Chrome trace but not one torch.profiler wrote (no schemaVersion, "
                      "distributedInfo or baseTimeNanoseconds): partrain imports PyTorch "
                      "profiler (Kineto) traces and Nsight Systems exports");
  }
  if (scan.spooled == 0) {
    return unreadable(
        path, fmt::format("has no event partrain can place ({} events in traceEvents, {} of "
                          "them without a numeric ts or of a kind with no place in a trace): a "
                          "profile that recorded nothing, or not one torch.profiler wrote",
                          scan.events, scan.skipped));
  }
  return Status::ok();
}

// torch.profiler's last ProfilerStep when no host event starts in it (KinetoRankScan): the step the
// last `prof.step()` opened, cut where the profiler stopped (HTA leaves the last step out). Kept as
// a slice, not as a step, so the default window (warm-up skipped) does not land on it. Returns its
// number when dropped.
std::optional<int64_t> drop_empty_last_step(ImportedRank& rank, const KinetoRankScan& scan) {
  if (!scan.last_step_empty || rank.steps.empty()) return std::nullopt;
  const StepSpan& last = rank.steps.back();
  const int64_t step = last.step;
  rank.steps.pop_back();
  return step;
}

StatusOr<ScannedFiles> scan_files(const std::vector<KinetoFile>& files, std::string_view marker,
                                  const fs::path& spool_dir, const TraceImportOptions& options) {
  ScannedFiles out;
  const int64_t reference_base = files.front().header.base_time_ns;
  for (const KinetoFile& file : files) {
    if (options.progress) {
      options.progress(fmt::format("reading {}", file.path.filename().string()),
                       static_cast<int>(&file - files.data()) + 1, static_cast<int>(files.size()));
    }
    ASSIGN_OR_RETURN(std::unique_ptr<EventSpool> spool, EventSpool::create(spool_dir));
    ASSIGN_OR_RETURN(std::unique_ptr<GzipText> text, GzipText::open(file.path));
    // One marker per file: a marker without a step number counts each rank's steps from 0.
    ASSIGN_OR_RETURN(StepMarker step_marker, StepMarker::compile(marker));
    ASSIGN_OR_RETURN(
        KinetoRankScan scan,
        scan_kineto_rank(*text, file.header.base_time_ns - reference_base, step_marker, *spool));
    RETURN_IF_ERROR(check_scanned(file.path, scan));
    std::error_code error;
    out.input_bytes += fs::file_size(file.path, error);
    out.skipped += scan.skipped;
    if (!scan.foreign_device_events.empty()) {
      out.foreign_device_events[file.rank] = scan.foreign_device_events;
    }
    out.negative_durations += scan.negative_durations;
    out.unreadable_times += scan.unreadable_times;
    out.renumbered_steps += step_marker.renumbered();
    out.unnumbered_steps += step_marker.unnumbered();
    out.first_ns = std::min(out.first_ns, scan.first_ns);
    out.last_ns = std::max(out.last_ns, scan.last_ns);
    out.ranks.push_back(rank_of(file, reference_base, scan));
    if (marker == kDefaultStepMarker) {
      if (auto dropped = drop_empty_last_step(out.ranks.back(), scan)) {
        out.empty_last_steps[file.rank] = *dropped;
      }
    }
    RankCollectiveEvidence& evidence = out.evidence[file.rank];
    evidence = std::move(scan.collectives);
    scan.collectives = {};
    if (file.header.distributed) {
      for (const ProcessGroupConfig& g : file.header.distributed->groups) {
        evidence.own_groups.push_back(g.name);
      }
    }
    out.spooled.push_back({std::move(spool), std::move(scan)});
  }
  if (out.first_ns > out.last_ns) out.first_ns = out.last_ns = 0;  // no event at all
  return out;
}

// Ranks of one run profile the same steps, so their files overlap in time (on the reference
// file's clock, which the time bases agree on to the hosts' clock synchronisation). Two files
// that do not overlap at all are of different runs, or of different cycles of a profiler
// schedule: their collectives would otherwise be matched by sequence number as if one job had
// issued them, and ranks on other hosts shifted by the gap to make them agree. Files of two
// hosts may also not overlap because the hosts' clocks disagree by more than the profiled
// cycle lasts (hosts without NTP; a cycle of a few short steps): they are one cycle when both
// profiled the same steps (ProfilerStep numbers) and lie less than an hour apart, which no
// clocks of one cluster disagree by, and the collectives' clock fit then aligns them.
constexpr int64_t kMostClockDisagreementNs = 3600LL * 1'000'000'000;

bool one_cycle_on_other_clocks(const ImportedRank& a, const ImportedRank& b, int64_t gap_ns) {
  const bool other_clocks = a.clock_domain.empty() || a.clock_domain != b.clock_domain;
  if (!other_clocks || a.steps.empty() || gap_ns >= kMostClockDisagreementNs) return false;
  return std::ranges::equal(a.steps, b.steps, {}, &StepSpan::step, &StepSpan::step);
}

// What says the files are of different runs or cycles (the widest gap between two files that
// do not overlap and are not one cycle on other clocks), or nothing.
std::optional<std::string> not_one_run(const std::vector<ImportedRank>& ranks,
                                       const std::vector<ScannedRank>& spooled) {
  std::optional<std::pair<size_t, size_t>> widest;  // (ends first, starts after it)
  int64_t widest_gap_ns = 0;
  for (size_t first = 0; first < spooled.size(); ++first) {
    for (size_t later = 0; later < spooled.size(); ++later) {
      const int64_t gap_ns = spooled[later].scan.first_ns - spooled[first].scan.last_ns;
      if (gap_ns <= widest_gap_ns) continue;
      if (one_cycle_on_other_clocks(ranks[first], ranks[later], gap_ns)) continue;
      widest = {first, later};
      widest_gap_ns = gap_ns;
    }
  }
  if (!widest) return std::nullopt;
  const auto [ends_first, starts_last] = *widest;
  return fmt::format(
      "rank {}'s events ({}) begin {} after rank {}'s ({}) end: files of one run overlap in "
      "time, so these are of different runs or of different cycles of a profiler schedule; "
      "import the files one job wrote in one profiling cycle",
      ranks[starts_last].rank, ranks[starts_last].file.filename().string(),
      format_duration(Nanoseconds(widest_gap_ns)), ranks[ends_first].rank,
      ranks[ends_first].file.filename().string());
}

// The second pass: the run and rank rows, each rank's spooled events, steps, collectives and the
// import's stats, then the file renamed into place.
// `not_one_run`: what says the files are of different runs or cycles, when they are.
Status write_trace(ImportOutput& output, const ImportedRunDescription& run, ScannedFiles& scanned,
                   ImportedCollectives& collectives, const std::optional<std::string>& not_one_run,
                   TraceImportSummary& summary) {
  TraceWriter& writer = output.writer();
  int64_t first = INT64_MAX, last = INT64_MIN;
  for (const ImportedRank& r : scanned.ranks) {
    first = std::min(first, r.on_timeline(scanned.first_ns));
    last = std::max(last, r.on_timeline(scanned.last_ns));
  }
  append_run_and_ranks(writer, run, scanned.ranks, summary.missing_ranks, first, summary.run_id);
  if (not_one_run) {
    // Analyze matches their collectives as one job's and compares their times: kept with the
    // trace so its findings say so, not only import's stderr.
    writer.append(
        StatEvent{"import_ranks_not_overlapping", -1, 1, StatSeverity::kDataLoss, *not_one_run});
  }
  for (size_t i = 0; i < scanned.ranks.size(); ++i) {
    const KinetoRankScan& scan = scanned.spooled[i].scan;
    if (scan.memory_on_cpu() && scan.cpu_memory_events > 0) {
      // torch's CPU memory profiling counts from zero when it starts (CUDA's totals are the
      // caching allocator's own): what analyze must not read as bytes in use.
      writer.append(StatEvent{"import_cpu_memory_relative", scanned.ranks[i].rank,
                              scan.cpu_memory_events, StatSeverity::kInfo,
                              "memory samples from torch.profiler's CPU allocator: allocations "
                              "since profiling began, not bytes in use"});
    }
    RETURN_IF_ERROR(replay_rank(writer, scanned.ranks[i], scanned.spooled[i]));
    scanned.spooled[i].spool.reset();  // its disk space back before the next rank's
    summary.events += scanned.ranks[i].events;
  }
  summary.events += append_steps(writer, scanned.ranks);
  summary.collectives = append_collectives(writer, scanned.ranks, collectives.by_rank);
  summary.events += summary.collectives;
  summary.unmatched_collectives = append_unmatched(writer, collectives.unmatched, summary.warnings);
  for (const auto& [rank, count] : collectives.without_kernel) {
    const std::string what = fmt::format(
        "collectives of a GPU rank with no NCCL kernel in the trace: their host span is only the "
        "enqueue, so they are kept as enqueued, with no time or bandwidth");
    writer.append(
        StatEvent{"import_collectives_without_kernel", rank, count, StatSeverity::kDataLoss, what});
    summary.warnings.push_back(fmt::format("rank {}: {} {}", rank, count, what));
  }
  for (const auto& [rank, by_category] : scanned.foreign_device_events) {
    int64_t total = 0;
    std::vector<std::string> kinds;
    for (const auto& [category, count] : by_category) {
      total += count;
      kinds.push_back(fmt::format("{} {}", count, category));
    }
    const std::string what = fmt::format(
        "device events of an accelerator partrain does not import ({}: work on its streams, "
        "not CUDA's) were left out: the rank's device work is missing, so its GPU figures and "
        "idle time do not count it",
        fmt::join(kinds, ", "));
    writer.append(
        StatEvent{"import_foreign_device_events", rank, total, StatSeverity::kDataLoss, what});
    summary.warnings.push_back(fmt::format("rank {}: {} {}", rank, total, what));
  }
  for (const auto& [rank, step] : scanned.empty_last_steps) {
    writer.append(StatEvent{
        "import_empty_last_step", rank, 1, StatSeverity::kInfo,
        fmt::format("ProfilerStep#{}, the last, holds nothing: the step torch.profiler's last "
                    "step() opened, cut where the profiler stopped; kept as a slice, not a step",
                    step)});
  }
  if (summary.skipped_events > 0) {
    writer.append(StatEvent{"import_skipped_events", -1, summary.skipped_events,
                            StatSeverity::kInfo,
                            "Kineto events with no place in a partrain trace (flow arrows, "
                            "Kineto's own spans and GPU projections of CPU annotations, events "
                            "without a time)"});
  }
  return output.finish(last);
}

StatusOr<TraceImportSummary> import_traces(const TraceImportOptions& options) {
  const std::string_view marker =
      options.step_marker.empty() ? kDefaultStepMarker : std::string_view(options.step_marker);
  RETURN_IF_ERROR(StepMarker::compile(marker).status());
  std::vector<std::string> notes;
  ASSIGN_OR_RETURN(std::vector<KinetoFile> files,
                   read_headers(options.inputs, options.cycle, notes));
  ASSIGN_OR_RETURN(std::unique_ptr<ImportOutput> output,
                   ImportOutput::create(options.output, options.overwrite));
  ASSIGN_OR_RETURN(ScannedFiles scanned, scan_files(files, marker, output->directory(), options));
  TraceImportSummary summary;
  summary.warnings = std::move(notes);
  summary.world_size = files.front().world_size;
  summary.input_bytes = scanned.input_bytes;
  summary.skipped_events = scanned.skipped;
  const bool stepped = std::any_of(scanned.ranks.begin(), scanned.ranks.end(),
                                   [](const ImportedRank& r) { return !r.steps.empty(); });
  if (!options.step_marker.empty() && !stepped) {
    summary.warnings.push_back(fmt::format(
        "--step-marker '{}' matched no event's name: the trace has no steps (the default, {}, "
        "finds torch.profiler's ProfilerStep#N)",
        options.step_marker, kDefaultStepMarker));
  }
  if (scanned.negative_durations > 0) {
    summary.warnings.push_back(
        fmt::format("{} events have a negative dur: each is kept as an instant (0 long) at its ts",
                    scanned.negative_durations));
  }
  if (scanned.unreadable_times > 0) {
    summary.warnings.push_back(fmt::format(
        "{} events have a ts or dur that is no number of microseconds partrain reads (not a "
        "number, or past 9e15 us): one without its ts is left out, one without its dur is kept "
        "as an instant (0 long)",
        scanned.unreadable_times));
  }
  if (scanned.unnumbered_steps > 0) {
    summary.warnings.push_back(fmt::format(
        "{} ProfilerStep# annotations have no step number partrain reads (a digit string, as "
        "torch writes): they are left out as steps, their events belong to no step",
        scanned.unnumbered_steps));
  }
  if (scanned.renumbered_steps > 0) {
    summary.warnings.push_back(fmt::format(
        "{} step markers' numbers are past what partrain reads (int64): those steps are "
        "numbered by their order in the file instead",
        scanned.renumbered_steps));
  }
  const std::optional<std::string> other_runs = not_one_run(scanned.ranks, scanned.spooled);
  if (other_runs) summary.warnings.push_back(*other_runs);
  ImportedCollectives collectives =
      assemble_collectives(process_groups(files, summary.world_size), std::move(scanned.evidence));
  fit_rank_clocks(scanned.ranks, std::move(collectives.ends), summary.warnings);
  summary.missing_ranks = missing_ranks(scanned.ranks, summary.world_size, summary.warnings);

  ImportedRunDescription run;
  run.source = "kineto";
  run.backend = backend_of(files);
  run.world_size = summary.world_size;
  run.reference_unix_ns = files.front().header.base_time_ns;
  run.files = options.inputs;
  run.command_line = options.command_line;
  run.record_shapes = std::all_of(files.begin(), files.end(),
                                  [](const KinetoFile& f) { return f.header.record_shapes; });
  if (options.progress) options.progress("writing the trace", 1, 1);
  RETURN_IF_ERROR(write_trace(*output, run, scanned, collectives, other_runs, summary));
  summary.ranks = rank_summaries(scanned.ranks);
  return summary;
}

}  // namespace

bool has_kineto_file_name(const fs::path& path) {
  const std::string name = path.filename().string();
  return name.ends_with(".json") || name.ends_with(".json.gz");
}

std::string_view other_torch_json_of(const fs::path& path) {
  auto header = read_leading_header(path);
  return header.is_ok() ? other_torch_json_name(header->other_json) : std::string_view();
}

StatusOr<TraceImportSummary> import_kineto_traces(const TraceImportOptions& options) {
  return import_or_status("Kineto traces", [&] { return import_traces(options); });
}

}  // namespace partrain::profiler
