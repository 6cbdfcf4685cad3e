#include "runner/launch/failure_summary.h"

#include <signal.h>

#include <charconv>

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

std::string format_failure_summary(const RankFailure& failure, bool remote) {
  std::string text = fmt::format(
      "partrain: error: rank {} (node {}, host {}, pid {}) failed first with {} after {}{}\n",
      failure.rank, failure.node_rank, failure.host, failure.pid, describe_exit(failure.status),
      format_duration(failure.elapsed), remote ? " on another node" : "");
  if (failure.status.signaled) {
    std::string hint = signal_hint(failure.status.value);
    if (!hint.empty()) text += fmt::format("partrain: hint: {}\n", hint);
  }
  if (failure.stderr_tail.empty()) {
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

std::string format_culprit_note(const RankFailure& failure, int culprit) {
  return fmt::format(
      "partrain: rank {} failed first, but the collective diagnosis above blames rank {}: rank "
      "{}'s failure followed from it; start from rank {}\n",
      failure.rank, culprit, failure.rank, culprit);
}

std::string encode_failure(const RankFailure& failure) {
  std::string text = fmt::format("{}\n{}\n{}\n{}\n{}\n{}\n{}\n", failure.rank, failure.node_rank,
                                 failure.host, failure.pid, failure.status.signaled ? 1 : 0,
                                 failure.status.value, failure.elapsed.count());
  for (const auto& line : failure.stderr_tail) text += line + "\n";
  return text;
}

namespace {

template <typename Int>
bool parse_field(std::string_view text, Int& out) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

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
  if (lines.size() < 7 || !parse_field(lines[0], f.rank) || !parse_field(lines[1], f.node_rank) ||
      !parse_field(lines[3], f.pid) || !parse_field(lines[4], signaled) ||
      !parse_field(lines[5], f.status.value) || !parse_field(lines[6], elapsed_ns)) {
    return failed("malformed failure record in the rendezvous store");
  }
  f.host = std::string(lines[2]);
  f.status.signaled = signaled != 0;
  f.elapsed = Nanoseconds(elapsed_ns);
  for (size_t i = 7; i < lines.size(); ++i) f.stderr_tail.emplace_back(lines[i]);
  return f;
}

}  // namespace partrain::launch
