// What partrain's own processes set right about how they were started, first thing in main:
// standard descriptors a caller closed, the signal of the file-size limit, and a soft limit on
// open files below what the host allows.
#pragma once

namespace partrain {

// Opens /dev/null on each of descriptors 0, 1 and 2 that is closed: otherwise the next file or
// socket takes the number, and what is meant for stdout lands there (ranks' output in the
// rendezvous socket, which then breaks with SIGPIPE). Opened the wrong way round (stdin for
// writing, stdout and stderr for reading), so that using one fails with EBADF as on a closed
// descriptor: `partrain analyze --json run.db >&-` fails saying stdout cannot be written, as
// `cat >&-` does, instead of exit 0 with the output gone.
void open_missing_standard_fds();

// Whether descriptor `fd` (0, 1 or 2) was closed when main started.
bool was_closed_at_start(int fd);

// Makes stdout and stderr that were closed at the start discard what is written to them: a
// launch started with them closed (a cron job) runs, its ranks' output lost, as torchrun's ranks'
// would be, instead of stopping at the first line it cannot pass on.
void discard_output_to_closed_standard_fds();

// In a child between fork and exec (async-signal-safe): closes the standard descriptors that were
// closed when partrain started, so that the program run sees them closed as it would without
// partrain (call before the child's own redirections).
void close_standard_fds_closed_at_start();

// Ignores SIGXFSZ: a write past RLIMIT_FSIZE (ulimit -f) then fails with EFBIG, handled as a full
// disk is, instead of killing the process without a word and leaving its temporaries behind.
// The processes it starts get the default back (core/subprocess.cpp): a user's program keeps the
// behaviour it would have without partrain.
void ignore_file_size_signal();

// Raises the soft limit on open files to the hard one (at most kMaxOpenFiles): a launcher holds
// sockets, pipes and log files for every rank, and a soft limit lowered by the user's shell
// (ulimit -Sn 32, with a hard limit of 20000) ran out with 4 traced ranks. Call once, before any
// thread starts. The processes partrain starts get the soft limit back (restore_open_files_limit,
// core/subprocess.cpp), as Go's runtime does: a user's program keeps what it would have without
// partrain (select() cannot take descriptors above 1023).
inline constexpr unsigned long kMaxOpenFiles = 1 << 20;
void raise_open_files_limit();
// In a child between fork and exec (async-signal-safe): the soft limit the process started with,
// where raise_open_files_limit changed it.
void restore_open_files_limit();

}  // namespace partrain
