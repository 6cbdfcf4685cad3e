#include "cli/terminal_progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/env.h"

namespace partrain::cli {
namespace {

constexpr int64_t kRedrawNs = 100'000'000;  // ten lines a second are all an eye follows

}  // namespace

TerminalProgress::TerminalProgress(std::string command, std::FILE* out)
    : TerminalProgress(std::move(command), out,
                       ::isatty(::fileno(out)) == 1 && env::terminal_takes_escapes()) {}

TerminalProgress::TerminalProgress(std::string command, std::FILE* out, bool shown)
    : command_(std::move(command)), out_(out), shown_(shown) {}

TerminalProgress::~TerminalProgress() { finish(); }

void TerminalProgress::update(std::string_view what) {
  draw(fmt::format("partrain: {}: {}", command_, what), false);
}

void TerminalProgress::update(std::string_view what, int64_t done, int64_t total) {
  draw(fmt::format("partrain: {}: {} ({} of {})", command_, what, done, total), done >= total);
}

void TerminalProgress::draw(const std::string& line, bool force) {
  if (!shown_) return;
  const int64_t now = monotonic_ns();
  if (drawn_ && !force && now - last_draw_ns_ < kRedrawNs) return;
  // \r back to the line's start, \033[K erases what a longer previous line left.
  std::fprintf(out_, "\r%s\033[K", line.c_str());
  std::fflush(out_);
  drawn_ = true;
  last_draw_ns_ = now;
}

void TerminalProgress::finish() {
  if (!drawn_) return;
  std::fputs("\r\033[K", out_);
  std::fflush(out_);
  drawn_ = false;
}

}  // namespace partrain::cli
