// Files a command is writing that must not outlive it when the user stops it: a Ctrl-C'd
// `partrain import` or `merge` leaves no half-written temporary trace beside the output. While a
// RemoveOnSignal lives, SIGINT, SIGTERM and SIGHUP (where the process has not set them aside:
// nohup's ignored SIGHUP stays ignored) unlink its files and then end the process by the same
// signal, so the shell still sees 130 / 143 / 129. SIGKILL cannot be caught: what it leaves, the
// next run removes (profiler/trace_output.h, TemporaryTrace).
#pragma once

#include <string>
#include <vector>

namespace partrain {

class RemoveOnSignal {
 public:
  explicit RemoveOnSignal(std::vector<std::string> files);
  ~RemoveOnSignal();  // the files stay (the caller removes or keeps them)
  RemoveOnSignal(const RemoveOnSignal&) = delete;
  RemoveOnSignal& operator=(const RemoveOnSignal&) = delete;

 private:
  int slot_ = -1;  // -1: every slot was taken; the files are then not removed on a signal
};

}  // namespace partrain
