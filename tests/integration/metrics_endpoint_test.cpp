// `--metrics-port` end to end: a real run scraped while it trains by curl, in both formats, the
// pages parsed by Prometheus' own Python client (Debian's python3-prometheus-client), and the
// figures checked against the trace the run wrote; hostile peers on the port while it runs; a
// port in use stopping the command before anything starts.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <fstream>
#include <map>
#include <regex>
#include <thread>
#include <vector>

#include "analyzers/collective_stats.h"
#include "tests/integration/command_runner.h"
#include "tests/integration/launched_process.h"
#include "tests/integration/metrics_scrape.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/trace_query.h"

namespace partrain::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr char kOpenMetrics[] = "application/openmetrics-text; version=1.0.0";
// Two ranks, rank 1 sleeping 25 ms before each step's compute: a straggler. The run would last
// minutes; the test interrupts it once the page shows what it checks (the analysis names the
// straggler on its second run, 5 s or more after the first, later on a loaded machine).
constexpr char kRun[] =
    "launch -n 2 --workload mlp --layers 2 --hidden 64 --micro-batch 4 --steps 20000 "
    "--inject slow:rank=1,ms=25 --metrics-addr 127.0.0.1";

std::optional<double> get(const Samples& samples, const std::string& key) {
  const auto it = samples.find(key);
  if (it == samples.end()) return std::nullopt;
  return it->second;
}

// Whether some series of the page is named `prefix` up to its remaining labels.
bool has_series_starting(const Samples& samples, const std::string& prefix) {
  const auto it = samples.lower_bound(prefix);
  return it != samples.end() && it->first.starts_with(prefix);
}

std::string curl(int port, const std::string& options) {
  return run_shell(
             fmt::format("curl -sS --max-time 5 {} http://127.0.0.1:{}/metrics", options, port))
      .out;
}

// Prometheus' client parses the page, strictly for OpenMetrics.
void expect_parses(const std::string& page, bool open_metrics, const fs::path& dir) {
  const fs::path file = dir / (open_metrics ? "page.om" : "page.prom");
  std::ofstream(file) << page;
  const std::string parser =
      open_metrics ? "prometheus_client.openmetrics.parser" : "prometheus_client.parser";
  const CommandResult parsed = run_shell(fmt::format(
      "/usr/bin/python3 -c 'import sys, {0}; "
      "print(len(list({0}.text_string_to_metric_families(open(sys.argv[1]).read()))))' {1}",
      parser, file.string()));
  ASSERT_EQ(parsed.exit_code, 0) << "python3-prometheus-client (make test-deps installs it) "
                                    "refused the page:\n"
                                 << parsed.err << page;
  EXPECT_GE(std::stoi(parsed.out), 20) << page;
}

// Peers that send garbage, too little or nothing, all at once, while the run trains.
std::vector<int> hostile_peers(int port) {
  std::vector<int> fds;
  for (int i = 0; i < 150; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    ::inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
      ::close(fd);
      continue;
    }
    std::string bytes;
    if (i % 3 == 0) {
      for (int b = 0; b < 2000; ++b) bytes += static_cast<char>((b * 7919 + i) % 256);
    } else if (i % 3 == 1) {
      bytes = "GET /metr";  // and never the rest
    }
    (void)::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    fds.push_back(fd);
  }
  return fds;
}

std::vector<std::string> words(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string word; in >> word;) out.push_back(word);
  return out;
}

// The real clients the scraping tests drive, installed by `make test-deps`; without them the
// tests skip, saying so.
std::optional<std::string> missing_clients() {
  if (run_shell("command -v curl").exit_code != 0) return "curl is not installed";
  if (run_shell("/usr/bin/python3 -c 'import prometheus_client.openmetrics.parser'").exit_code !=
      0) {
    return "Debian's python3-prometheus-client is not installed";
  }
  return std::nullopt;
}

