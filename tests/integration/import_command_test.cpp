// `partrain import` end to end: the real binary on the committed Kineto fixtures and on bad
// inputs, and what the other commands make of an imported trace.
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/integration/command_runner.h"
#include "tests/support/kineto_fixture.h"
#include "tests/support/nsys_fixture.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/trace_query.h"

namespace partrain::testing {
namespace {

namespace fs = std::filesystem;
const fs::path kKineto = fs::path(PARTRAIN_SOURCE_DIR) / "tests/data/kineto";

std::string partrain(const std::string& args) { return std::string(PARTRAIN_BINARY) + " " + args; }

TEST(ImportCommand, KinetoDirectoryIntoATraceTheOtherCommandsRead) {
  ScratchDir dir;
  const fs::path out = dir.path() / "ddp.db";
  auto imported =
      run_shell(partrain("import " + (kKineto / "ddp").string() + " -o " + out.string()));
  ASSERT_EQ(imported.exit_code, 0) << imported.err;
  EXPECT_NE(imported.err.find("imported 4 Kineto traces (ranks 0-3 of a world of 4;"),
            std::string::npos)
      << imported.err;
  EXPECT_NE(imported.err.find("16 collectives) into"), std::string::npos) << imported.err;
  auto analyzed = run_shell(partrain("analyze --json " + out.string()));
  ASSERT_EQ(analyzed.exit_code, 0) << analyzed.err;
  auto report = parse_json_output(analyzed.out);
  EXPECT_EQ(report["ranks"].size(), 4u) << analyzed.out;
  auto exported =
      run_shell(partrain("export " + out.string() + " -o " + (dir.path() / "ddp.json").string()));
  EXPECT_EQ(exported.exit_code, 0) << exported.err;
  EXPECT_TRUE(fs::exists(dir.path() / "ddp.json"));
  auto top = run_shell(partrain("top --once " + out.string()));
  EXPECT_EQ(top.exit_code, 0) << top.err;
  EXPECT_NE(top.out.find("4 of 4 ranks"), std::string::npos) << top.out;
  auto merged =
      run_shell(partrain("merge " + out.string() + " -o " + (dir.path() / "merged.db").string()));
  EXPECT_EQ(merged.exit_code, 0) << merged.err;
  EXPECT_NE(merged.err.find("(4 ranks,"), std::string::npos) << merged.err;
  auto calibrated =
      run_shell(partrain("recommend --model llama-2-7b --gpus 4 --gpu cpu "
                         "--global-batch 8 --calibrate " +
                         out.string()));
  EXPECT_EQ(calibrated.exit_code, 0) << calibrated.err;
  EXPECT_NE(calibrated.out.find("all_reduce (4 ranks"), std::string::npos) << calibrated.out;
}

TEST(ImportCommand, NsysReportIntoATraceWithKernels) {
  ScratchDir dir;
  const fs::path report = build_nsys_report(dir.path(), "one_report");
  const fs::path out = dir.path() / "nsys.db";
  auto imported = run_shell(
      partrain("import " + report.string() + " -o " + out.string() + " --step-marker train_step"));
  ASSERT_EQ(imported.exit_code, 0) << imported.err;
  EXPECT_NE(imported.err.find("imported 1 Nsight Systems report (ranks 0,1 of a world of 2;"),
            std::string::npos)
      << imported.err;
  auto analyzed = run_shell(partrain("analyze " + out.string()));
  ASSERT_EQ(analyzed.exit_code, 0) << analyzed.err;
  EXPECT_NE(analyzed.out.find("ncclDevKernel_AllReduce"), std::string::npos) << analyzed.out;
}

TEST(ImportCommand, BadInputsExitThreeNamingTheFile) {
  ScratchDir dir;
  write_text(dir.path() / "bad.json", "{\"traceEvents\": [");
  auto malformed = run_shell(partrain("import " + (dir.path() / "bad.json").string() + " -o " +
                                      (dir.path() / "o.db").string()));
  EXPECT_EQ(malformed.exit_code, 3);
  EXPECT_NE(malformed.err.find("bad.json: malformed JSON"), std::string::npos) << malformed.err;
  EXPECT_FALSE(fs::exists(dir.path() / "o.db"));

  write_text(dir.path() / "empty.json", "");
  auto empty = run_shell(partrain("import " + (dir.path() / "empty.json").string() + " -o " +
                                  (dir.path() / "o.db").string()));
  EXPECT_EQ(empty.exit_code, 3) << empty.err;
  EXPECT_NE(empty.err.find("empty.json: the file is empty, no JSON in it"), std::string::npos)
      << empty.err;

  auto missing = run_shell(partrain("import " + (dir.path() / "nope.json").string() + " -o " +
                                    (dir.path() / "o.db").string()));
  EXPECT_EQ(missing.exit_code, 3);
  EXPECT_NE(missing.err.find("nope.json: cannot open"), std::string::npos) << missing.err;

  // A profile with nothing to place, or only events without a numeric ts, is no trace.
  write_text(dir.path() / "none.json", R"({"schemaVersion": 1, "traceEvents": []})");
  write_text(dir.path() / "text_ts.json", R"({"schemaVersion": 1, "traceEvents": [
      {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": "soon",
       "dur": "long"}]})");
  // Another tool's Chrome trace: none of Kineto's metadata.
  write_text(dir.path() / "chrome.json",
             R"({"traceEvents": [{"name": "step", "ph": "X", "ts": 1, "dur": 2, "pid": 1,
                                   "tid": 1}]})");
  auto chrome = run_shell(partrain("import " + (dir.path() / "chrome.json").string() + " -o " +
                                   (dir.path() / "o.db").string()));
  EXPECT_EQ(chrome.exit_code, 3) << chrome.err;
  EXPECT_NE(chrome.err.find("chrome.json: is a Chrome trace but not one torch.profiler wrote"),
            std::string::npos)
      << chrome.err;
  EXPECT_FALSE(fs::exists(dir.path() / "o.db"));
  for (const char* name : {"none.json", "text_ts.json"}) {
    auto nothing = run_shell(partrain("import " + (dir.path() / name).string() + " -o " +
                                      (dir.path() / "o.db").string()));
    EXPECT_EQ(nothing.exit_code, 3) << name;
    EXPECT_NE(nothing.err.find(std::string(name) + ": has no event partrain can place"),
              std::string::npos)
        << nothing.err;
    EXPECT_FALSE(fs::exists(dir.path() / "o.db"));
  }
}

