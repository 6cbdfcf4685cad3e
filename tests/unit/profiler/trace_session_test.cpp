// TraceSession: events from several ranks (real Recorder + CollectorClient per rank) reach the
// node's file, including bytes still in the sockets when finish() starts; ranks' drops, bytes
// that do not decode and unclean disconnects become stat rows; an idle session still commits;
// a session dropped without finish() leaves a run that readers mark incomplete.
#include "profiler/trace_session.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <thread>

#include "core/clock.h"
#include "profiler/sqlite_db.h"
#include "profiler/trace_open.h"
#include "tests/support/trace_query.h"

namespace partrain::profiler {
namespace {

namespace fs = std::filesystem;
constexpr std::string_view kToken = "session-test-token-0123456789abcdef";

class TraceSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/partrain-session-test-XXXXXX";
    dir_ = ::mkdtemp(pattern);
    ::setenv("XDG_RUNTIME_DIR", dir_.c_str(), 1);  // the collector's socket directory goes here
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::unique_ptr<TraceSession> start(TraceWriterOptions writer = {}) {
    TraceSessionOptions options;
    options.path = dir_ / "run.db";
    options.run_id = fmt::format("run-{}", ::getpid());
    options.token = std::string(kToken);
    options.writer = writer;
    auto session = TraceSession::start(std::move(options));
    EXPECT_TRUE(session.is_ok()) << session.status().message();
    return session.is_ok() ? std::move(*session) : nullptr;
  }
  CollectorClientOptions client_options(const TraceSession& session, int rank) const {
    return {.socket_path = session.socket_path(), .token = std::string(kToken), .rank = rank};
  }

  fs::path dir_;
};

std::vector<uint8_t> encoded(const TraceEvent& event) {
  std::vector<uint8_t> out;
  encode_event(event, out);
  return out;
}

SliceEvent slice(int rank, int64_t i) {
  return SliceEvent{rank, TrackKind::kCpuThread, "main", i % 2 == 0 ? "forward" : "backward",
                    SliceCategory::kPhase, i * 1000, 900, i / 100, -1, -1};
}

// A rank as the runtime makes one: its own client and recorder, events from one thread. The
// buffer holds every event, so nothing is dropped however the threads are scheduled.
void run_rank(const CollectorClientOptions& options, int rank, int slices, int samples) {
  CollectorClient client(options);
  Recorder recorder(client, {.buffer_bytes_per_thread = 8 << 20});
  for (int i = 0; i < slices; ++i) recorder.record(encoded(slice(rank, i)));
  for (int i = 0; i < samples; ++i) {
    recorder.record(encoded(MemorySample{rank, static_cast<uint8_t>(i % 7), i, 4096 * i}));
  }
}

TEST_F(TraceSessionTest, EventsOfSeveralRanksAreAllStored) {
  auto session = start();
  ASSERT_TRUE(session);
  RunInfo run;
  run.run_id = "r1";
  run.command = "partrain launch -n 3";
  run.world_size = 3;
  session->append(run);

  constexpr int kRanks = 3, kSlices = 20'000, kSamples = 5'000;
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < kRanks; ++rank) {
    ranks.emplace_back(run_rank, client_options(*session, rank), rank, kSlices, kSamples);
  }
  for (auto& rank : ranks) rank.join();
  // The ranks have exited; much of what they sent may still sit in the sockets: finish reads it.
  for (int rank = 0; rank < kRanks; ++rank) {
    RankInfo exit;
    exit.rank = rank;
    exit.exited = true;
    session->append(exit);
  }
  ASSERT_TRUE(session->finish(RunStatus::kCompleted, std::nullopt, 12345).is_ok());
  EXPECT_FALSE(fs::exists(session->socket_path()));

  const TraceSessionStats stats = session->stats();
  EXPECT_EQ(stats.records_received, uint64_t{kRanks} * (kSlices + kSamples));
  EXPECT_EQ(stats.records_lost, 0u);
  EXPECT_EQ(stats.write_errors, 0u);
  EXPECT_EQ(stats.events_written, uint64_t{kRanks} * (kSlices + kSamples) + 1 + kRanks);

