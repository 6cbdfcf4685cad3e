// libFuzzer target: a trace file from a hostile or damaged source, opened as every reader opens
// its inputs (open_trace, both modes: the default one may mark a dead writer's run incomplete and
// build the deferred indexes in the file) and then read as the readers read it: the views'
// rows and the whole Chrome export. A bad file must come back as a Status (exit 3), never a crash.
//
// Run it with a corpus directory (ctest passes <build>/tests/fuzz/trace_reader_fuzz.corpus): when
// that directory is empty, LLVMFuzzerInitialize seeds it with two small valid traces written by
// TraceWriter, one as the writer leaves it (WAL, 8 KiB pages, status running: the reader marks it
// incomplete) and one completed and vacuumed to 1 KiB pages in rollback mode (smaller, so the
// mutations land on the structure more often).
#include <sqlite3.h>
#include <stdlib.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <streambuf>
#include <string>
#include <system_error>
#include <vector>

#include "profiler/chrome_export.h"
#include "profiler/sqlite_db.h"
#include "profiler/trace_event.h"
#include "profiler/trace_open.h"
#include "profiler/trace_writer.h"

namespace {

namespace fs = std::filesystem;
using namespace partrain::profiler;

// Where each input is written: a private directory, removed at exit.
fs::path& scratch_dir() {
  static fs::path dir;
  return dir;
}

class DiscardBuffer final : public std::streambuf {
 protected:
  int overflow(int c) override { return c; }
  std::streamsize xsputn(const char*, std::streamsize n) override { return n; }
};

CollectiveRecord all_reduce(int rank, uint64_t seq, int64_t start_ns) {
  CollectiveRecord r;
  r.world_rank = rank;
  r.step = static_cast<int64_t>(seq);
  r.event.comm_id = "world";
  r.event.seq = seq;
  r.event.op = "all_reduce";
  r.event.dtype = "float";
  r.event.reduce_op = "sum";
  r.event.count = 256;
  r.event.bytes = 1024;
  r.event.rank = rank;
  r.event.group_ranks = {0, 1};
  r.event.enqueue_ns = start_ns - 5;
  r.event.start_ns = start_ns;
  r.event.end_ns = start_ns + 2000;
  r.event.state = seq == 2 ? CollectiveState::kStarted : CollectiveState::kCompleted;
  return r;
}

// A two-rank run of three steps with one event of each kind.
std::vector<TraceEvent> seed_events() {
  std::vector<TraceEvent> events;
  events.push_back(RunInfo{"run-fuzz", "partrain launch -n 2 --workload mlp",
                           R"({"workload":"mlp","nproc_per_node":2})", 2,
                           1'700'000'000'000'000'000, 0});
  for (int rank = 0; rank < 2; ++rank) {
    RankInfo info;
    info.rank = rank;
    info.local_rank = rank;
    info.host = "fuzzhost";
    info.pid = 100 + rank;
    info.device = "cpu";
    events.push_back(info);
    for (int64_t step = 0; step < 3; ++step) {
      const int64_t t = 1'000'000 * (step + 1);
      events.push_back(StepEvent{rank, step, t, 900'000, 2.5 - 0.1 * step, 64});
      events.push_back(SliceEvent{rank, TrackKind::kCpuThread, "main", "forward",
                                  SliceCategory::kCompute, t, 400'000, step, 0, 1});
      events.push_back(all_reduce(rank, static_cast<uint64_t>(step), t + 500'000));
      events.push_back(MemorySample{rank, static_cast<uint8_t>(step), t, 4096 * (step + 1)});
    }
    RankInfo exited = info;
    exited.exited = true;
    exited.exit_code = rank;
    events.push_back(exited);
  }
  KernelRecord kernel;
  kernel.slice = SliceEvent{0, TrackKind::kCudaStream, "stream 7", "sgemm_kernel",
                            SliceCategory::kKernel, 1'200'000, 3000, 0, -1, -1};
  kernel.grid = {4, 1, 1};
  kernel.block = {128, 1, 1};
  events.push_back(kernel);
  events.push_back(StatEvent{"recorder_dropped_events", 1, 3, StatSeverity::kDataLoss, "fuzz"});
  return events;
}

std::string file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void remove_trace(const fs::path& path) {
  std::error_code ignored;
  for (const char* suffix : {"", "-wal", "-shm", "-journal", "-writer"}) {
    fs::remove(path.string() + suffix, ignored);
  }
}

// The two seeds' bytes; empty strings when the writer failed (the fuzzer then starts bare).
std::vector<std::string> seed_traces(const fs::path& dir) {
  const fs::path path = dir / "seed.db";
  std::vector<std::string> seeds;
  {
    auto writer = TraceWriter::create(path, TraceWriterOptions{.overwrite = true});
    if (!writer.is_ok()) return seeds;
    (*writer)->append(seed_events());
  }  // left `running`, as by a writer that died after its last commit
  seeds.push_back(file_bytes(path));
  {
    auto db = SqliteDb::open(path.string(), SQLITE_OPEN_READWRITE);
    if (db.is_ok() && db->exec("UPDATE run SET status = 'completed'; PRAGMA journal_mode = DELETE; "
                               "PRAGMA page_size = 1024; VACUUM;").is_ok()) {
      seeds.push_back(file_bytes(path));
    }
  }
  remove_trace(path);
  return seeds;
}

// Every row and column of a query, as a reader would step through it.
void read_rows(TraceFile& trace, const char* sql) {
  auto stmt = SqliteStatement::prepare(trace.db, sql);
  if (!stmt.is_ok()) return;
  int rc = SQLITE_ROW;
  for (int rows = 0; rows < 10'000 && (rc = stmt->step()) == SQLITE_ROW; ++rows) {
    for (int c = 0; c < stmt->column_count(); ++c) {
      if (!stmt->column_is_null(c)) (void)stmt->column_text(c);
      (void)stmt->column_int(c);
    }
  }
  if (rc != SQLITE_DONE && rc != SQLITE_ROW) (void)trace_read_error(trace.db, sql);
}

void read_trace(const fs::path& path, TraceOpenMode mode) {
  auto trace = open_trace(path, mode);
  if (!trace.is_ok()) return;
  for (const char* sql :
       {"SELECT * FROM runs", "SELECT * FROM ranks ORDER BY rank", "SELECT * FROM steps",
        "SELECT * FROM stats", "SELECT * FROM collectives ORDER BY comm_id, seq",
        "SELECT * FROM memory_events", "SELECT * FROM kernels", "SELECT * FROM slices"}) {
    read_rows(*trace, sql);
  }
  DiscardBuffer discard;
  std::ostream out(&discard);
  (void)export_chrome_trace(trace->db, ChromeExportOptions{}, out);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  char pattern[] = "/tmp/partrain-trace-fuzz-XXXXXX";
  if (::mkdtemp(pattern) == nullptr) std::abort();
  scratch_dir() = pattern;
  std::atexit([] {
    std::error_code ignored;
    fs::remove_all(scratch_dir(), ignored);
  });
  // The first argument that is not a flag is libFuzzer's corpus directory: seed it when empty.
  for (int i = 1; i < *argc; ++i) {
    const std::string arg = (*argv)[i];
    if (arg.empty() || arg[0] == '-') continue;
    std::error_code error;
    fs::create_directories(arg, error);
    if (!fs::is_directory(arg) || !fs::is_empty(arg)) break;
    int n = 0;
    for (const std::string& seed : seed_traces(scratch_dir())) {
      std::ofstream(fs::path(arg) / ("seed_trace_" + std::to_string(n++) + ".db"),
                    std::ios::binary)
          .write(seed.data(), static_cast<std::streamsize>(seed.size()));
    }
    break;
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const fs::path path = scratch_dir() / "input.db";
  remove_trace(path);
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  read_trace(path, TraceOpenMode::kReadStrict);
  read_trace(path, TraceOpenMode::kRead);
  return 0;
}