// partrain's own export (for Perfetto and HTA) is not a profiler trace to import back: its events
// are a partrain trace's; the .db it came from is the trace.
TEST(ImportCommand, PartrainsOwnExportIsRefusedPointingToItsTrace) {
  ScratchDir dir;
  const fs::path db = dir.path() / "ddp.db";
  ASSERT_EQ(
      run_shell(partrain("import " + (kKineto / "ddp").string() + " -o " + db.string())).exit_code,
      0);
  for (const std::string& layout : {std::string(""), std::string(" --per-rank")}) {
    const fs::path exported = dir.path() / (layout.empty() ? "whole.json" : "per_rank");
    ASSERT_EQ(run_shell(partrain("export " + db.string() + layout + " -o " + exported.string()))
                  .exit_code,
              0);
    auto back = run_shell(
        partrain("import " + exported.string() + " -o " + (dir.path() / "back.db").string()));
    EXPECT_EQ(back.exit_code, 3) << back.err;
    EXPECT_NE(back.err.find("is partrain's own export (partrain "), std::string::npos) << back.err;
    EXPECT_FALSE(fs::exists(dir.path() / "back.db"));
  }
}

// A partrain trace given to import was called "an SQLite database, but not an Nsight Systems
// export" with advice to run `nsys export`; it is said to be a trace already, to analyze.
TEST(ImportCommand, APartrainTraceIsSaidToBeOneAlready) {
  ScratchDir dir;
  const fs::path db = dir.path() / "ddp.db";
  ASSERT_EQ(
      run_shell(partrain("import " + (kKineto / "ddp").string() + " -o " + db.string())).exit_code,
      0);
  const fs::path again = dir.path() / "again.db";
  auto result = run_shell(partrain("import " + db.string() + " -o " + again.string()));
  EXPECT_EQ(result.exit_code, 3) << result.err;
  EXPECT_NE(result.err.find(db.string() +
                            ": already a partrain trace, nothing to import: analyze "
                            "it (partrain analyze " +
                            db.string() + ")"),
            std::string::npos)
      << result.err;
  EXPECT_EQ(result.err.find("nsys export"), std::string::npos) << result.err;
  EXPECT_FALSE(fs::exists(again));
}

