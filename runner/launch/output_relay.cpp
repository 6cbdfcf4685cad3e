#include "runner/launch/output_relay.h"

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "core/byte_size.h"
#include "core/log.h"
#include "core/own_file.h"

namespace partrain::launch {
namespace {

// A slot's per-stream state (pending piece, redrawing) is indexed stdout 0, stderr 1.
size_t index_of(Stream stream) { return stream == Stream::kStdout ? 0 : 1; }

// One write per line, so lines of different ranks never interleave mid-line.
// 0, or the errno of the write that failed.
int write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return EIO;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return 0;
}

}  // namespace

StatusOr<std::string> new_run_log_dir(const std::string& root, const std::string& run_id,
                                      int node_rank) {
  std::error_code ec;
  std::filesystem::create_directories(root, ec);
  if (ec) return failed("cannot create the log directory '{}': {}", root, ec.message());
  const std::string name = node_rank == 0 ? run_id : fmt::format("{}.node{}", run_id, node_rank);
  for (int attempt = 1; attempt <= 1000; ++attempt) {
    const std::string dir = attempt == 1 ? fmt::format("{}/{}", root, name)
                                         : fmt::format("{}/{}.{}", root, name, attempt);
    // mkdir, not create_directories: it fails when the directory is there, so two launchers
    // given one --run-id never share one.
    if (::mkdir(dir.c_str(), 0755) == 0) return dir;
    if (errno != EEXIST)
      return failed("cannot create the log directory '{}': {}", dir, strerror(errno));
  }
  return failed(
      "'{}' already holds 1000 log directories of run '{}': pass another --run-id or "
      "--log-dir",
      root, run_id);
}

StatusOr<OutputRelay> OutputRelay::open(RelayOptions options, const std::vector<int>& ranks) {
  OutputRelay relay(std::move(options));
  if (relay.options_.log_dir) {
    std::error_code ec;
    std::filesystem::create_directories(*relay.options_.log_dir, ec);
    if (ec) {
      return failed("cannot create the log directory '{}': {}", *relay.options_.log_dir,
                    ec.message());
    }
  }
  for (int rank : ranks) {
    Slot slot;
    slot.rank = rank;
    slot.prefix = relay.options_.prefix ? fmt::format("[rank {}] ", rank) : "";
    if (relay.options_.log_dir) {
      std::string path = fmt::format("{}/rank_{}.log", *relay.options_.log_dir, rank);
      // The directory may be one others can write to (--log-dir, the dashboard's <trace>.logs):
      // never through a link planted at the name.
      ASSIGN_OR_RETURN(const int fd, open_own_file(path, "the rank's log file"));
      slot.log_file.reset(fd);
      slot.log_path = path;
      if (::ftruncate(fd, 0) != 0) {
        return failed("cannot empty the log file '{}': {}", path, strerror(errno));
      }
    }
    relay.slots_.push_back(std::move(slot));
  }
  return relay;
}

void OutputRelay::emit_line(Slot& slot, Stream stream, std::string_view piece, char end) {
  // What of this line was shown already as a redraw (its state at the end of a read): the line is
  // that and this piece, for the tail and a prefixed terminal, which writes it again over itself
  // (a carriage return instead starts the line afresh). The log gets the piece's bytes alone.
  std::string& shown = slot.shown_redraw[index_of(stream)];
  std::string whole;
  std::string_view line = piece;
  if (end != '\r' && !shown.empty()) {
    whole = shown;
    whole += piece;
    line = whole;
  }
  shown = end == kShownRedraw ? std::string(line) : std::string();
  const bool redraw = end == '\r' || end == kShownRedraw;
  bool& redrawing = slot.redrawing[index_of(stream)];
  if (redraw) redrawing = true;
  if (end == '\n') redrawing = false;
  // A redrawn piece (a progress bar's) is not a line of the failure summary's tail.
  if (stream == Stream::kStderr && !redraw) {
    slot.tail.emplace_back(line);
    while (slot.tail.size() > options_.tail_lines) slot.tail.pop_front();
  }
  // The bytes as the worker wrote them: a newline only where it wrote one (a log file, and the
  // terminal without prefixes, get a worker's output byte for byte). With prefixes every piece
  // ends its line, so that the next one starts with its rank.
  bool logged = false;
  if (slot.log_file.valid()) {
    std::string text(piece);
    if (end == '\n' || end == '\r') text += end;
    logged = write_log(slot, text, end);
  }
  if ((logged && !options_.tee) || terminal_error_ != 0) return;
  int fd = stream == Stream::kStdout ? options_.terminal_stdout : options_.terminal_stderr;
  std::string text;
  if (slot.prefix.empty()) {
    // The bytes as written: a newline only where the worker wrote one.
    text = piece;
    if (end == '\n' || end == '\r') text += end;
  } else {
    // A carriage return goes back to the line's start, where the next piece writes its prefix;
    // a redrawn state already shown has put the cursor there, and an empty piece adds nothing.
    if (end == '\r' && line.empty()) return;
    std::optional<int>& open = open_line_[index_of(stream)];
    const bool continues = open == slot.rank && (end == '\n' || end == kPiece || end == kStreamEnd);
    if (open && !continues) text += '\n';  // another rank's open line (or a redraw) ends here
    if (!continues) text += slot.prefix;
    text += line;
    if (end == '\r' || end == kShownRedraw) {
      text += '\r';
    } else if (end != kPiece) {
      text += '\n';
    }
    open = end == kPiece ? std::optional<int>(slot.rank) : std::nullopt;
  }
  const int error = write_all(fd, text);
  if (error != 0 && stream == Stream::kStdout) terminal_error_ = error;
}

