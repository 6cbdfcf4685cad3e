// partrain: the one binary; each subcommand lives in its own cli/*_command.cpp.
#include "cli/app.h"
#include "core/process_start.h"

// Tells libpartrain_inject.so (preloaded by `partrain trace`) that this process records itself.
extern "C" __attribute__((visibility("default"), used)) const int partrain_records_itself = 1;

int main(int argc, char** argv) {
  partrain::open_missing_standard_fds();
  partrain::ignore_file_size_signal();
  partrain::raise_open_files_limit();
  return partrain::cli::run(argc, argv);
}