// One rank's file of a 4-rank job: analyze says the other ranks' files were not given, and does
// not take it for one node's partrain trace with other nodes' files to merge.
TEST(ImportCommand, OneRanksFileIsNoNodeFile) {
  ScratchDir dir;
  const fs::path db = dir.path() / "one.db";
  auto imported = run_shell(partrain("import " + (kKineto / "ddp/rank0.pt.trace.json.gz").string() +
                                     " -o " + db.string()));
  ASSERT_EQ(imported.exit_code, 0) << imported.err;
  // One file of one rank in the singular (it read "1 Kineto traces (ranks 0 of").
  EXPECT_NE(imported.err.find("imported 1 Kineto trace (rank 0 of a world of 4;"),
            std::string::npos)
      << imported.err;
  auto analyzed = run_shell(partrain("analyze " + db.string()));
  ASSERT_EQ(analyzed.exit_code, 0) << analyzed.err;
  EXPECT_EQ(analyzed.out.find("node_file"), std::string::npos) << analyzed.out;
  EXPECT_EQ(analyzed.out.find("partrain merge"), std::string::npos) << analyzed.out;
  EXPECT_NE(analyzed.out.find("import_missing_ranks"), std::string::npos) << analyzed.out;
  // Nor for ranks that skipped their collectives: their files were not given.
  EXPECT_EQ(analyzed.out.find("missing_collective"), std::string::npos) << analyzed.out;
  EXPECT_NE(analyzed.out.find("ranks 1-3 of the world of 4 had no trace file"), std::string::npos)
      << analyzed.out;
}

// A directory of a schedule with repeat (two files a rank): refused naming --cycle, imported
// with it; a cycle that is no number is a usage error.
TEST(ImportCommand, SeveralCyclesNeedCycle) {
  ScratchDir dir;
  const fs::path log = dir.path() / "log";
  fs::create_directories(log);
  for (int r = 0; r < 2; ++r) {
    for (int cycle = 1; cycle <= 2; ++cycle) {
      fs::copy_file(kKineto / fmt::format("ddp/rank{}.pt.trace.json.gz", r),
                    log / fmt::format("rank{}.{}.pt.trace.json.gz", r, cycle));
    }
  }
  const fs::path db = dir.path() / "c.db";
  auto refused = run_shell(partrain("import " + log.string() + " -o " + db.string()));
  EXPECT_EQ(refused.exit_code, 3);
  EXPECT_NE(refused.err.find("import one cycle with --cycle 1..2 (or --cycle last)"),
            std::string::npos)
      << refused.err;
  auto bad = run_shell(partrain("import " + log.string() + " --cycle 0 -o " + db.string()));
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--cycle 0: give a cycle number from 1"), std::string::npos) << bad.err;
  auto last = run_shell(partrain("import " + log.string() + " --cycle last -o " + db.string()));
  EXPECT_EQ(last.exit_code, 0) << last.err;
  EXPECT_NE(last.err.find("imported 2 Kineto traces (ranks 0,1 of a world of 4"), std::string::npos)
      << last.err;
}

// torch.profiler's log directory with what torch writes beside the Kineto traces: an
// ExecutionTraceObserver's execution trace and export_memory_timeline's JSON. Importing the
// directory had stopped at them (exit 3, the memory timeline called Chrome's JSON array format):
// it passes over them in one line naming them. A directory holding only them says so.
TEST(ImportCommand, ADirectoryPassesOverTorchsOtherJson) {
  ScratchDir dir;
  const fs::path log = dir.path() / "log";
  fs::create_directories(log);
  for (int r = 0; r < 2; ++r) {
    fs::copy_file(kKineto / fmt::format("ddp/rank{}.pt.trace.json.gz", r),
                  log / fmt::format("rank{}.pt.trace.json.gz", r));
  }
  write_text(log / "et_rank0.json",
             R"({"schema": "1.1.1-chakra.0.0.4", "pid": 1, "nodes": [{"id": 2}]})");
  write_text(log / "memory.json", "[[1796006632478833, 1796006632479887], [[0, 512], [0, 64]]]");
  const fs::path db = dir.path() / "log.db";
  auto imported = run_shell(partrain("import " + log.string() + " -o " + db.string()));
  ASSERT_EQ(imported.exit_code, 0) << imported.err;
  EXPECT_NE(imported.err.find(log.string() +
                              ": passing over et_rank0.json (an execution trace "
                              "(torch's ExecutionTraceObserver, Chakra's schema)), memory.json "
                              "(a memory timeline (torch.profiler's export_memory_timeline)): "
                              "not Kineto traces"),
            std::string::npos)
      << imported.err;
  EXPECT_NE(imported.err.find("imported 2 Kineto traces (ranks 0,1 of a world of 4"),
            std::string::npos)
      << imported.err;

  const fs::path only = dir.path() / "only";
  fs::create_directories(only);
  fs::copy_file(log / "memory.json", only / "memory.json");
  auto nothing =
      run_shell(partrain("import " + only.string() + " -o " + (dir.path() / "only.db").string()));
  EXPECT_EQ(nothing.exit_code, 3) << nothing.err;
  EXPECT_NE(nothing.err.find(only.string() + ": no Kineto trace in it, only JSON torch writes "
                                             "beside them: memory.json (a memory timeline"),
            std::string::npos)
      << nothing.err;
}

