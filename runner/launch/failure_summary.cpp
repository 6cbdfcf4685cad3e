#include "runner/launch/failure_summary.h"

#include <signal.h>

#include <charconv>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace partrain::launch {

std::string signal_hint(int signal) {
  switch (signal) {
    case SIGKILL: return "killed by the kernel's OOM killer (see `dmesg`) or by a user?";
    case SIGSEGV: return "a segmentation fault: a bad pointer or a stack overflow in the worker";
    case SIGBUS: return "a bus error: often a full /dev/shm";
    case SIGABRT: return "the worker aborted (a failed assertion or an uncaught C++ exception?)";
    case SIGTERM: return "terminated from outside the launcher (a scheduler's time limit?)";
    default: return "";
  }
}

namespace {

constexpr size_t kMaxErrorFileBytes = 1 << 20;
// As many as a stderr tail shows: the frames nearest the raise.
constexpr size_t kErrorTracebackLines = 12;

std::string rank_span(int first, int count) {
  return count == 1 ? fmt::format("rank {}", first)
                    : fmt::format("ranks {}-{}", first, first + count - 1);
}

std::string node_lost_summary(const RankFailure& failure) {
  // A node whose launcher was stopped by a signal told the others; a lost one could not.
  std::string text = fmt::format(
      "partrain: error: node {} (host {}, launcher pid {}) {} after {}: {}\n", failure.node_rank,
      failure.host, failure.pid, failure.status.signaled ? "stopped" : "was lost",
      format_duration(failure.elapsed), failure.node_lost);
  text += fmt::format("partrain: its {} {} counted as lost\n",
                      rank_span(failure.rank, failure.ranks_lost),
                      failure.ranks_lost == 1 ? "is" : "are");
  text += fmt::format("partrain: the other ranks were stopped; exiting with {}\n",
                      failure.exit_code());
  return text;
}

// One line of a record: the store's encoding is one field per line.
std::string one_line(std::string_view text) {
  std::string line(text);
  for (char& c : line) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return line;
}

template <typename Int>
bool parse_field(std::string_view text, Int& out) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

std::string format_failure_summary(const RankFailure& failure, bool remote,
                                   bool after_program_end) {
  if (!failure.node_lost.empty()) return node_lost_summary(failure);
  std::string text = fmt::format(
      "partrain: error: rank {} (node {}, host {}, pid {}) failed first with {} after {}{}\n",
      failure.rank, failure.node_rank, failure.host, failure.pid, describe_exit(failure.status),
      format_duration(failure.elapsed), remote ? " on another node" : "");
  if (failure.status.signaled && after_program_end) {
    text += fmt::format(
        "partrain: hint: rank {}'s program had ended (its Python atexit handlers had run): the "
        "signal came in the interpreter's shutdown, after its work. A gloo group still alive "
        "then aborts a rank now and then, PyTorch's own race (docs/pytorch.md, \"A rank that "
        "aborts after its program ended\"); `partrain analyze` names the group\n",
        failure.rank);
  } else if (failure.status.signaled) {
    std::string hint = signal_hint(failure.status.value);
    if (!hint.empty()) text += fmt::format("partrain: hint: {}\n", hint);
  }
  if (!failure.error_report.empty()) {
    // torchrun prints the recorded exception rather than the raw stderr, which may be
    // interleaved with other output.
    text += fmt::format("partrain: rank {} raised {} (recorded in its error file by torch's "
                        "@record)\n",
                        failure.rank, failure.error_report.front());
    if (failure.error_report.size() > 1) {
      text += fmt::format("partrain: the last {} line(s) of its traceback:\n",
                          failure.error_report.size() - 1);
      for (size_t i = 1; i < failure.error_report.size(); ++i) {
        text += fmt::format("    {}\n", failure.error_report[i]);
      }
    }
  } else if (failure.stderr_tail.empty()) {
    text += fmt::format("partrain: rank {} wrote nothing on stderr\n", failure.rank);
  } else {
    text += fmt::format("partrain: last {} stderr line(s) of rank {}:\n",
                        failure.stderr_tail.size(), failure.rank);
    for (const auto& line : failure.stderr_tail) text += fmt::format("    {}\n", line);
  }
  text += fmt::format("partrain: the other ranks were stopped; exiting with {}{}\n",
                      failure.exit_code(),
                      failure.status.signaled
                          ? fmt::format(" (128 + signal {})", failure.status.value)
                          : fmt::format(" (rank {}'s exit code)", failure.rank));
  return text;
}

std::vector<std::string> read_error_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  // Bounded: the file is the worker's to write, and a worker may be anything.
  std::string text(kMaxErrorFileBytes, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  const nlohmann::json data = nlohmann::json::parse(text, nullptr, false);
  if (!data.is_object() || !data.contains("message")) return {};
  const nlohmann::json& message = data["message"];
  std::string headline;
  std::string callstack;
  if (message.is_string()) {
    headline = message.get<std::string>();
  } else if (message.is_object()) {
    headline = message.value("message", std::string());
    if (message.contains("extraInfo") && message["extraInfo"].is_object()) {
      callstack = message["extraInfo"].value("py_callstack", std::string());
    }
  }
  if (headline.empty()) return {};
  std::vector<std::string> report{one_line(headline)};
  std::vector<std::string> lines;
  std::istringstream stack(callstack);
  for (std::string line; std::getline(stack, line);) {
    if (!line.empty()) lines.push_back(line);
  }
  const size_t first =
      lines.size() > kErrorTracebackLines ? lines.size() - kErrorTracebackLines : 0;
  report.insert(report.end(), lines.begin() + static_cast<ptrdiff_t>(first), lines.end());
  return report;
}

std::string format_culprit_note(const RankFailure& failure, int culprit) {
  return fmt::format(
      "partrain: rank {} failed first, but the collective diagnosis above blames rank {}: rank "
      "{}'s failure followed from it; start from rank {}\n",
      failure.rank, culprit, failure.rank, culprit);
}

std::string encode_failure(const RankFailure& failure) {
  std::string text = fmt::format("{}\n{}\n{}\n{}\n{}\n{}\n{}\n{}\n{}\n{}\n", failure.rank,
                                 failure.node_rank, one_line(failure.host), failure.pid,
                                 failure.status.signaled ? 1 : 0, failure.status.value,
                                 failure.elapsed.count(), failure.ranks_lost,
                                 one_line(failure.node_lost), failure.error_report.size());
  for (const auto& line : failure.error_report) text += one_line(line) + "\n";
  for (const auto& line : failure.stderr_tail) text += one_line(line) + "\n";
  return text;
}


StatusOr<RankFailure> decode_failure(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    size_t newline = text.find('\n');
    lines.push_back(text.substr(0, newline));
    text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
  }
  RankFailure f;
  int signaled = 0;
  int64_t elapsed_ns = 0;
  size_t report_lines = 0;
  if (lines.size() < 10 || !parse_field(lines[0], f.rank) || !parse_field(lines[1], f.node_rank) ||
      !parse_field(lines[3], f.pid) || !parse_field(lines[4], signaled) ||
      !parse_field(lines[5], f.status.value) || !parse_field(lines[6], elapsed_ns) ||
      !parse_field(lines[7], f.ranks_lost) || !parse_field(lines[9], report_lines) ||
      report_lines > lines.size() - 10) {
    return failed("malformed failure record in the rendezvous store");
  }
  f.host = std::string(lines[2]);
  f.status.signaled = signaled != 0;
  f.elapsed = Nanoseconds(elapsed_ns);
  f.node_lost = std::string(lines[8]);
  for (size_t i = 10; i < 10 + report_lines; ++i) f.error_report.emplace_back(lines[i]);
  for (size_t i = 10 + report_lines; i < lines.size(); ++i) f.stderr_tail.emplace_back(lines[i]);
  return f;
}

}  // namespace partrain::launch