  auto trace = open_trace(session->path(), TraceOpenMode::kReadStrict);
  ASSERT_TRUE(trace.is_ok()) << trace.status().message();
  EXPECT_EQ(trace->status, RunStatus::kCompleted);
  EXPECT_FALSE(trace->writer_alive);
  EXPECT_EQ(testing::query_rows(trace->db, "SELECT rank, count(*) FROM slices GROUP BY rank ORDER BY rank"),
            fmt::format("0|{0}\n1|{0}\n2|{0}\n", kSlices));
  EXPECT_EQ(testing::query_number(trace->db, "SELECT count(*) FROM memory_events"), kRanks * kSamples);
  EXPECT_EQ(testing::query_rows(trace->db, "SELECT run_id, status, end_ns, world_size FROM runs"),
            "r1|completed|12345|3\n");
  EXPECT_EQ(testing::query_number(trace->db, "SELECT count(*) FROM ranks WHERE exit_code = 0"), kRanks);
  EXPECT_EQ(testing::query_number(trace->db, "SELECT count(*) FROM stats"), 0);
  EXPECT_EQ(testing::query_rows(trace->db, "PRAGMA integrity_check"), "ok\n");
}

// A rank whose buffer overflows (small, flushed rarely): every event is either stored or counted
// in the rank's recorder_dropped_events row.
TEST_F(TraceSessionTest, ARankOutrunningItsBufferIsCountedNotLost) {
  auto session = start();
  ASSERT_TRUE(session);
  constexpr int kEvents = 20'000;
  {
    CollectorClient client(client_options(*session, 4));
    Recorder recorder(client, {.buffer_bytes_per_thread = 64 << 10,
                               .flush_interval = std::chrono::seconds(1)});
    for (int i = 0; i < kEvents; ++i) recorder.record(encoded(slice(4, i)));
  }
  ASSERT_TRUE(session->finish(RunStatus::kCompleted).is_ok());
  const TraceSessionStats stats = session->stats();
  EXPECT_GT(stats.records_lost, 0u);
  EXPECT_EQ(stats.records_received + stats.records_lost, uint64_t{kEvents});
  auto trace = open_trace(session->path(), TraceOpenMode::kReadStrict);
  ASSERT_TRUE(trace.is_ok()) << trace.status().message();
  EXPECT_EQ(testing::query_number(trace->db, "SELECT count(*) FROM slices"),
            static_cast<int64_t>(stats.records_received));
  EXPECT_EQ(testing::query_rows(trace->db, "SELECT name, rank, value, severity FROM stats"),
            fmt::format("recorder_dropped_events|4|{}|data_loss\n", stats.records_lost));
}

TEST_F(TraceSessionTest, FinishIsIdempotentAndLaterAppendsAreIgnored) {
  auto session = start();
  ASSERT_TRUE(session);
  session->append(slice(0, 1));
  ASSERT_TRUE(session->finish(RunStatus::kFailed, 2).is_ok());
  session->append(slice(0, 2));
  EXPECT_TRUE(session->finish(RunStatus::kCompleted).is_ok());
  EXPECT_EQ(session->stats().events_written, 1u);
  auto trace = open_trace(session->path(), TraceOpenMode::kReadStrict);
  ASSERT_TRUE(trace.is_ok()) << trace.status().message();
  EXPECT_EQ(testing::query_rows(trace->db, "SELECT status, failing_rank FROM runs"), "failed|2\n");
  EXPECT_EQ(testing::query_number(trace->db, "SELECT count(*) FROM slices"), 1);
}

int raw_connect(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  return fd;
}

void send_all(int fd, const std::vector<uint8_t>& bytes) {
  ASSERT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(bytes.size()));
}

// A rank that reports drops, sends one good and one garbled record, and dies without GOODBYE.
TEST_F(TraceSessionTest, DropsBadRecordsAndUncleanEndsBecomeStats) {
  auto session = start();
  ASSERT_TRUE(session);
  const int fd = raw_connect(session->socket_path());
  send_all(fd, encode_hello(kToken, 7, 1234));
  std::vector<uint8_t> records;
  append_record(records, encoded(slice(7, 0)));
  std::vector<uint8_t> garbled = encoded(slice(7, 1));
  garbled[4] = 99;  // an event type that does not exist
  append_record(records, garbled);
  send_all(fd, encode_batch(kToken, records, 2));
  send_all(fd, encode_dropped(kToken, 5));
  ::close(fd);

  ASSERT_TRUE(session->finish(RunStatus::kFailed, 7).is_ok());
  const TraceSessionStats stats = session->stats();
  EXPECT_EQ(stats.records_received, 2u);
  EXPECT_EQ(stats.records_lost, 6u);
  auto trace = open_trace(session->path(), TraceOpenMode::kReadStrict);
  ASSERT_TRUE(trace.is_ok()) << trace.status().message();
  EXPECT_EQ(testing::query_number(trace->db, "SELECT count(*) FROM slices WHERE rank = 7"), 1);
  EXPECT_EQ(testing::query_rows(trace->db, "SELECT name, rank, value, severity FROM stats ORDER BY name"),
            "collector_unclean_disconnects|7|1|info\n"
            "collector_undecodable_events|7|1|data_loss\n"
            "recorder_dropped_events|7|5|data_loss\n");
}

