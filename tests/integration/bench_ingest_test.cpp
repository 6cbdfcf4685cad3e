// `partrain bench ingest` end to end: the table and --json carry the same cases and columns,
// every event the writer is given is counted in its file, --dir/--keep leave the traces for
// inspection, and bad flags are usage errors. No timing is asserted (the machine decides that).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <set>
#include <string>

#include "tests/integration/command_runner.h"

namespace partrain::testing {
namespace {

namespace fs = std::filesystem;

TEST(BenchIngest, TableHasEveryCaseWithUnits) {
  CommandResult r = run_partrain("bench ingest --events 20000 --producers 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* column : {"case", "events", "stored", "lost", "time", "rate", "cpu", "close",
                             "file", "size", "(events/s)", "(ns/event)", "(B/event)", "(MiB)",
                             "(s)"}) {
    EXPECT_NE(r.out.find(column), std::string::npos) << column << "\n" << r.out;
  }
  for (const char* row : {"  writer ", "end-to-end", "writer (slices only)", "writer (memory only)",
                          "writer (collectives only)"}) {
    EXPECT_NE(r.out.find(row), std::string::npos) << row << "\n" << r.out;
  }
  EXPECT_NE(r.out.find("# mix per 1000 events: 550 slices"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Stored by the writer alone: every event, OK"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("partrain:"), std::string::npos) << "messages belong on stderr";
}

TEST(BenchIngest, JsonCarriesTheSameFactsAndEveryEventIsStored) {
  CommandResult r = run_partrain("bench ingest --events 12000 --producers 3 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json doc = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << r.out;
  EXPECT_EQ(doc["events"], 12000);
  EXPECT_EQ(doc["producers"], 3);
  EXPECT_EQ(doc["writer_lost"], 0);
  EXPECT_EQ(doc["mix"]["per_events"], 1000);
  EXPECT_EQ(doc["mix"]["slices"].get<int>() + doc["mix"]["memory_samples"].get<int>() +
                doc["mix"]["collectives"].get<int>() + doc["mix"]["steps"].get<int>(),
            1000);
  std::set<std::string> cases;
  for (const auto& c : doc["results"]) {
    cases.insert(c["case"].get<std::string>());
    for (const char* field : {"kind", "end_to_end", "events", "stored", "lost", "dropped_reported",
                              "time_s", "events_per_s", "cpu_s", "cpu_ns_per_event", "close_s",
                              "file_bytes", "bytes_per_event"}) {
      EXPECT_TRUE(c.contains(field)) << field << " in " << c.dump();
    }
    const auto events = c["events"].get<uint64_t>();
    const auto stored = c["stored"].get<uint64_t>();
    EXPECT_EQ(c["lost"].get<uint64_t>(), events - stored) << c.dump();
    if (!c["end_to_end"].get<bool>()) {
      EXPECT_EQ(stored, events) << "the writer alone stores everything: " << c.dump();
    } else {
      EXPECT_EQ(events, 12000u);
      // What the ranks reported lost accounts for everything not stored.
      EXPECT_EQ(c["dropped_reported"].get<uint64_t>(), events - stored) << c.dump();
    }
    EXPECT_GT(c["time_s"].get<double>(), 0.0) << c.dump();
    EXPECT_GT(c["file_bytes"].get<uint64_t>(), 0u) << c.dump();
    if (stored > 0) {
      EXPECT_NEAR(c["bytes_per_event"].get<double>(),
                  c["file_bytes"].get<double>() / static_cast<double>(stored), 1e-6)
          << c.dump();
      EXPECT_NEAR(c["events_per_s"].get<double>(),
                  static_cast<double>(stored) / c["time_s"].get<double>(),
                  1e-6 * c["events_per_s"].get<double>())
          << c.dump();
    }
  }
  EXPECT_EQ(cases, (std::set<std::string>{"writer", "end-to-end", "writer (slices only)",
                                          "writer (memory only)", "writer (collectives only)"}));
}

TEST(BenchIngest, KeepLeavesReadableTracesInDir) {
  const fs::path dir =
      fs::temp_directory_path() / ("partrain-ingest-test-" + std::to_string(getpid()));
  fs::remove_all(dir);
  CommandResult r = run_partrain("bench ingest --events 4000 --producers 2 --keep --dir " +
                                 dir.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("(kept)"), std::string::npos) << r.out;
  for (const char* file : {"writer.db", "end-to-end.db", "writer-slices.db", "writer-memory.db",
                           "writer-collectives.db"}) {
    EXPECT_TRUE(fs::exists(dir / file)) << file;
    EXPECT_FALSE(fs::exists(dir / (std::string(file) + "-wal"))) << "WAL left beside " << file;
  }
  CommandResult status = run_shell("sqlite3 " + (dir / "end-to-end.db").string() +
                                   " 'SELECT status FROM runs; PRAGMA integrity_check'");
  if (status.exit_code == 0) {  // the sqlite3 shell is optional
    EXPECT_EQ(status.out, "completed\nok\n");
  }
  fs::remove_all(dir);

  // Without --keep, a given --dir is left empty.
  r = run_partrain("bench ingest --events 2000 --producers 1 --dir " + dir.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::is_empty(dir)) << dir;
  fs::remove_all(dir);
}

TEST(BenchIngest, CasesSelectsWhatRuns) {
  CommandResult r = run_partrain("bench ingest --events 3000 --cases writer,kinds --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json doc = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << r.out;
  std::set<std::string> cases;
  for (const auto& c : doc["results"]) cases.insert(c["case"].get<std::string>());
  EXPECT_EQ(cases, (std::set<std::string>{"writer", "writer (slices only)",
                                          "writer (memory only)", "writer (collectives only)"}));
  EXPECT_EQ(run_partrain("bench ingest --cases reader").exit_code, 2);
}

TEST(BenchIngest, BadFlagsAreUsageErrors) {
  EXPECT_EQ(run_partrain("bench ingest --events 0").exit_code, 2);
  EXPECT_EQ(run_partrain("bench ingest --producers 0").exit_code, 2);
  // Unwrapped (help wraps to $COLUMNS, else 80): the sentence is looked for on one line.
  CommandResult help = run_partrain("bench ingest --help", "COLUMNS=1000");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("--producers"), std::string::npos);
  EXPECT_NE(help.out.find("Exit 1 when the writer alone lost"), std::string::npos) << help.out;
}

}  // namespace
}  // namespace partrain::testing
