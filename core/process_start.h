// What partrain's own processes set right about how they were started, first thing in main:
// standard descriptors a caller closed, and the signal of the file-size limit.
#pragma once

namespace partrain {

// Opens /dev/null on each of descriptors 0, 1 and 2 that is closed, as daemons and coreutils do:
// otherwise the next file or socket takes the number, and what is meant for stdout lands there
// (ranks' output in the rendezvous socket, which then breaks with SIGPIPE).
void open_missing_standard_fds();

// Ignores SIGXFSZ: a write past RLIMIT_FSIZE (ulimit -f) then fails with EFBIG, handled as a full
// disk is, instead of killing the process without a word and leaving its temporaries behind.
// The processes it starts get the default back (core/subprocess.cpp): a user's program keeps the
// behaviour it would have without partrain.
void ignore_file_size_signal();

}  // namespace partrain