// A path given twice (a directory, a file, or a file named and in a directory named) had read as
// a second profiler cycle of each rank ("rank 0 has 2 files ... --cycle 1..2"), and --cycle 2
// imported it: a usage error now, as merge says it.
TEST(ImportCommand, APathGivenTwiceIsAUsageError) {
  ScratchDir dir;
  const std::string ddp = (kKineto / "ddp").string();
  const std::string rank0 = (kKineto / "ddp/rank0.pt.trace.json.gz").string();
  const std::string out = " -o " + (dir.path() / "o.db").string();
  auto directory = run_shell(partrain("import " + ddp + " " + ddp + out));
  EXPECT_EQ(directory.exit_code, 2) << directory.err;
  EXPECT_NE(directory.err.find(ddp + " is given twice: give each rank's trace once"),
            std::string::npos)
      << directory.err;
  auto file = run_shell(partrain("import " + rank0 + " " + rank0 + out + " --cycle 2"));
  EXPECT_EQ(file.exit_code, 2) << file.err;
  EXPECT_NE(file.err.find(rank0 + " is given twice"), std::string::npos) << file.err;
  auto inside = run_shell(partrain("import " + ddp + " " + rank0 + out));
  EXPECT_EQ(inside.exit_code, 2) << inside.err;
  EXPECT_NE(inside.err.find(rank0 + " is given twice"), std::string::npos) << inside.err;
  const std::string spelt = (kKineto / "ddp/../ddp/rank0.pt.trace.json.gz").string();
  auto respelt = run_shell(partrain("import " + rank0 + " " + spelt + out));
  EXPECT_EQ(respelt.exit_code, 2) << respelt.err;
  EXPECT_NE(respelt.err.find(rank0 + " and " + spelt + " are the same file"), std::string::npos)
      << respelt.err;
  EXPECT_FALSE(fs::exists(dir.path() / "o.db"));
}

// A directory whose traces sit in a subdirectory (one per run): import does not look into it,
// and says where they are (it had said "a directory with no trace file in it").
TEST(ImportCommand, ADirectoryWithTracesInASubdirectoryNamesIt) {
  ScratchDir dir;
  const fs::path run1 = dir.path() / "nested/run1";
  fs::create_directories(run1);
  fs::copy_file(kKineto / "ddp/rank0.pt.trace.json.gz", run1 / "rank0.pt.trace.json.gz");
  const fs::path nested = dir.path() / "nested";
  auto r =
      run_shell(partrain("import " + nested.string() + " -o " + (dir.path() / "o.db").string()));
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find(nested.string() +
                       ": no trace file in it, but its subdirectory run1 holds "
                       "some: import reads a directory's own files, not its subdirectories'; "
                       "give one (partrain import " +
                       run1.string() + ") or the files (" + nested.string() + "/*/*.json.gz)"),
            std::string::npos)
      << r.err;
}

// Negative durations are kept as instants, and the import says how many.
TEST(ImportCommand, NegativeDurationsAreCountedInAWarning) {
  ScratchDir dir;
  write_text(dir.path() / "neg.json", R"({"schemaVersion": 1, "traceEvents": [
      {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 100, "dur": -5},
      {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 200, "dur": 10}
      ]})");
  auto r = run_shell(partrain("import " + (dir.path() / "neg.json").string() + " -o " +
                              (dir.path() / "o.db").string()));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("1 events have a negative dur: each is kept as an instant"),
            std::string::npos)
      << r.err;
}

