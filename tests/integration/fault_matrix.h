// The fault matrix: every layout partrain runs x every --inject kind, each at a rank and step
// drawn from a fixed seed (printed, so a case can be replayed), launched for real and judged on
// what the launcher and `analyze` name:
// - hang, stop: the culprit line names the rank and an operation it never entered (or, on a
//   pipeline, a transfer it never posted), and the trace's collective_diagnosis blames it;
// - slow: analyze's straggler finding names the rank;
// - crash, exit, oom: the failure summary names the rank first with its signal or code, and a
//   culprit line, if any, names the same rank;
// - desync: the culprit line names the rank and a world seq at which the trace holds the rank's
//   all_gather.
// The time from the fault (the rank's "--inject" line on stderr) to the diagnosis (the culprit
// line, or the failure summary) is measured on the lines as they arrive.
#pragma once

#include <fmt/format.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "tests/integration/command_runner.h"
#include "tests/support/trace_query.h"

namespace partrain::testing {

struct MatrixLayout {
  std::string name;
  int world = 4;
  std::string flags;
};

// Tiny models: the matrix runs hundreds of launches on a 2-core machine.
inline const std::vector<MatrixLayout>& matrix_layouts() {
  static const std::vector<MatrixLayout> layouts = {
      {"dp", 4, "--dp 4"},
      {"tp", 4, "--tp 4"},
      {"pp gpipe", 4, "--pp 4 --pp-schedule gpipe"},
      {"pp 1f1b", 4, "--pp 4 --pp-schedule 1f1b"},
      {"pp interleaved", 2, "--pp 2 --pp-schedule interleaved --vpp 2"},
      {"sp", 4, "--tp 4 --sp"},
      {"zero 1", 4, "--zero 1"},
      {"zero 2", 4, "--zero 2"},
      {"zero 3", 4, "--zero 3"},
      {"dp x tp", 4, "--dp 2 --tp 2"},
      {"dp x pp", 4, "--dp 2 --pp 2"},
      {"tp x pp", 4, "--tp 2 --pp 2"},
      {"dp x tp x pp", 8, "--dp 2 --tp 2 --pp 2"},
  };
  return layouts;
}

inline const std::vector<std::string>& matrix_kinds() {
  static const std::vector<std::string> kinds = {"hang", "stop",  "slow",  "crash",
                                                 "exit", "oom",   "desync"};
  return kinds;
}

inline constexpr int kMatrixSteps = 4;
// A straggler is judged over the steps after analyze's warm-up: a few more of them, so that a
// loaded machine's noise does not outvote the injected delay.
inline constexpr int kMatrixSlowSteps = 8;
// The watchdog fires 2 s into a hang; a straggler's run must not be cut short by it (a loaded
// machine has stretched a slow pipeline's step past 2 s).
inline constexpr const char* kMatrixTimeout = "2s";
inline constexpr const char* kMatrixSlowTimeout = "60s";
// A straggler well above this machine's noise: 8 ranks on 2 cores make steps of ~300 ms whose
// collectives are late by tens of ms at random.
inline constexpr int kMatrixSlowMs = 400;
inline constexpr const char* kMatrixWorkload =
    "--workload gpt --layers 4 --hidden 32 --heads 4 --seq 16 --vocab 64 --micro-batch 1 "
    "--global-batch 4 --grace 3s --peak-flops 1e9";

struct MatrixCase {
  const MatrixLayout* layout = nullptr;
  std::string kind;
  uint64_t seed = 0;
  int rank = 0;
  int step = 0;
  int code = 0;  // exit only
  std::string spec;
};

// The case a seed draws: its rank, step (every step for slow: a straggler is late repeatedly,
// and the first step is analyze's warm-up) and exit code.
inline MatrixCase draw_case(const MatrixLayout& layout, const std::string& kind, uint64_t seed) {
  const auto cell = static_cast<uint64_t>(std::hash<std::string>{}(layout.name + "/" + kind));
  std::seed_seq seq{seed, cell};
  std::mt19937_64 rng(seq);
  MatrixCase c;
  c.layout = &layout;
  c.kind = kind;
  c.seed = seed;
  c.rank = static_cast<int>(rng() % static_cast<uint64_t>(layout.world));
  c.step = static_cast<int>(rng() % kMatrixSteps);
  c.code = 2 + static_cast<int>(rng() % 100);
  if (kind == "slow") {
    c.spec = fmt::format("slow:rank={},ms={}", c.rank, kMatrixSlowMs);
  } else if (kind == "exit") {
    c.spec = fmt::format("exit:rank={},step={},code={}", c.rank, c.step, c.code);
  } else {
    c.spec = fmt::format("{}:rank={},step={}", kind, c.rank, c.step);
  }
  return c;
}

struct MatrixOutcome {
  bool named = false;
  std::string why;                  // what was wrong, when not named
  std::optional<double> detect_s;   // fault line -> diagnosis line
  double wall_s = 0;
  std::string err;                  // the launcher's stderr
};

// Runs `command` with stderr merged into stdout, timing each line as it arrives.
struct TimedLine {
  double at_s = 0;
  std::string text;
};
inline std::pair<int, std::vector<TimedLine>> run_timed(const std::string& command) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<TimedLine> lines;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return {-1, lines};
  char* buffer = nullptr;
  size_t size = 0;
  while (::getline(&buffer, &size, pipe) > 0) {
    const double at =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::string text(buffer);
    if (!text.empty() && text.back() == '\n') text.pop_back();
    lines.push_back({at, std::move(text)});
  }
  ::free(buffer);
  const int status = ::pclose(pipe);
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return {code, lines};
}