TEST(MetricsEndpoint, ScrapedFiguresAreTheTraces) {
  if (auto missing = missing_clients()) GTEST_SKIP() << *missing << " (make test-deps)";
  ScratchDir dir;
  const fs::path trace = dir.path() / "run.db";
  const int port = free_port();
  std::vector<std::string> argv = {partrain_binary()};
  for (const std::string& word : words(kRun)) argv.push_back(word);
  for (const std::string& word : {std::string("--metrics-port"), std::to_string(port),
                                  std::string("--trace"), trace.string()}) {
    argv.push_back(word);
  }
  LaunchedProcess launch(argv);
  ASSERT_TRUE(launch.wait_for_stderr(fmt::format("http://127.0.0.1:{}/metrics", port), 30s))
      << launch.finish().err;

  // Hostile peers first: more connections than the server keeps, garbage, half a request.
  std::vector<int> peers = hostile_peers(port);
  EXPECT_GT(peers.size(), 64u);
  (void)launch.wait_for_stderr("\x01never", 1s);  // reads the run's output meanwhile
  for (int fd : peers) ::close(fd);

  // Scrapes until the page shows what is checked below: steps, a matched collective per
  // communicator, and the analysis naming the straggler (its first window after ~5 s).
  std::string open_page;
  Samples om;
  const auto give_up = Clock::now() + 120s;
  while (Clock::now() < give_up) {
    const std::string scraped = curl(port, fmt::format("-H 'Accept: {}'", kOpenMetrics));
    if (scraped.empty()) break;  // the run has ended: the checks below say what was missing
    open_page = scraped;
    om = parse_samples(open_page);
    if (get(om, "partrain_straggler{rank=\"1\"}") == 1.0 &&
        has_series_starting(om, "partrain_collective_seq{comm=\"world\",op=\"all_reduce\",")) {
      break;
    }
    (void)launch.wait_for_stderr("\x01never", 200ms);
  }
  const std::string plain_page = curl(port, "");
  const std::string head =
      run_shell(fmt::format("curl -sS -I --max-time 5 http://127.0.0.1:{}/metrics", port)).out;
  const std::string not_found =
      run_shell(
          fmt::format("curl -sS -o /dev/null -w '%{{http_code}}' --max-time 5 http://127.0.0.1:{}/",
                      port))
          .out;
  const std::string not_allowed =
      run_shell(fmt::format("curl -sS -o /dev/null -w '%{{http_code}}' -X POST --max-time 5 "
                            "http://127.0.0.1:{}/metrics",
                            port))
          .out;
  // The run was long enough for any load; Ctrl-C ends it, keeping its trace.
  ::kill(launch.pid(), SIGINT);
  const Finished finished = launch.finish(120s);
  ASSERT_EQ(finished.exit_code, 130) << finished.err;

  ASSERT_TRUE(open_page.ends_with("# EOF\n")) << open_page;
  EXPECT_EQ(plain_page.find("# EOF"), std::string::npos);
  expect_parses(open_page, true, dir.path());
  expect_parses(plain_page, false, dir.path());
  EXPECT_NE(head.find("200 OK"), std::string::npos) << head;
  EXPECT_NE(head.find("text/plain; version=0.0.4"), std::string::npos) << head;
  EXPECT_EQ(not_found, "404");
  EXPECT_EQ(not_allowed, "405");

  TraceQuery q(trace);
  std::string run_id = q.rows("SELECT run_id FROM runs");
  run_id.pop_back();  // the row's newline
  EXPECT_EQ(get(om, fmt::format("partrain_run_info{{run_id=\"{}\",status=\"running\"}}", run_id)),
            1.0)
      << open_page;
  EXPECT_EQ(get(om, "partrain_world_size"), 2.0);

  // Per rank: the step shown is in the trace with that duration and those tokens.
  for (int rank = 0; rank < 2; ++rank) {
    const std::string label = fmt::format("{{rank=\"{}\"}}", rank);
    const auto step = get(om, "partrain_step" + label);
    ASSERT_TRUE(step) << open_page;
    const std::string row = q.rows(
        fmt::format("SELECT dur_ns, tokens FROM steps WHERE rank = {} AND step = {}", rank, *step));
    ASSERT_FALSE(row.empty()) << "step " << *step << " of rank " << rank;
    const double dur_s = std::stod(row.substr(0, row.find('|'))) / 1e9;
    const double tokens = std::stod(row.substr(row.find('|') + 1));
    EXPECT_NEAR(*get(om, "partrain_step_duration_seconds" + label), dur_s, 1e-9);
    EXPECT_NEAR(*get(om, "partrain_tokens_per_second" + label), tokens / dur_s,
                1e-9 * tokens / dur_s);
    // Parameters never change size: in use now and at peak, as the trace's memory rows say.
    const double params = static_cast<double>(q.number(fmt::format(
        "SELECT max(bytes) FROM memory_events WHERE rank = {} AND category = 'params'", rank)));
    EXPECT_EQ(
        get(om, fmt::format("partrain_memory_bytes{{rank=\"{}\",category=\"params\"}}", rank)),
        params);
    const double activations_peak = static_cast<double>(q.number(fmt::format(
        "SELECT max(bytes) FROM memory_events WHERE rank = {} AND category = 'activations'",
        rank)));
    EXPECT_EQ(
        get(om, fmt::format("partrain_memory_peak_bytes{{rank=\"{}\",category=\"activations\"}}",
                            rank)),
        activations_peak);
  }
  EXPECT_EQ(get(om, "partrain_straggler{rank=\"0\"}"), 0.0);
  EXPECT_EQ(get(om, "partrain_straggler{rank=\"1\"}"), 1.0) << open_page;
  EXPECT_EQ(get(om, "partrain_hang"), 0.0);
  EXPECT_EQ(get(om, "partrain_dropped_events_total"),
            static_cast<double>(
                q.number("SELECT coalesce(sum(value), 0) FROM stats WHERE severity != 'info'")));

  // Each communicator's latest collective: (comm, seq) in the trace, its time the mean of the
  // two members' durations (the median of two), its skew their starts apart, busbw nccl-tests'.
  int communicators = 0;
  for (const auto& [key, seq] : om) {
    std::smatch match;
    if (!std::regex_match(
            key, match,
            std::regex(
                R"re(partrain_collective_seq\{comm="([^"]+)",op="([^"]+)",size_bucket_bytes="([0-9]+)"\})re"))) {
      continue;
    }
    ++communicators;
    const std::string labels = fmt::format("{{comm=\"{}\",op=\"{}\",size_bucket_bytes=\"{}\"}}",
                                           match[1].str(), match[2].str(), match[3].str());
    const std::string members = q.rows(fmt::format(
        "SELECT ts_ns, dur_ns, bytes, group_size FROM collectives WHERE comm_id = '{}' AND seq = "
        "{} AND op = '{}' ORDER BY rank",
        match[1].str(), static_cast<int64_t>(seq), match[2].str()));
    std::vector<std::vector<double>> rows;
    std::istringstream lines(members);
    for (std::string line; std::getline(lines, line);) {
      std::vector<double> fields;
      std::istringstream cells(line);
      for (std::string cell; std::getline(cells, cell, '|');) fields.push_back(std::stod(cell));
      rows.push_back(fields);
    }
    ASSERT_EQ(rows.size(), 2u) << key << "\n" << members;
    // In whole nanoseconds, as the trace and its matcher count them.
    const double time_s = std::floor((rows[0][1] + rows[1][1]) / 2) / 1e9;
    const double n = rows[0][3];
    const double factor = match[2].str() == "all_reduce" ? 2 * (n - 1) / n : 1.0;
    EXPECT_NEAR(*get(om, "partrain_collective_duration_seconds" + labels), time_s, 1e-9) << key;
    EXPECT_NEAR(*get(om, "partrain_collective_skew_seconds" + labels),
                std::fabs(rows[0][0] - rows[1][0]) / 1e9, 1e-9)
        << key;
    EXPECT_EQ(*get(om, "partrain_collective_size_bytes" + labels), rows[0][2]) << key;
    // Its series is that of its size's bucket, as analyze buckets sizes.
    EXPECT_EQ(match[3].str(),
              std::to_string(analyzers::size_bucket(static_cast<int64_t>(rows[0][2]))))
        << key;
    // A barrier moves no bytes: it has no busbw series (not 0 B/s).
    const auto scraped = get(om, "partrain_collective_busbw_bytes_per_second" + labels);
    if (rows[0][2] == 0) {
      EXPECT_FALSE(scraped) << key;
      continue;
    }
    const double busbw = rows[0][2] * factor / time_s;
    ASSERT_TRUE(scraped) << key;
    EXPECT_NEAR(*scraped, busbw, busbw * 1e-6) << key;
  }
  EXPECT_GE(communicators, 1) << open_page;
}