bool OutputRelay::write_log(Slot& slot, std::string_view text, char end) {
  if (slot.log_error == 0) {
    slot.log_error = write_all(slot.log_file.get(), text);
    if (slot.log_error == 0) return true;
    log::warn("rank {}'s log {}: {}: its output goes to the terminal from here on", slot.rank,
              slot.log_path, strerror(slot.log_error));
  }
  slot.lost_bytes += text.size();
  if (end != kPiece && end != kShownRedraw) ++slot.lost_lines;
  return false;
}

std::vector<std::string> OutputRelay::log_losses() const {
  std::vector<std::string> losses;
  for (const Slot& slot : slots_) {
    if (slot.log_error == 0) continue;
    losses.push_back(fmt::format("rank {}'s log {} lost {} lines ({}): {}", slot.rank,
                                 slot.log_path, slot.lost_lines, format_bytes(slot.lost_bytes),
                                 strerror(slot.log_error)));
  }
  return losses;
}

void OutputRelay::show_redraw(Slot& slot, Stream stream, std::string& pending) {
  if (pending.empty() || pending.back() == '\r' || !slot.redrawing[index_of(stream)]) {
    return;
  }
  emit_line(slot, stream, pending, kShownRedraw);
  pending.clear();
}

void OutputRelay::feed(size_t slot_index, Stream stream, std::string_view bytes) {
  Slot& slot = slots_[slot_index];
  std::string& pending = slot.pending[index_of(stream)];
  slot.last_bytes[index_of(stream)] = std::chrono::steady_clock::now();
  // A carriage return that ended the last read waits for the next byte: a CRLF is a newline.
  if (!pending.empty() && pending.back() == '\r' && !bytes.empty() && bytes.front() != '\n') {
    pending.pop_back();
    emit_line(slot, stream, pending, '\r');
    pending.clear();
  }
  while (!bytes.empty()) {
    size_t newline = bytes.find_first_of("\r\n");
    if (newline != std::string_view::npos && bytes[newline] == '\r') {
      if (newline + 1 == bytes.size()) {
        pending.append(bytes);  // CR or CRLF: the next read tells
        return;
      }
      if (bytes[newline + 1] != '\n') {
        pending.append(bytes.substr(0, newline));
        emit_line(slot, stream, pending, '\r');
        pending.clear();
        bytes.remove_prefix(newline + 1);
        continue;
      }
      ++newline;  // CRLF: the line keeps its CR, as written, and ends at the LF
    }
    if (newline == std::string_view::npos) {
      pending.append(bytes);
      if (pending.size() >= options_.max_line_bytes) {
        emit_line(slot, stream, pending, kPiece);
        pending.clear();
      }
      show_redraw(slot, stream, pending);
      return;
    }
    if (pending.empty()) {
      emit_line(slot, stream, bytes.substr(0, newline));
    } else {
      pending.append(bytes.substr(0, newline));
      emit_line(slot, stream, pending);
      pending.clear();
    }
    bytes.remove_prefix(newline + 1);
  }
}

bool OutputRelay::pump(size_t slot, Stream stream, int fd, int max_reads) {
  char buffer[16384];
  for (int round = 0; round < max_reads; ++round) {
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n > 0) {
      feed(slot, stream, std::string_view(buffer, static_cast<size_t>(n)));
      continue;
    }
    if (n < 0 && (errno == EINTR)) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    finish(slot, stream);
    return false;
  }
  return true;
}

void OutputRelay::finish(size_t slot_index, Stream stream) {
  Slot& slot = slots_[slot_index];
  std::string& pending = slot.pending[index_of(stream)];
  if (!pending.empty()) {
    emit_line(slot, stream, pending, kStreamEnd);
    pending.clear();
  }
}

void OutputRelay::show_quiet_pieces(std::chrono::steady_clock::time_point now) {
  for (Slot& slot : slots_) {
    for (Stream stream : {Stream::kStdout, Stream::kStderr}) {
      std::string& pending = slot.pending[index_of(stream)];
      // A carriage return at the end waits for the next byte (a CRLF's half, perhaps).
      if (pending.empty() || pending.back() == '\r' ||
          now - slot.last_bytes[index_of(stream)] < options_.quiet_piece_after) {
        continue;
      }
      emit_line(slot, stream, pending, kPiece);
      pending.clear();
    }
  }
}

}  // namespace partrain::launch