inline bool matches(const std::string& text, const std::string& pattern) {
  return std::regex_search(text, std::regex(pattern));
}

inline MatrixOutcome run_matrix_case(const MatrixCase& c, const std::filesystem::path& trace) {
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(trace.string() + suffix);
  const std::string command = fmt::format(
      "timeout 300 {} launch -n {} {} --steps {} --collective-timeout {} {} --inject {} --trace {}",
      partrain_binary(), c.layout->world, kMatrixWorkload,
      c.kind == "slow" ? kMatrixSlowSteps : kMatrixSteps,
      c.kind == "slow" ? kMatrixSlowTimeout : kMatrixTimeout, c.layout->flags, c.spec,
      trace.string());
  const auto [code, lines] = run_timed(command);
  MatrixOutcome out;
  std::optional<double> fault_at, diagnosed_at;
  std::string culprit_line, summary_line;
  for (const TimedLine& line : lines) {
    out.err += line.text + "\n";
    if (!fault_at && line.text.find("--inject " + c.spec) != std::string::npos) {
      fault_at = line.at_s;
    }
    if (line.text.starts_with("partrain: culprit: ") && culprit_line.empty()) {
      culprit_line = line.text;
      if (!diagnosed_at) diagnosed_at = line.at_s;
    }
    if (line.text.starts_with("partrain: error: rank ") && summary_line.empty()) {
      summary_line = line.text;
      if (!diagnosed_at && c.kind != "hang" && c.kind != "stop" && c.kind != "desync") {
        diagnosed_at = line.at_s;
      }
    }
  }
  if (!lines.empty()) out.wall_s = lines.back().at_s;
  if (fault_at && diagnosed_at) out.detect_s = *diagnosed_at - *fault_at;
  auto fail = [&](std::string why) {
    out.why = std::move(why);
    return out;
  };
  const std::string rank = std::to_string(c.rank);
  // A culprit line, whenever there is one, must not blame another rank.
  if (!culprit_line.empty() && !matches(culprit_line, "^partrain: culprit: rank " + rank + " ")) {
    return fail("the culprit line blames another rank: " + culprit_line);
  }
  if (c.kind == "hang" || c.kind == "stop") {
    if (code != 124) return fail(fmt::format("exit {}, not 124", code));
    const std::string kind = c.kind == "hang" ? "missing_ranks" : "stopped";
    if (!matches(culprit_line, "^partrain: culprit: rank " + rank + " \\(" + kind + " at ")) {
      return fail("no culprit line naming rank " + rank + " as " + kind);
    }
    if (!matches(culprit_line, "it never (entered|posted) ")) {
      return fail("the culprit line names no operation the rank never entered");
    }
    const std::string blamed = TraceQuery(trace).rows(
        "SELECT rank FROM stats WHERE name = 'collective_diagnosis'");
    if (blamed != rank + "\n") return fail("the trace's collective_diagnosis blames " + blamed);
  } else if (c.kind == "slow") {
    if (code != 0) return fail(fmt::format("exit {}, not 0", code));
    const CommandResult analyzed = run_partrain("analyze --json " + trace.string());
    const auto json = nlohmann::json::parse(analyzed.out, nullptr, false);
    if (json.is_discarded()) return fail("analyze --json: " + analyzed.err);
    bool found = false;
    for (const auto& finding : json["findings"]) {
      if (finding["kind"] == "straggler" && finding["rank"] == c.rank) found = true;
    }
    if (!found) return fail("no straggler finding for rank " + rank);
  } else if (c.kind == "crash" || c.kind == "exit" || c.kind == "oom") {
    const int expected = c.kind == "crash" ? 134 : c.kind == "exit" ? c.code : 1;
    if (code != expected) return fail(fmt::format("exit {}, not {}", code, expected));
    const std::string how = c.kind == "crash" ? "signal 6 \\(SIGABRT\\)"
                                              : fmt::format("exit code {}", expected);
    if (!matches(summary_line, "^partrain: error: rank " + rank + " \\(.*\\) failed first with " +
                                   how)) {
      return fail("the summary names another rank or cause: " + summary_line);
    }
  } else if (c.kind == "desync") {
    std::smatch m;
    if (!std::regex_search(culprit_line, m,
                           std::regex("^partrain: culprit: rank " + rank +
                                      " \\(op_mismatch at world seq (\\d+)\\)"))) {
      return fail("no culprit line naming rank " + rank + " and a world seq");
    }
    const std::string op = TraceQuery(trace).rows(fmt::format(
        "SELECT op FROM collectives WHERE rank = {} AND comm_id = 'world' AND seq = {}", c.rank,
        m[1].str()));
    if (op != "all_gather\n") return fail("the named seq holds '" + op + "' on the rank");
  }
  out.named = true;
  return out;
}