// Nothing arrives for a while after a few events: the collector's tick still commits them, so
// a second connection (a live dashboard) sees them before the run ends.
TEST_F(TraceSessionTest, IdleSessionCommitsWithinTheInterval) {
  TraceWriterOptions writer;
  writer.max_commit_interval = std::chrono::milliseconds(250);
  auto session = start(writer);
  ASSERT_TRUE(session);
  auto client = std::make_unique<CollectorClient>(client_options(*session, 0));
  ASSERT_TRUE(client->connected());
  auto reader = SqliteDb::open(session->path().string(), SQLITE_OPEN_READONLY);
  ASSERT_TRUE(reader.is_ok()) << reader.status().message();
  std::vector<uint8_t> records;
  for (int i = 0; i < 10; ++i) append_record(records, encoded(slice(0, i)));
  const int64_t start_ns = monotonic_ns();  // before the batch exists anywhere
  client->write_batch(records, 10);

  int64_t seen = 0;
  while (seen < 10 && monotonic_ns() - start_ns < 5'000'000'000) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    seen = testing::query_number(*reader, "SELECT count(*) FROM slice");
  }
  EXPECT_EQ(seen, 10) << "nothing committed while the collector was idle";
  EXPECT_GE(monotonic_ns() - start_ns, 250'000'000) << "committed before the interval";
  client.reset();
  ASSERT_TRUE(session->finish(RunStatus::kCompleted).is_ok());
}

// A client that never closes holds finish() up only for the drain timeout.
TEST_F(TraceSessionTest, FinishGivesUpOnAClientThatStaysConnected) {
  auto session = start();
  ASSERT_TRUE(session);
  CollectorClient client(client_options(*session, 3));
  ASSERT_TRUE(client.connected());
  std::vector<uint8_t> records;
  append_record(records, encoded(slice(3, 0)));
  client.write_batch(records, 1);
  const int64_t start_ns = monotonic_ns();
  ASSERT_TRUE(session->finish(RunStatus::kCompleted, std::nullopt, std::nullopt,
                              std::chrono::milliseconds(200))
                  .is_ok());
  EXPECT_LT(monotonic_ns() - start_ns, 3'000'000'000);
  auto trace = open_trace(session->path(), TraceOpenMode::kReadStrict);
  ASSERT_TRUE(trace.is_ok()) << trace.status().message();
  EXPECT_EQ(testing::query_number(trace->db, "SELECT count(*) FROM slices"), 1);
  EXPECT_EQ(testing::query_rows(trace->db, "SELECT name, rank, value FROM stats ORDER BY name"),
            "collector_drain_timeouts|NULL|1\ncollector_unclean_disconnects|3|1\n");
}

TEST_F(TraceSessionTest, WithoutFinishTheRunIsLeftForReadersToMarkIncomplete) {
  fs::path path;
  {
    auto session = start();
    ASSERT_TRUE(session);
    path = session->path();
    session->append(slice(0, 0));
  }
  auto trace = open_trace(path);
  ASSERT_TRUE(trace.is_ok()) << trace.status().message();
  EXPECT_EQ(trace->status, RunStatus::kIncomplete);
  EXPECT_TRUE(trace->marked_incomplete);
  EXPECT_EQ(testing::query_number(trace->db, "SELECT count(*) FROM slices"), 1);
}

TEST_F(TraceSessionTest, AnExistingFileIsRefusedUnlessOverwriting) {
  auto first = start();
  ASSERT_TRUE(first);
  ASSERT_TRUE(first->finish(RunStatus::kCompleted).is_ok());
  TraceSessionOptions options;
  options.path = dir_ / "run.db";
  options.run_id = "again";
  options.token = std::string(kToken);
  auto refused = TraceSession::start(options);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  options.overwrite = true;
  EXPECT_TRUE(TraceSession::start(options).is_ok());
}

}  // namespace
}  // namespace partrain::profiler
