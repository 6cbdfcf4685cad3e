// Relays workers' stdout and stderr line by line: "[rank N] " prefixes (switchable), worker stdout
// to the launcher's stdout and worker stderr to its stderr, optional per-rank log files, and the
// last stderr lines of each rank kept for the failure summary.
#pragma once

#include <chrono>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/subprocess.h"

namespace partrain::launch {

enum class Stream { kStdout, kStderr };

struct RelayOptions {
  bool prefix = true;
  std::optional<std::string> log_dir;  // DIR/rank_N.log, both streams, unprefixed
  bool tee = false;                    // with log_dir: print to the terminal as well
  size_t tail_lines = 20;
  // Longer lines go out in pieces of this many bytes (one line still: the next piece continues it
  // without a prefix), so a newline-less stream stays bounded.
  size_t max_line_bytes = 64 * 1024;
  // A partial line that nothing has followed for this long goes out as it stands, its line left
  // open for the rest: a prompt (input(), pdb's "(Pdb) ") or progress dots without a newline.
  std::chrono::milliseconds quiet_piece_after{100};
  int terminal_stdout = 1;
  int terminal_stderr = 2;
};

// A new directory for one run's logs under `root` (torchrun's --log-dir layout): root/<run_id>
// (node N > 0 of several: root/<run_id>.nodeN, as its trace file is named, so nodes sharing the
// directory do not take each other's for a reused id), or .2, .3, ... after it when that exists
// (a --run-id given again), created; root is created as needed. Fails naming the directory and
// the reason.
StatusOr<std::string> new_run_log_dir(const std::string& root, const std::string& run_id,
                                      int node_rank = 0);

class OutputRelay {
 public:
  // One slot per local worker; `ranks[i]` is the global rank of slot i (for prefixes, file names).
  static StatusOr<OutputRelay> open(RelayOptions options, const std::vector<int>& ranks);

  // Bytes a worker wrote; complete lines go out at once, a partial line waits for its end. A
  // carriage return (not of a CRLF) ends a piece too: a progress bar redraws its line with one,
  // and waiting for the newline showed none of it until the bar was done.
  void feed(size_t slot, Stream stream, std::string_view bytes);
  // Reads what `fd` has now (non-blocking), at most `max_reads` reads so one chatty rank cannot
  // starve the others. Returns false at end of stream, after flushing.
  bool pump(size_t slot, Stream stream, int fd, int max_reads = 16);
  // End of stream: a last line without a newline still goes out.
  void finish(size_t slot, Stream stream);
  // Partial lines that nothing has followed since quiet_piece_after before `now` go out as they
  // stand (the launcher calls it whenever it wakes).
  void show_quiet_pieces(std::chrono::steady_clock::time_point now);

  const std::deque<std::string>& stderr_tail(size_t slot) const { return slots_[slot].tail; }
  // Whether writing to stdout failed: its reader went away (`partrain launch ... | head`,
  // EPIPE) or it cannot take more (`> /dev/full`, ENOSPC). The errno, or 0.
  bool terminal_broken() const { return terminal_error_ != 0; }
  int terminal_error() const { return terminal_error_; }
  // Per rank log that a write failed (a full disk, ENOSPC): its path, the reason, and what did
  // not reach it ("rank 1's log /l/rank_1.log lost 120 lines (13.2 KiB): No space left on
  // device"). Its rank's output went to the terminal from then on.
  std::vector<std::string> log_losses() const;

 private:
  struct Slot {
    int rank = 0;
    std::string prefix;
    std::string pending[2];  // partial line per stream
    // The stream's last piece ended in a carriage return: it redraws a line (a progress bar),
    // whose next state is shown when a read ends, not when the next redraw comes.
    bool redrawing[2] = {false, false};
    // A redrawn line's state shown on the prefixed terminal as it stood at the end of a read, the
    // cursor back at its start: the rest of that line, when it comes, is written after it again
    // (tqdm's closing newline arrives on its own: it had come out as an empty "[rank N] " line).
    std::string shown_redraw[2];
    std::chrono::steady_clock::time_point last_bytes[2];  // when the stream last wrote
    UniqueFd log_file;
    std::string log_path;
    int log_error = 0;  // the errno of the first failed write; the log is not written after it
    uint64_t lost_lines = 0;
    uint64_t lost_bytes = 0;
    std::deque<std::string> tail;
  };
  explicit OutputRelay(RelayOptions options) : options_(std::move(options)) {}
  // `piece` without its end. `end`: the '\n' or '\r' that ended the piece; kPiece for part of a
  // line (cut at max_line_bytes, or a quiet one shown): the line stays open for the rest;
  // kStreamEnd for the end of a stream that did not end with a newline; kShownRedraw for a
  // redrawn line's state shown as it stands at the end of a read.
  static constexpr char kPiece = 0;
  static constexpr char kShownRedraw = 1;
  static constexpr char kStreamEnd = 2;
  void emit_line(Slot& slot, Stream stream, std::string_view piece, char end = '\n');
  // At the end of a read: a redrawn line's state so far goes out (its bytes to the log as they
  // are; on a prefixed terminal with its prefix, the cursor back at the line's start).
  void show_redraw(Slot& slot, Stream stream, std::string& pending);
  // Writes a piece to the slot's log: false once the log cannot take it (said once, counted).
  bool write_log(Slot& slot, std::string_view text, char end);

  RelayOptions options_;
  std::vector<Slot> slots_;
  int terminal_error_ = 0;  // stdout failed under us (`| head`): stop writing to it
  // Per terminal stream (stdout, stderr): the rank whose line a piece left open there; the next
  // piece of that rank continues it, anyone else's closes it first.
  std::optional<int> open_line_[2];
};

}  // namespace partrain::launch