struct MatrixCell {
  int named = 0;
  int total = 0;
  std::vector<double> detect_s;
};

// Runs every seed of every (layout, kind) given, prints a line per case, then the table
// (layout x kind: named/total) and the times from fault to diagnosis. Returns the failures.
inline std::vector<std::string> run_fault_matrix(
    const std::vector<const MatrixLayout*>& layouts, const std::vector<std::string>& kinds,
    const std::vector<uint64_t>& seeds, const std::filesystem::path& trace) {
  std::map<std::pair<std::string, std::string>, MatrixCell> cells;
  std::vector<std::string> failures;
  for (const MatrixLayout* layout : layouts) {
    for (const std::string& kind : kinds) {
      for (uint64_t seed : seeds) {
        const MatrixCase c = draw_case(*layout, kind, seed);
        const MatrixOutcome out = run_matrix_case(c, trace);
        MatrixCell& cell = cells[{layout->name, kind}];
        ++cell.total;
        if (out.named) ++cell.named;
        if (out.detect_s) cell.detect_s.push_back(*out.detect_s);
        std::printf("[matrix] %-14s %-6s seed %llu --inject %-32s %s%s (%.1f s%s)\n",
                    layout->name.c_str(), kind.c_str(), static_cast<unsigned long long>(seed),
                    c.spec.c_str(), out.named ? "named" : "NOT NAMED: ", out.why.c_str(),
                    out.wall_s,
                    out.detect_s ? fmt::format(", fault to diagnosis {:.2f} s", *out.detect_s)
                                       .c_str()
                                 : "");
        std::fflush(stdout);
        if (!out.named) {
          failures.push_back(fmt::format("{} {} seed {} (--inject {}): {}\n{}", layout->name,
                                         kind, seed, c.spec, out.why, out.err));
        }
      }
    }
  }
  std::string table = fmt::format("{:<16}", "layout");
  for (const std::string& kind : kinds) table += fmt::format("{:>8}", kind);
  table += "\n";
  std::map<std::string, std::vector<double>> by_kind;
  for (const MatrixLayout* layout : layouts) {
    table += fmt::format("{:<16}", layout->name);
    for (const std::string& kind : kinds) {
      const MatrixCell& cell = cells[{layout->name, kind}];
      table += fmt::format("{:>8}", fmt::format("{}/{}", cell.named, cell.total));
      by_kind[kind].insert(by_kind[kind].end(), cell.detect_s.begin(), cell.detect_s.end());
    }
    table += "\n";
  }
  table += "fault to diagnosis (median, max):\n";
  for (const std::string& kind : kinds) {
    std::vector<double>& times = by_kind[kind];
    if (times.empty()) {
      table += fmt::format("  {:<7} -\n", kind);
      continue;
    }
    std::sort(times.begin(), times.end());
    table += fmt::format("  {:<7} {:.2f} s, {:.2f} s ({} cases)\n", kind, times[times.size() / 2],
                         times.back(), times.size());
  }
  std::printf("%s", table.c_str());
  std::fflush(stdout);
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(trace.string() + suffix);
  return failures;
}

}  // namespace partrain::testing
