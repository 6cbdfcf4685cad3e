// How far a long command has got (a collective sweep, the analyses of a big trace, an import),
// for a person watching a terminal: one line on stderr rewritten in place and cleared when the
// command ends. Nothing at all when stderr is not a terminal (or TERM is dumb), so pipes, logs and
// scripts see only the command's own output (stdout is never touched).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace partrain::cli {

class TerminalProgress {
 public:
  // `command` leads each line ("partrain: analyze: ..."). Shown when `out` is a terminal that
  // takes escape sequences (not TERM=dumb or unset: they would show as text).
  explicit TerminalProgress(std::string command, std::FILE* out = stderr);
  // For tests: shown or not whatever `out` is.
  TerminalProgress(std::string command, std::FILE* out, bool shown);
  ~TerminalProgress();
  TerminalProgress(const TerminalProgress&) = delete;
  TerminalProgress& operator=(const TerminalProgress&) = delete;

  // What the command is doing now ("collectives (2 of 6)"). Redrawn at most ten times a second
  // (a sweep of small sizes updates thousands of times), the first and last always.
  void update(std::string_view what);
  void update(std::string_view what, int64_t done, int64_t total);
  // Clears the line (the destructor does too), so what follows starts on a clean line.
  void finish();

 private:
  void draw(const std::string& line, bool force);

  std::string command_;
  std::FILE* out_;
  bool shown_;
  bool drawn_ = false;
  int64_t last_draw_ns_ = 0;
};

}  // namespace partrain::cli