TEST(ImportCommand, ExistingOutputAndMixedInputsAreUsageErrors) {
  ScratchDir dir;
  write_text(dir.path() / "out.db", "x");
  auto exists = run_shell(
      partrain("import " + (kKineto / "ddp").string() + " -o " + (dir.path() / "out.db").string()));
  EXPECT_EQ(exists.exit_code, 2);
  EXPECT_NE(exists.err.find("already exists: choose another output or pass --force"),
            std::string::npos)
      << exists.err;
  auto forced = run_shell(partrain("import " + (kKineto / "ddp").string() + " -o " +
                                   (dir.path() / "out.db").string() + " --force"));
  EXPECT_EQ(forced.exit_code, 0) << forced.err;

  write_text(dir.path() / "r.sqlite",
             std::string("SQLite format 3\0", 16) + std::string(100, '\0'));
  auto mixed = run_shell(partrain("import " + (kKineto / "ddp/rank0.pt.trace.json.gz").string() +
                                  " " + (dir.path() / "r.sqlite").string() + " -o " +
                                  (dir.path() / "m.db").string()));
  EXPECT_EQ(mixed.exit_code, 2);
  EXPECT_NE(mixed.err.find("mix Nsight Systems SQLite exports and Kineto JSON"), std::string::npos)
      << mixed.err;

  // --force never replaces an input, named directly or through a link.
  const fs::path input = dir.path() / "rank0.pt.trace.json.gz";
  fs::copy_file(kKineto / "ddp/rank0.pt.trace.json.gz", input);
  const auto size = fs::file_size(input);
  fs::create_symlink(input, dir.path() / "link.db");
  for (const fs::path& output : {input, dir.path() / "link.db"}) {
    auto onto_input =
        run_shell(partrain("import " + input.string() + " -o " + output.string() + " --force"));
    EXPECT_EQ(onto_input.exit_code, 2) << output;
    EXPECT_NE(onto_input.err.find("is also an input"), std::string::npos) << onto_input.err;
    EXPECT_EQ(fs::file_size(input), size);
  }
}

TEST(ImportCommand, ReadersGivenAKinetoTraceSayToImportIt) {
  const std::string kineto = (kKineto / "ddp/rank0.pt.trace.json.gz").string();
  for (const std::string& command : {"analyze " + kineto, "export " + kineto + " -o /dev/null"}) {
    auto result = run_shell(partrain(command));
    EXPECT_EQ(result.exit_code, 3) << command;
    EXPECT_NE(result.err.find("is gzip-compressed, not a partrain trace: for a PyTorch profiler "
                              "(Kineto) trace, import it first: partrain import"),
              std::string::npos)
        << result.err;
  }
  ScratchDir dir;
  write_text(dir.path() / "t.json", "\n  {\"traceEvents\": []}");
  auto json = run_shell(partrain("analyze " + (dir.path() / "t.json").string()));
  EXPECT_EQ(json.exit_code, 3);
  EXPECT_NE(json.err.find("is JSON, not a partrain trace"), std::string::npos) << json.err;
  // A launcher's log starts with '[' too, and is no JSON.
  write_text(dir.path() / "launch.txt", "[rank 0] gpt step 1 loss 6.2\n");
  auto log = run_shell(partrain("analyze " + (dir.path() / "launch.txt").string()));
  EXPECT_EQ(log.exit_code, 3);
  EXPECT_NE(log.err.find("launch.txt is not an SQLite database, so not a partrain trace"),
            std::string::npos)
      << log.err;
}

// export run.json (no -o) called the Kineto file its own output ("is the trace itself", exit 2),
// and merge run.json run.json called it "given twice" (exit 2): both now say what it is (exit 3),
// as docs/import.md has it.
TEST(ImportCommand, ExportAndMergeNameAKinetoFileBeforeCheckingTheirPaths) {
  ScratchDir dir;
  const fs::path json = dir.path() / "run.json";
  write_text(json, "{\"traceEvents\": []}");
  auto exported = run_shell(partrain("export " + json.string()));
  EXPECT_EQ(exported.exit_code, 3) << exported.err;
  EXPECT_NE(exported.err.find("run.json is JSON, not a partrain trace: for a PyTorch profiler "
                              "(Kineto) trace, import it first"),
            std::string::npos)
      << exported.err;
  auto merged = run_shell(partrain("merge " + json.string() + " " + json.string() + " -o " +
                                   (dir.path() / "x.db").string()));
  EXPECT_EQ(merged.exit_code, 3) << merged.err;
  EXPECT_NE(merged.err.find("run.json is JSON, not a partrain trace"), std::string::npos)
      << merged.err;
  EXPECT_FALSE(fs::exists(dir.path() / "x.db"));
}

TEST(ImportCommand, HelpExplainsTheInputs) {
  auto help = run_shell(partrain("import --help"));
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("tensorboard_trace_handler"), std::string::npos);
  EXPECT_NE(help.out.find("--step-marker"), std::string::npos);
}

}  // namespace
}  // namespace partrain::testing