TEST(MetricsEndpoint, APortInUseStopsTheCommandBeforeItStarts) {
  ScratchDir dir;
  const int taken = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  ::inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
  ASSERT_EQ(::bind(taken, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(::listen(taken, 1), 0);
  socklen_t length = sizeof(address);
  ::getsockname(taken, reinterpret_cast<sockaddr*>(&address), &length);
  const int port = ntohs(address.sin_port);
  const fs::path trace = dir.path() / "run.db";
  const std::string metrics = fmt::format("--metrics-addr 127.0.0.1 --metrics-port {}", port);
  for (const std::string& command :
       {fmt::format("launch -n 2 --workload mlp --steps 2 --trace {} {}", trace.string(), metrics),
        fmt::format("trace --trace {} {} -- true", trace.string(), metrics)}) {
    const CommandResult result = run_partrain(command);
    EXPECT_EQ(result.exit_code, 1) << command << "\n" << result.err;
    EXPECT_NE(result.err.find(fmt::format("--metrics-port {}: the port is already in use", port)),
              std::string::npos)
        << result.err;
    EXPECT_EQ(result.err.find("rendezvous"), std::string::npos) << result.err;  // nothing ran
    EXPECT_FALSE(fs::exists(trace)) << command;
  }
  ::close(taken);
}

TEST(MetricsEndpoint, UsageErrorsAreExit2) {
  const std::pair<const char*, const char*> cases[] = {
      {"launch -n 1 --workload mlp --steps 1 --no-trace --metrics-port 0", "--no-trace"},
      {"launch -n 1 --workload mlp --steps 1 --metrics-port 70000", "0..65535"},
      {"launch -n 1 --workload mlp --steps 1 --metrics-addr 127.0.0.1", "add --metrics-port"},
      {"trace --metrics-port -1 -- true", "0..65535"},
      {"trace --metrics-port 0 --metrics-linger soon -- true", "--metrics-linger"},
  };
  for (const auto& [args, says] : cases) {
    const CommandResult result = run_partrain(args);
    EXPECT_EQ(result.exit_code, 2) << args << "\n" << result.err;
    EXPECT_NE(result.err.find(says), std::string::npos) << args << "\n" << result.err;
  }
}

// `partrain trace` serves its own trace's run: the run id it writes. (The refresher runs at
// nice 19, so on a loaded machine its first page of the run may come late: the command lasts.)
TEST(MetricsEndpoint, TraceServesItsRun) {
  if (auto missing = missing_clients()) GTEST_SKIP() << *missing << " (make test-deps)";
  ScratchDir dir;
  const fs::path trace = dir.path() / "t.db";
  const int port = free_port();
  LaunchedProcess traced({partrain_binary(), "trace", "--metrics-addr", "127.0.0.1",
                          "--metrics-port", std::to_string(port), "--trace", trace.string(), "--",
                          "sleep", "10"});
  ASSERT_TRUE(traced.wait_for_stderr("/metrics", 30s)) << traced.finish().err;
  // Scraped during the run, so the endpoint outlives it until its final page, "completed", has
  // been scraped (before, the page said "running" to the end and vanished with the command).
  // Not scraped again until the command says it waits: a scrape loop could take the final page
  // before the command ends, and then it rightly has nothing to wait for.
  auto run_info = [&port] {
    for (const auto& [key, value] : parse_samples(curl(port, ""))) {
      if (key.starts_with("partrain_run_info{") && value == 1) return key;
    }
    return std::string();
  };
  std::string during;
  for (const auto give_up = Clock::now() + 8s; during.empty() && Clock::now() < give_up;) {
    during = run_info();  // the refresher's first page of the run may come late (nice 19)
    std::this_thread::sleep_for(200ms);
  }
  EXPECT_TRUE(during.ends_with("status=\"running\"}")) << during;
  ASSERT_TRUE(traced.wait_for_stderr("serving the run's final page until it is scraped", 60s))
      << traced.finish().err;
  const std::string after = run_info();
  EXPECT_TRUE(after.ends_with("status=\"completed\"}")) << after;
  const Finished finished = traced.finish(60s);
  ASSERT_EQ(finished.exit_code, 0) << finished.err;
  // The endpoint read the trace while its writer closed it: it leaves it one file, as a run
  // without --metrics-port does (its -wal and -shm stayed beside it).
  EXPECT_FALSE(fs::exists(dir.path() / "t.db-wal"));
  EXPECT_FALSE(fs::exists(dir.path() / "t.db-shm"));
  TraceQuery q(trace);
  std::string run_id = q.rows("SELECT run_id FROM runs");
  run_id.pop_back();
  EXPECT_TRUE(after.starts_with(fmt::format("partrain_run_info{{run_id=\"{}\",status=", run_id)))
      << after;
}

// The flight recorder's diagnosis reaches the page: rank 1 hangs, the watchdog fires after 2 s,
// the launcher diagnoses, stops the ranks and exits 124 about a second later. The final page,
// refreshed after the diagnosis and served until scraped, says the run failed, hung, on rank 1.
// Before, the page never showed it (the launcher was gone before the next refresh).
TEST(MetricsEndpoint, TheFlightRecorderDiagnosisIsServedOnTheFinalPage) {
  ScratchDir dir;
  const int port = free_port();
  std::vector<std::string> argv = {partrain_binary()};
  for (const std::string& word :
       words("launch -n 2 --workload mlp --layers 2 --hidden 64 --micro-batch 4 --steps 100000 "
             "--inject hang:rank=1,step=3 --collective-timeout 2s --grace 3s "
             "--metrics-addr 127.0.0.1")) {
    argv.push_back(word);
  }
  for (const std::string& word : {std::string("--metrics-port"), std::to_string(port),
                                  std::string("--trace"), (dir.path() / "hang.db").string()}) {
    argv.push_back(word);
  }
  LaunchedProcess launch(argv);
  ASSERT_TRUE(launch.wait_for_stderr("/metrics", 30s)) << launch.finish().err;
  Samples page;
  const auto give_up = Clock::now() + 90s;
  while (Clock::now() < give_up) {
    page = parse_samples(curl(port, ""));
    if (get(page, "partrain_hang") == 1.0 && page.count("partrain_hang_culprit{rank=\"1\"}")) break;
    (void)launch.wait_for_stderr("\x01never", 200ms);  // reads the run's output meanwhile
  }
  EXPECT_EQ(get(page, "partrain_hang"), 1.0);
  EXPECT_EQ(get(page, "partrain_hang_culprit{rank=\"1\"}"), 1.0);
  bool failed = false;
  for (const auto& [key, value] : page) {
    failed = failed || (key.starts_with("partrain_run_info{") &&
                        key.ends_with("status=\"failed\"}") && value == 1);
  }
  EXPECT_TRUE(failed) << "the run's final status";
  const Finished finished = launch.finish(60s);
  EXPECT_EQ(finished.exit_code, 124) << finished.err;  // the watchdog's, unchanged
  EXPECT_NE(finished.err.find("partrain: diagnosis:"), std::string::npos) << finished.err;
}

// The linger ends at once on Ctrl-C, the exit code the command's; a run nobody scraped (a CI job)
// does not linger at all.
TEST(MetricsEndpoint, LingerEndsOnCtrlCAndOnlyFollowsAScrapedRun) {
  ScratchDir dir;
  int port = free_port();
  LaunchedProcess traced({partrain_binary(), "trace", "--metrics-addr", "127.0.0.1",
                          "--metrics-port", std::to_string(port), "--metrics-linger", "1h",
                          "--trace", (dir.path() / "a.db").string(), "--", "sleep", "3"});
  ASSERT_TRUE(traced.wait_for_stderr("/metrics", 30s)) << traced.finish().err;
  EXPECT_NE(curl(port, "").find("partrain_metrics_refreshes_total"), std::string::npos);
  ASSERT_TRUE(traced.wait_for_stderr("serving the run's final page", 30s)) << traced.finish().err;
  const auto interrupted = Clock::now();
  ::kill(traced.pid(), SIGINT);
  const Finished finished = traced.finish(60s);
  EXPECT_EQ(finished.exit_code, 0) << finished.err;
  EXPECT_LT(Clock::now() - interrupted, 5s);

  port = free_port();
  LaunchedProcess unscraped({partrain_binary(), "trace", "--metrics-addr", "127.0.0.1",
                             "--metrics-port", std::to_string(port), "--metrics-linger", "1h",
                             "--trace", (dir.path() / "b.db").string(), "--", "true"});
  const Finished alone = unscraped.finish(60s);
  EXPECT_EQ(alone.exit_code, 0) << alone.err;
  EXPECT_EQ(alone.err.find("serving the run's final page"), std::string::npos) << alone.err;
}

}  // namespace
}  // namespace partrain::testing
